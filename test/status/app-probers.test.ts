import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAppProbers, type AppProbe } from '../../src/status/app-probers.js';

const LIVEZ = '/app-health/web/livez';

/** MESH_APP_PROBERS text with one entry at LIVEZ. */
function one(entry: unknown, path = LIVEZ): string {
  return JSON.stringify({ [path]: entry });
}

function plain(probes: ReadonlyMap<string, AppProbe>): Record<string, unknown> {
  return Object.fromEntries([...probes].map(([k, v]) => [k, { ...v, ...('headers' in v ? { headers: v.headers.map((h) => ({ ...h })) } : {}) }]));
}

describe('parseAppProbers: valid entries', () => {
  it('reads the three kinds of Istio\'s example, with defaults filled in', () => {
    const text = JSON.stringify({
      '/app-health/web/livez': {
        httpGet: { path: '/healthz', port: 8080, scheme: 'HTTP', httpHeaders: [{ name: 'X-Custom', value: '1' }] },
        timeoutSeconds: 1,
      },
      '/app-health/web/readyz': { tcpSocket: { port: 9000 }, timeoutSeconds: 2 },
      '/app-health/grpc/livez': { grpc: { port: 9090, service: 'my.Service' }, timeoutSeconds: 1 },
      '/app-health/web/startupz': { httpGet: { path: 'ready?full=1', port: 8443, scheme: 'HTTPS', host: 'web.local' } },
      '/app-health/db/readyz': { tcpSocket: { port: 5432, host: '10.0.0.9' }, timeoutSeconds: 0 },
      '/app-health/grpc/readyz': { grpc: { port: 9090 }, timeoutSeconds: 5 },
    });
    const { probes, errors } = parseAppProbers(text);
    assert.deepEqual(errors, []);
    assert.deepEqual(plain(probes), {
      '/app-health/web/livez': {
        path: '/app-health/web/livez', container: 'web', type: 'livez', timeoutMs: 1000, kind: 'httpGet',
        scheme: 'HTTP', port: 8080, requestPath: '/healthz', headers: [{ name: 'X-Custom', value: '1' }],
      },
      '/app-health/web/readyz': {
        path: '/app-health/web/readyz', container: 'web', type: 'readyz', timeoutMs: 2000, kind: 'tcpSocket', port: 9000,
      },
      '/app-health/grpc/livez': {
        path: '/app-health/grpc/livez', container: 'grpc', type: 'livez', timeoutMs: 1000, kind: 'grpc',
        port: 9090, service: 'my.Service',
      },
      '/app-health/web/startupz': {
        path: '/app-health/web/startupz', container: 'web', type: 'startupz', timeoutMs: 1000, kind: 'httpGet',
        scheme: 'HTTPS', port: 8443, requestPath: '/ready?full=1', headers: [], host: 'web.local',
      },
      '/app-health/db/readyz': {
        path: '/app-health/db/readyz', container: 'db', type: 'readyz', timeoutMs: 1000, kind: 'tcpSocket',
        port: 5432, host: '10.0.0.9',
      },
      '/app-health/grpc/readyz': {
        path: '/app-health/grpc/readyz', container: 'grpc', type: 'readyz', timeoutMs: 5000, kind: 'grpc',
        port: 9090, service: '',
      },
    });
  });

  const cases: { name: string; text: string }[] = [
    { name: 'empty text', text: '' },
    { name: 'blank text', text: '  \n' },
    { name: 'empty object', text: '{}' },
  ];
  for (const c of cases) {
    it(`${c.name} means no probes and no errors`, () => {
      const { probes, errors } = parseAppProbers(c.text);
      assert.equal(probes.size, 0);
      assert.deepEqual(errors, []);
    });
  }

  it('treats a null kind as absent (Go pointer semantics) and a missing httpGet path as /', () => {
    const { probes, errors } = parseAppProbers(one({ httpGet: { port: 80 }, tcpSocket: null, grpc: null }));
    assert.deepEqual(errors, []);
    const p = probes.get(LIVEZ);
    assert.equal(p?.kind, 'httpGet');
    assert.equal(p.kind === 'httpGet' && p.requestPath, '/');
  });

  it('freezes the table', () => {
    const { probes, errors } = parseAppProbers(one({ tcpSocket: { port: 1 } }));
    assert.ok(Object.isFrozen(probes.get(LIVEZ)));
    assert.ok(Object.isFrozen(errors));
  });
});

