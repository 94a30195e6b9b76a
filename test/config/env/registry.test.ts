import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { VarSpec } from '../../../src/config/env/define.js';
import {
  declarations, defaultText, describeProblem, lookupVariable, readEnvironment,
} from '../../../src/config/env/registry.js';

/** A value that is not of the variable's type (or not among its allowed values). */
function badValue(v: VarSpec): string | undefined {
  switch (v.type) {
    case 'bool': return 'maybe';
    case 'int': return '12abc';
    case 'float': return 'one-half';
    case 'duration': return '10';
    case 'string': return v.allowed || v.allowedList ? 'not-a-listed-value' : undefined;
  }
}

/** A good value of the variable's type and the typed value it must become. */
function goodValue(v: VarSpec): [string, unknown] {
  switch (v.type) {
    case 'bool': return v.default === true ? ['false', false] : ['1', true];
    case 'int': return v.range ? [String(v.range[1]), v.range[1]] : ['-42', -42];
    case 'float': return ['2.5e1', 25];
    case 'duration': return ['1m30.5s', 90_500];
    case 'string': {
      const pick = v.allowed?.find((a) => a !== v.default) ?? v.allowedList?.[0] ?? 'some value';
      return [pick, pick];
    }
  }
}

describe('environment registry', () => {
  it('declares the 209 variables of spec 2.3 and this agent\'s own, once each, described', () => {
    const spec = declarations.filter((v) => !v.agentOwn);
    assert.equal(spec.length, 209);
    assert.deepEqual(declarations.filter((v) => v.agentOwn).map((v) => v.name), [
      'MESH_BLOCK_INBOUND_IPV6', 'MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS', 'MESH_MAX_DOWNSTREAM_CONNECTIONS', 'MESH_MAX_HEADERS_KB',
      'MESH_REQUEST_HEADERS_TIMEOUT', 'MESH_TLS_HANDSHAKE_TIMEOUT', 'MESH_META_WORKLOAD_NAME', 'MESH_METRICS_PREFIX',
    ]);
    assert.equal(new Set(declarations.map((v) => v.name)).size, declarations.length);
    for (const v of declarations) {
      assert.match(v.name, /^[A-Z][A-Z0-9_]*$/);
      assert.ok(v.description.length > 10, `${v.name} has a description`);
      // An addition beyond Istio says so where operators read it (docs/ENVIRONMENT.md).
      assert.equal(v.description.startsWith('This agent\'s own addition, not in Istio.'), v.agentOwn === true, v.name);
    }
  });

  it('uses the names after the arrow for renamed variables', () => {
    assert.ok(lookupVariable('EXTERNAL_MESHD'));
    assert.ok(lookupVariable('PILOT_PROXY_FILTER_STATS'));
    assert.equal(lookupVariable('EXTERNAL_ISTIOD'), undefined);
    assert.equal(lookupVariable('PILOT_ENVOY_FILTER_STATS'), undefined);
  });

  it('types the defaults (durations in milliseconds)', () => {
    const { values, problems } = readEnvironment({});
    assert.deepEqual(problems, []);
    assert.equal(values.FILE_DEBOUNCE_DURATION, 100);
    assert.equal(values.SECRET_TTL, 24 * 3600 * 1000);
    assert.equal(values.METRIC_ROTATION_INTERVAL, 0);
    assert.equal(values.PILOT_JWT_PUB_KEY_REFRESH_INTERVAL, 20 * 60 * 1000);
    assert.equal(values.PROXY_STATUS_PORT, 15021);
    assert.equal(values.MESH_GPRC_MAXRECVMSGSIZE, 4194304);
    assert.equal(values.PILOT_TRACE_SAMPLING, 1);
    assert.equal(values.ENABLE_DEBUG_ON_HTTP, true);
    assert.equal(values.DISABLE_PROXY, false);
    assert.equal(values.DNS_PROXY_ADDR, 'localhost:15053');
    assert.equal(values.MESH_OUTBOUND_OWNER_GROUPS, '*');
    assert.equal(values.PILOT_JWT_ENABLE_REMOTE_JWKS, 'false');
    assert.equal(defaultText(lookupVariable('SECRET_TTL')!), '24h0m0s');
    assert.equal(defaultText(lookupVariable('METRIC_GRACEFUL_DELETION_INTERVAL')!), '5m0s');
    assert.ok(Object.isFrozen(values));
  });

  for (const v of declarations) {
    const bad = badValue(v);
    if (bad !== undefined) {
      it(`reports a bad ${v.type} in ${v.name} by name and keeps the default`, () => {
        const env = readEnvironment({ [v.name]: bad });
        assert.equal(env.problems.length, 1);
        const [p] = env.problems;
        assert.equal(p!.name, v.name);
        const line = describeProblem(p!);
        assert.ok(line.includes(v.name) && line.includes(JSON.stringify(bad)) && line.includes(`type ${v.type}`), line);
        const shown = defaultText(v);
        assert.ok(line.endsWith(`using the default ${shown === '' ? '(empty)' : shown}`), line);
        assert.equal((env.values as Record<string, unknown>)[v.name], (readEnvironment({}).values as Record<string, unknown>)[v.name]);
      });
    }
    const [good, typed] = goodValue(v);
    it(`parses a good ${v.type} in ${v.name}`, () => {
      const env = readEnvironment({ [v.name]: good });
      assert.deepEqual(env.problems, []);
      assert.deepEqual((env.values as Record<string, unknown>)[v.name], typed);
      assert.ok(env.explicit.has(v.name as never));
    });
  }

  it('checks the values the spec lists', () => {
    const cases: [string, string, boolean][] = [
      ['CLOUD_PLATFORM', 'gcp', true], ['CLOUD_PLATFORM', 'none', true], ['CLOUD_PLATFORM', 'openstack', false],
      ['MESH_CLIENT_CONTENT_TYPE', 'json', true], ['MESH_CLIENT_CONTENT_TYPE', 'xml', false],
      ['PILOT_JWT_ENABLE_REMOTE_JWKS', 'hybrid', true], ['PILOT_JWT_ENABLE_REMOTE_JWKS', 'envoy', false],
      ['INBOUND_INTERCEPTION_MODE', 'TPROXY', true], ['INBOUND_INTERCEPTION_MODE', 'tproxy', false],
      ['COMPLIANCE_POLICY', 'fips-140-2', true], ['COMPLIANCE_POLICY', 'fips', false],
      ['PILOT_INSECURE_MULTICLUSTER_CLIENTCONFIG_OPTIONS', 'exec,tokenFile', true],
      ['PILOT_INSECURE_MULTICLUSTER_CLIENTCONFIG_OPTIONS', 'exec,bogus', false],
    ];
    for (const [name, value, ok] of cases) {
      assert.equal(readEnvironment({ [name]: value }).problems.length === 0, ok, `${name}=${value}`);
    }
  });

  it('treats an empty value as unset except for strings', () => {
    const env = readEnvironment({ MESH_CPU_LIMIT: '', PROXY_CONFIG: '', TRUST_DOMAIN: '' });
    assert.deepEqual(env.problems, []);
    assert.equal(env.values.MESH_CPU_LIMIT, 0);
    assert.equal(env.values.TRUST_DOMAIN, '');
    assert.equal(env.explicit.has('MESH_CPU_LIMIT'), false);
  });

  it('ignores variables it does not declare', () => {
    assert.deepEqual(readEnvironment({ SOMETHING_ELSE: 'x', PATH: '/bin' }).problems, []);
  });
});
