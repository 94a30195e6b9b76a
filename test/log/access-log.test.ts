import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Decision } from '../../src/gateway/decisions.js';
import { formatJson, formatText } from '../../src/log/access-log.js';

const base: Decision = {
  time: '2026-11-21T10:00:00.000Z', listener: 'gateway_8080', method: 'GET', authority: 'example.com', path: '/headers',
  jwt: 'absent', authz: 'allowed: no policies', route: 'no route: no rule of mesh-system/app matched', status: 404, durationMs: 1.4,
};

describe('access log lines', () => {
  it('text: request, status, Envoy response flag and every decision', () => {
    assert.equal(formatText(base), '[2026-11-21T10:00:00.000Z] "GET /headers" 404 NR 1ms authority="example.com" upstream=- '
      + 'listener=gateway_8080 jwt="absent" principal=- authz="allowed: no policies" route="no route: no rule of mesh-system/app matched"\n');
  });

  it('flags: UAEX for a bad token, RBAC for a denial, UF for an upstream failure, DC when the client left', () => {
    const flag = (d: Partial<Decision>): string => formatText({ ...base, route: 'vs mesh-system/app rule 0', ...d }).split(' ')[4]!;
    assert.equal(flag({ jwt: 'invalid: expired: Jwt is expired', status: 401 }), 'UAEX');
    assert.equal(flag({ authz: 'denied: DENY policy mesh-system/require-jwt', status: 403 }), 'RBAC');
    assert.equal(flag({ upstream: '10.0.0.1:80', status: 503 }), 'UF');
    assert.equal(flag({ status: undefined }), 'DC');
    assert.equal(flag({ status: 200 }), '-');
    assert.equal(flag({ method: 'TCP', authz: 'denied: tls connection: no ALLOW policy matched', status: undefined }), 'RBAC', 'a refused connection');
    assert.equal(flag({ jwt: 'invalid: malformed', authz: 'denied: x', status: 401 }), 'UAEX');
  });

  it('JSON: one object per line with the flag', () => {
    const line = formatJson(base);
    assert.ok(line.endsWith('\n'));
    const parsed = JSON.parse(line) as Record<string, unknown>;
    assert.equal(parsed['response_flags'], 'NR');
    assert.equal(parsed['status'], 404);
  });
});
