// The admin API served for real on port 0 with stand-in hooks: every endpoint, methods and status
// codes, filters, log-level changes visible in scopeLevels(), hooks called, odd input survived.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { startAdminServer, type AdminHooks, type AdminServer, type ServerState } from '../../../src/admin/server.js';
import { configureLogging, defaultLogOptions, scopeLevels } from '../../../src/log/logger.js';
import { SCOPE_NAMES } from '../../../src/log/levels.js';
import { registerProxyMetrics } from '../../../src/metrics/proxy-metrics.js';
import { ProxyStats } from '../../../src/proxy/stats.js';
import { assertValidPrometheusText } from '../../metrics/prom-text-validator.js';
import { packRequest } from '../../../src/proxy/standard-series.js';
import { sumOf } from '../../helpers/prom-samples.js';

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

export function httpRequest(port: number, method: string, path: string, host = '127.0.0.1', body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, method, path }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Sends raw bytes and returns what came back before the server closed or 1 s passed. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8').on('data', (d: string) => { text += d; });
    socket.on('connect', () => socket.write(bytes));
    const done = (): void => resolve(text);
    socket.on('close', done);
    socket.on('error', done);
    setTimeout(() => { socket.destroy(); }, 1000).unref();
  });
}

class Calls {
  drain = 0;
  quit = 0;
  healthcheck: boolean[] = [];
}

function hooks(calls: Calls, state: { value: ServerState }, stats: ProxyStats, registry: Registry): AdminHooks {
  return {
    stats,
    proxyRegistry: registry,
    state: () => state.value,
    serverInfo: () => ({ version: '1.2.3', uptime_current_epoch: '5s', command_line_options: { concurrency: 2 }, node: { id: 'sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local', cluster: 'web.ns' } }),
    configDump: () => ({ listeners: [{ name: 'virtualOutbound' }], routes: [], clusters: [], resources: [], bootstrap: { adminPort: 15000 } }),
    listeners: () => [{ name: 'virtualOutbound', address: '0.0.0.0', port: 15001 }, { name: 'virtualInbound', address: '0.0.0.0', port: 15006 }],
    clusters: () => [{ name: 'outbound', address: '10.0.0.9', port: 8080, cxActive: 1, cxTotal: 3, rqTotal: 7, connectFail: 0 }],
    drainListeners: () => { calls.drain++; },
    setHealthcheckFailed: (failed) => { calls.healthcheck.push(failed); },
    quit: () => { calls.quit++; },
    decisions: () => [{ listener: 'gateway_8080', path: '/headers', jwt: 'absent', authz: 'allowed: no policies', route: 'no route', status: 404 }],
    extraStats: () => [{ name: 'http.gateway.decisions.route.no_route', value: 1 }],
  };
}