describe('parseAppProbers: rejected input', () => {
  const P = `MESH_APP_PROBERS "${LIVEZ}"`;
  const cases: { name: string; text: string; errors: string[] }[] = [
    {
      name: 'a top-level array',
      text: '[1]',
      errors: ['MESH_APP_PROBERS: expected a JSON object of probes keyed by /app-health/<container>/<livez|readyz|startupz>, got an array'],
    },
    {
      name: 'a top-level string',
      text: '"x"',
      errors: ['MESH_APP_PROBERS: expected a JSON object of probes keyed by /app-health/<container>/<livez|readyz|startupz>, got "x"'],
    },
    {
      name: 'a path with another probe type',
      text: one({ tcpSocket: { port: 80 } }, '/app-health/web/alive'),
      errors: ['MESH_APP_PROBERS "/app-health/web/alive": the path must be /app-health/<container>/livez, readyz or startupz; probe ignored'],
    },
    {
      name: 'a path without container',
      text: one({ tcpSocket: { port: 80 } }, '/app-health/livez'),
      errors: ['MESH_APP_PROBERS "/app-health/livez": the path must be /app-health/<container>/livez, readyz or startupz; probe ignored'],
    },
    {
      name: 'a path with a nested container',
      text: one({ tcpSocket: { port: 80 } }, '/app-health/a/b/readyz'),
      errors: ['MESH_APP_PROBERS "/app-health/a/b/readyz": the path must be /app-health/<container>/livez, readyz or startupz; probe ignored'],
    },
    {
      name: 'a path with a trailing slash',
      text: one({ tcpSocket: { port: 80 } }, '/app-health/web/livez/'),
      errors: ['MESH_APP_PROBERS "/app-health/web/livez/": the path must be /app-health/<container>/livez, readyz or startupz; probe ignored'],
    },
    {
      name: 'an entry that is not an object',
      text: one('tcp'),
      errors: [`${P}: the probe is "tcp", not an object; probe ignored`],
    },
    {
      name: 'no kind',
      text: one({ timeoutSeconds: 1 }),
      errors: [`${P}: no probe kind: give exactly one of httpGet, tcpSocket, grpc; probe ignored`],
    },
    {
      name: 'an unknown kind only',
      text: one({ exec: { command: ['true'] } }),
      errors: [`${P}: no probe kind: give exactly one of httpGet, tcpSocket, grpc; probe ignored`],
    },
    {
      name: 'two kinds',
      text: one({ httpGet: { port: 80 }, tcpSocket: { port: 80 } }),
      errors: [`${P}: more than one probe kind (httpGet, tcpSocket): give exactly one of httpGet, tcpSocket, grpc; probe ignored`],
    },
    {
      name: 'three kinds',
      text: one({ httpGet: { port: 80 }, tcpSocket: { port: 80 }, grpc: { port: 80 } }),
      errors: [`${P}: more than one probe kind (httpGet, tcpSocket, grpc): give exactly one of httpGet, tcpSocket, grpc; probe ignored`],
    },
    {
      name: 'a kind that is not an object',
      text: one({ grpc: 9090 }),
      errors: [`${P}: grpc is 9090, not an object; probe ignored`],
    },
    {
      name: 'a named httpGet port',
      text: one({ httpGet: { path: '/', port: 'http' } }),
      errors: [`${P}: httpGet.port "http" is a named port, which cannot be resolved here: give the port number (1-65535); probe ignored`],
    },
    {
      name: 'a missing port',
      text: one({ tcpSocket: {} }),
      errors: [`${P}: tcpSocket.port is missing; probe ignored`],
    },
    {
      name: 'port 0',
      text: one({ tcpSocket: { port: 0 } }),
      errors: [`${P}: tcpSocket.port 0 is not a port number (1-65535); probe ignored`],
    },
    {
      name: 'port 65536',
      text: one({ grpc: { port: 65536 } }),
      errors: [`${P}: grpc.port 65536 is not a port number (1-65535); probe ignored`],
    },
    {
      name: 'a fractional port',
      text: one({ httpGet: { port: 80.5 } }),
      errors: [`${P}: httpGet.port 80.5 is not a port number (1-65535); probe ignored`],
    },
    {
      name: 'a negative port',
      text: one({ tcpSocket: { port: -1 } }),
      errors: [`${P}: tcpSocket.port -1 is not a port number (1-65535); probe ignored`],
    },
    {
      name: 'a lower-case scheme',
      text: one({ httpGet: { port: 80, scheme: 'https' } }),
      errors: [`${P}: httpGet.scheme "https" is not HTTP or HTTPS; probe ignored`],
    },
    {
      name: 'a bad header name',
      text: one({ httpGet: { port: 80, httpHeaders: [{ name: 'Bad Header', value: 'x' }] } }),
      errors: [`${P}: httpGet.httpHeaders[0].name "Bad Header" is not a header name; probe ignored`],
    },
    {
      name: 'a header value with a line break',
      text: one({ httpGet: { port: 80, httpHeaders: [{ name: 'X-A', value: 'a\r\nX-B: b' }] } }),
      errors: [`${P}: httpGet.httpHeaders[0].value "a\r\nX-B: b" is not a header value; probe ignored`],
    },
    {
      name: 'headers that are not a list',
      text: one({ httpGet: { port: 80, httpHeaders: { 'X-A': '1' } } }),
      errors: [`${P}: httpGet.httpHeaders an object is not a list of {name, value}; probe ignored`],
    },
    {
      name: 'a negative timeout',
      text: one({ tcpSocket: { port: 80 }, timeoutSeconds: -1 }),
      errors: [`${P}: timeoutSeconds -1 is not a whole number of seconds; probe ignored`],
    },
    {
      name: 'a string timeout',
      text: one({ tcpSocket: { port: 80 }, timeoutSeconds: '1s' }),
      errors: [`${P}: timeoutSeconds "1s" is not a whole number of seconds; probe ignored`],
    },
    {
      name: 'a non-string grpc service',
      text: one({ grpc: { port: 80, service: 1 } }),
      errors: [`${P}: grpc.service 1 is not a string; probe ignored`],
    },
  ];
  for (const c of cases) {
    it(`rejects ${c.name} with a message naming the key`, () => {
      const { probes, errors } = parseAppProbers(c.text);
      assert.deepEqual(errors, c.errors);
      assert.equal(probes.size, 0);
    });
  }

  it('reports bad JSON without throwing', () => {
    const { probes, errors } = parseAppProbers('{"/app-health/web/livez": {');
    assert.equal(probes.size, 0);
    assert.equal(errors.length, 1);
    assert.match(errors[0]!, /^MESH_APP_PROBERS: not valid JSON: /);
  });

  it('keeps the valid entries next to the rejected ones, in order', () => {
    const { probes, errors } = parseAppProbers(JSON.stringify({
      '/app-health/a/livez': { tcpSocket: { port: 1 } },
      '/app-health/b/livez': { tcpSocket: { port: 'db' } },
      '/healthz': { tcpSocket: { port: 1 } },
      '/app-health/c/readyz': { grpc: { port: 2 } },
    }));
    assert.deepEqual([...probes.keys()], ['/app-health/a/livez', '/app-health/c/readyz']);
    assert.deepEqual(errors, [
      'MESH_APP_PROBERS "/app-health/b/livez": tcpSocket.port "db" is a named port, which cannot be resolved here: give the port number (1-65535); probe ignored',
      'MESH_APP_PROBERS "/healthz": the path must be /app-health/<container>/livez, readyz or startupz; probe ignored',
    ]);
  });
});