describe('admin API (real server)', () => {
  let server: AdminServer;
  const calls = new Calls();
  const state: { value: ServerState } = { value: 'LIVE' };
  const stats = new ProxyStats();
  const registry = new Registry();
  registerProxyMetrics(registry, stats);
  stats.outbound.cxTotal = 5;
  stats.outbound.recordResponse(200, 2);
  stats.outbound.recordResponse(503, 40);
  stats.outbound.standard.recordHttp('', '', '', packRequest(503, undefined, 0), 40, 0, 0, 0, 0);
  const get = (path: string): Promise<Answer> => httpRequest(server.port, 'GET', path);
  const post = (path: string, body?: string): Promise<Answer> => httpRequest(server.port, 'POST', path, '127.0.0.1', body);

  before(async () => {
    configureLogging({ ...defaultLogOptions, outputLevels: new Map(SCOPE_NAMES.map((s) => [s, 'none'])) });
    const started = await startAdminServer({ port: 0, enabled: true, hooks: hooks(calls, state, stats, registry) });
    assert.ok(started);
    server = started;
  });
  after(() => server?.close());

  it('/debug/decisions lists the last decisions; /stats shows the extra counters', async () => {
    const answer = await get('/debug/decisions');
    assert.equal(answer.status, 200);
    const body = JSON.parse(answer.body) as { decisions: { route: string; status: number }[] };
    assert.deepEqual(body.decisions.map((d) => [d.route, d.status]), [['no route', 404]]);
    assert.match((await get('/stats')).body, /^http\.gateway\.decisions\.route\.no_route: 1$/m);
  });

  it('listens on the loopback addresses only', () => {
    assert.ok(server.port > 0);
    assert.equal(server.addresses[0], '127.0.0.1');
    for (const a of server.addresses) assert.ok(a === '127.0.0.1' || a === '::1', a);
  });

  it('answers on ::1 as well where IPv6 is on', async (t) => {
    if (!server.addresses.includes('::1')) {
      t.skip('no IPv6 loopback here');
      return;
    }
    assert.equal((await httpRequest(server.port, 'GET', '/ready', '::1')).status, 200);
  });

  it('/stats prints Envoy\'s name: value lines, sorted', async () => {
    const r = await get('/stats');
    assert.equal(r.status, 200);
    assert.match(String(r.headers['content-type']), /^text\/plain/);
    assert.match(r.body, /^listener\.0\.0\.0\.0_15001\.downstream_cx_total: 5$/m);
    assert.match(r.body, /^http\.outbound\.downstream_rq_2xx: 1$/m);
    assert.match(r.body, /^http\.outbound\.downstream_rq_5xx: 1$/m);
    assert.match(r.body, /^http\.outbound\.downstream_rq_completed: 2$/m);
    assert.match(r.body, /^cluster\.outbound\.upstream_cx_connect_fail: 0$/m);
    assert.match(r.body, /^server\.live: 1$/m);
    assert.match(r.body, /^server\.state: 0$/m);
    assert.match(r.body, /^server\.uptime: \d+$/m);
    assert.match(r.body, /^server\.memory_allocated: [1-9]\d*$/m);
    assert.match(r.body, /^http\.outbound\.downstream_rq_time: P0\(nan,1\) /m);
    const plain = r.body.split('\n').filter((l) => l !== '' && !l.includes('_rq_time'));
    assert.deepEqual(plain, [...plain].sort());
    for (const line of plain) assert.match(line, /^[\w.[\]|-]+: \d+$/);
  });

  it('/stats?filter= takes a regex; a bad one is a 400 naming it', async () => {
    const r = await get(`/stats?filter=${encodeURIComponent('^server\\.(live|state)$')}`);
    assert.equal(r.body, 'server.live: 1\nserver.state: 0\n');
    const bad = await get('/stats?filter=(unclosed');
    assert.equal(bad.status, 400);
    assert.match(bad.body, /filter: invalid regex "\(unclosed"/);
  });

  it('/stats?usedonly leaves zeros out', async () => {
    const r = await get('/stats?usedonly');
    assert.doesNotMatch(r.body, /: 0$/m);
    assert.match(r.body, /downstream_cx_total: 5/);
  });

  it('/stats?format=json is Envoy\'s JSON', async () => {
    const r = await get('/stats?format=json&filter=rq_2xx');
    assert.equal(r.status, 200);
    assert.match(String(r.headers['content-type']), /^application\/json/);
    assert.deepEqual(JSON.parse(r.body), { stats: [
      { name: 'http.inbound.downstream_rq_2xx', value: 0 }, { name: 'http.outbound.downstream_rq_2xx', value: 1 },
    ] });
    assert.equal((await get('/stats?format=yaml')).status, 400);
  });

  it('/stats?format=prometheus and /stats/prometheus are the proxy registry', async () => {
    for (const path of ['/stats?format=prometheus', '/stats/prometheus']) {
      const r = await get(path);
      assert.equal(r.status, 200);
      assert.equal(r.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
      assert.equal(sumOf(r.body, 'mesh_requests_total', { reporter: 'source', response_code: '503', request_protocol: 'http', connection_security_policy: 'unknown' }), 1, r.body);
      assertValidPrometheusText(r.body);
    }
    const filtered = await get('/stats/prometheus?filter=^mesh_requests_total$');
    assert.equal(filtered.body.match(/^# TYPE /gm)?.length, 1);
    assertValidPrometheusText(filtered.body);
  });

  it('/config_dump, /server_info are JSON from the hooks', async () => {
    const dump = await get('/config_dump');
    assert.equal(dump.status, 200);
    assert.deepEqual(Object.keys(JSON.parse(dump.body) as object), ['listeners', 'routes', 'clusters', 'resources', 'bootstrap']);
    const info = JSON.parse((await get('/server_info')).body) as Record<string, unknown>;
    assert.equal(info['state'], 'LIVE');
    assert.equal(info['version'], '1.2.3');
    assert.deepEqual(info['node'], { id: 'sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local', cluster: 'web.ns' });
  });

  it('/clusters and /listeners in text and JSON', async () => {
    const clusters = await get('/clusters');
    assert.match(clusters.body, /^outbound::10\.0\.0\.9:8080::cx_active::1$/m);
    assert.match(clusters.body, /^outbound::10\.0\.0\.9:8080::rq_total::7$/m);
    const cj = JSON.parse((await get('/clusters?format=json')).body) as { cluster_statuses: { name: string }[] };
    assert.equal(cj.cluster_statuses[0]!.name, 'outbound');
    assert.equal((await get('/listeners')).body, 'virtualOutbound::0.0.0.0:15001\nvirtualInbound::0.0.0.0:15006\n');
    const lj = JSON.parse((await get('/listeners?format=json')).body) as { listener_statuses: { name: string }[] };
    assert.deepEqual(lj.listener_statuses.map((l) => l.name), ['virtualOutbound', 'virtualInbound']);
  });

  it('/ready is 200 LIVE, else 503 with the state', async () => {
    assert.deepEqual(await get('/ready').then((r) => [r.status, r.body]), [200, 'LIVE\n']);
    for (const s of ['PRE_INITIALIZING', 'INITIALIZING', 'DRAINING'] as const) {
      state.value = s;
      assert.deepEqual(await get('/ready').then((r) => [r.status, r.body]), [503, `${s}\n`]);
    }
    state.value = 'LIVE';
  });

  it('/logging lists every scope on GET and changes levels on POST', async () => {
    const list = await get('/logging');
    assert.equal(list.status, 200);
    assert.match(list.body, /^active loggers:\n/);
    for (const s of SCOPE_NAMES) assert.match(list.body, new RegExp(`^  ${s}: none$`, 'm'));

    const one = await post('/logging?dns=debug');
    assert.equal(one.status, 200);
    assert.match(one.body, /^ {2}dns: debug$/m);
    assert.equal(scopeLevels().dns, 'debug');
    assert.equal(scopeLevels().ads, 'none');

    await post('/logging?level=warning');
    for (const s of SCOPE_NAMES) assert.equal(scopeLevels()[s], 'warn');

    const bad = await post('/logging?nosuch=debug');
    assert.equal(bad.status, 400);
    assert.match(bad.body, /unknown scope "nosuch"/);
    const badLevel = await post('/logging?dns=loud&ads=error');
    assert.equal(badLevel.status, 400);
    assert.match(badLevel.body, /unknown level "loud" for scope dns/);
    assert.equal(scopeLevels().ads, 'warn', 'nothing applied when one entry is bad');

    const viaGet = await get('/logging?dns=debug');
    assert.equal(viaGet.status, 405);
    assert.equal(viaGet.headers['allow'], 'POST');
    assert.equal(scopeLevels().dns, 'warn');
    await post('/logging?level=none');
  });

  it('POST-only endpoints call their hooks; GET on them is 405 with Allow: POST', async () => {
    for (const path of ['/drain_listeners', '/healthcheck/fail', '/healthcheck/ok', '/quitquitquit']) {
      const r = await get(path);
      assert.equal(r.status, 405, path);
      assert.equal(r.headers['allow'], 'POST', path);
    }
    assert.deepEqual([calls.drain, calls.quit, calls.healthcheck], [0, 0, []]);
    assert.deepEqual(await post('/drain_listeners').then((r) => [r.status, r.body]), [200, 'OK\n']);
    assert.deepEqual(await post('/healthcheck/fail').then((r) => [r.status, r.body]), [200, 'OK\n']);
    await post('/healthcheck/ok');
    assert.deepEqual(await post('/quitquitquit', 'ignored body').then((r) => [r.status, r.body]), [200, 'OK\n']);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual([calls.drain, calls.quit, calls.healthcheck], [1, 1, [true, false]]);
  });

  it('/ and /help list the endpoints; unknown paths are 404 with the list', async () => {
    for (const path of ['/', '/help']) {
      const r = await get(path);
      assert.equal(r.status, 200);
      for (const e of ['/stats', '/stats/prometheus', '/config_dump', '/clusters', '/listeners', '/server_info', '/ready',
        '/logging', '/drain_listeners', '/healthcheck/fail', '/healthcheck/ok', '/quitquitquit']) {
        assert.match(r.body, new RegExp(`^  ${e.replace(/\//g, '\\/')}: `, 'm'), e);
      }
    }
    const missing = await get('/nothing/here?x=1');
    assert.equal(missing.status, 404);
    assert.match(missing.body, /^no such endpoint: \/nothing\/here\nadmin endpoints:\n/);
    assert.match(missing.body, /^ {2}\/quitquitquit: /m);
  });

  it('refuses other methods on read endpoints with 405 and Allow', async () => {
    const r = await httpRequest(server.port, 'DELETE', '/stats');
    assert.equal(r.status, 405);
    assert.equal(r.headers['allow'], 'GET, HEAD, POST');
    const head = await httpRequest(server.port, 'HEAD', '/stats');
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
  });

  it('survives odd input: garbage, bad targets, absolute URLs, huge queries', async () => {
    assert.match(await raw(server.port, 'NOT HTTP AT ALL\r\n\r\n'), /^HTTP\/1\.1 400 Bad Request/);
    assert.match(await raw(server.port, 'GET /stats HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'), /^HTTP\/1\.1 400/);
    assert.match(await raw(server.port, 'GET http://localhost/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), /^HTTP\/1\.1 200 OK[\s\S]*LIVE/);
    assert.match(await raw(server.port, 'GET //evil/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), /^HTTP\/1\.1 (400|404)/);
    assert.equal((await get(`/stats?filter=${'a'.repeat(5000)}`)).status, 200);
    assert.equal((await get('/stats?filter=%E0%A4%A')).status, 200);
    assert.equal((await get('/ready')).status, 200, 'still serving');
  });

  it('answers 500 naming the endpoint when a hook throws', async () => {
    const broken = await startAdminServer({
      port: 0, enabled: true,
      hooks: { ...hooks(new Calls(), state, stats, registry), configDump: () => { throw new Error('no config yet'); } },
    });
    try {
      const r = await httpRequest(broken!.port, 'GET', '/config_dump');
      assert.equal(r.status, 500);
      assert.match(r.body, /\/config_dump failed: no config yet/);
    } finally {
      await broken?.close();
    }
  });
});

describe('admin API disabled (ENABLE_DEBUG_ON_HTTP=false)', () => {
  it('does not listen at all', async () => {
    const registry = new Registry();
    const result = await startAdminServer({ port: 0, enabled: false, hooks: hooks(new Calls(), { value: 'LIVE' }, new ProxyStats(), registry) });
    assert.equal(result, undefined);
  });
});
