// 15090 and 15020 served for real on port 0: the proxy registry, the merge with a real stand-in
// application, failing parts counted while the answer stays 200, and METRICS_LOCALHOST_ACCESS_ONLY.
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { configureLogging, defaultLogOptions } from '../../../src/log/logger.js';
import { SCOPE_NAMES } from '../../../src/log/levels.js';
import { createAgentMetrics } from '../../../src/metrics/agent-metrics.js';
import { registerProxyMetrics } from '../../../src/metrics/proxy-metrics.js';
import {
  startMergedMetricsServer, startProxyMetricsServer, type AppScrapeTarget, type MetricsServer,
} from '../../../src/metrics/servers.js';
import { ProxyStats } from '../../../src/proxy/stats.js';
import { assertValidPrometheusText, familyOrder } from '../../metrics/prom-text-validator.js';
import { packRequest } from '../../../src/proxy/standard-series.js';
import { sumOf } from '../../helpers/prom-samples.js';

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; body: string }

function httpGet(port: number, path: string, host = '127.0.0.1', method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, method }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A stand-in application: its answer is whatever the test sets. */
class FakeApp {
  server: Server;
  status = 200;
  body = '';
  contentType = 'text/plain; version=0.0.4';
  gzip = false;
  delayMs = 0;
  requests = 0;
  lastAccept = '';
  constructor() {
    this.server = createServer((req, res) => {
      this.requests++;
      this.lastAccept = req.headers.accept ?? '';
      setTimeout(() => {
        const payload = this.gzip ? gzipSync(this.body) : Buffer.from(this.body);
        res.writeHead(this.status, { 'content-type': this.contentType, ...(this.gzip ? { 'content-encoding': 'gzip' } : {}) });
        res.end(payload);
      }, this.delayMs);
    });
  }
  async start(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const appMetrics = [
  '# HELP app_requests_total Requests the app served.',
  '# TYPE app_requests_total counter',
  'app_requests_total{path="/"} 12',
  // The app also exports a family the proxy has: the merge keeps the first HELP/TYPE.
  '# HELP mesh_requests_total The app\'s own idea.',
  '# TYPE mesh_requests_total counter',
  'mesh_requests_total{direction="app"} 1',
  '# TYPE process_cpu_seconds_total counter',
  'process_cpu_seconds_total 1.5',
  '',
].join('\n');

function sample(text: string, pattern: RegExp): number | undefined {
  const m = pattern.exec(text);
  return m ? Number(m[1]) : undefined;
}

before(() => configureLogging({ ...defaultLogOptions, outputLevels: new Map(SCOPE_NAMES.map((s) => [s, 'none'])) }));

describe('proxy metrics server (15090)', () => {
  let server: MetricsServer;
  const stats = new ProxyStats();
  before(async () => {
    const registry = new Registry();
    registerProxyMetrics(registry, stats);
    server = await startProxyMetricsServer({ port: 0, registry, localhostOnly: false });
  });
  after(() => server.close());

  it('listens on :: (both families) by default', () => {
    assert.ok(server.address === '::' || server.address === '0.0.0.0', server.address);
  });

  it('serves the proxy registry at /stats/prometheus with prom-client\'s content type', async () => {
    stats.inbound.recordResponse(200, 4);
    stats.inbound.standard.recordHttp('', '', '', packRequest(200, undefined, 0), 4, 0, 0, 0, 0);
    const r = await httpGet(server.port, '/stats/prometheus');
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    assert.equal(sumOf(r.body, 'mesh_requests_total', { reporter: 'destination', response_code: '200', connection_security_policy: 'none', source_principal: 'unknown' }), 1, r.body);
    assertValidPrometheusText(r.body);
  });

  it('answers 404 elsewhere and 405 to other methods', async () => {
    assert.equal((await httpGet(server.port, '/metrics')).status, 404);
    assert.equal((await httpGet(server.port, '/')).status, 404);
    const post = await httpGet(server.port, '/stats/prometheus', '127.0.0.1', 'POST');
    assert.equal(post.status, 405);
    assert.equal(post.headers['allow'], 'GET, HEAD');
    assert.equal((await httpGet(server.port, '/stats/prometheus?x=1')).status, 200);
  });
});

describe('merged metrics server (15020)', () => {
  const app = new FakeApp();
  let target: AppScrapeTarget;
  let server: MetricsServer;
  const stats = new ProxyStats();
  const proxyRegistry = new Registry();
  registerProxyMetrics(proxyRegistry, stats);
  const agent = createAgentMetrics({ defaultMetrics: false, certChainPath: '/nonexistent/cert-chain.pem', build: { version: '9.9.9', revision: 'r1' } });
  let proxyBroken = false;

  before(async () => {
    target = { port: await app.start(), path: '/metrics', host: '127.0.0.1' };
    server = await startMergedMetricsServer({
      port: 0, host: '127.0.0.1', agentRegistry: agent.registry, app: target, localhostOnly: false, appTimeoutMs: 300,
      proxyMetrics: () => (proxyBroken ? Promise.reject(new Error('proxy is gone')) : proxyRegistry.metrics()),
    });
  });
  after(async () => {
    await server.close();
    await app.close();
  });

  const scrape = async (): Promise<string> => {
    const r = await httpGet(server.port, '/stats/prometheus');
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    assertValidPrometheusText(r.body);
    return r.body;
  };
  const failures = (text: string, type: string): number | undefined =>
    sample(text, new RegExp(`^scrape_failures_total\\{type="${type}"\\} (\\S+)$`, 'm'));
  const scrapes = (text: string, type: string): number | undefined =>
    sample(text, new RegExp(`^scrapes_total\\{type="${type}"\\} (\\S+)$`, 'm'));

  it('merges agent, then proxy, then application metrics into valid text', async () => {
    app.body = appMetrics;
    stats.outbound.recordResponse(200, 1);
    stats.outbound.standard.recordHttp('', '', '', packRequest(200, undefined, 0), 1, 0, 0, 0, 0);
    const text = await scrape();
    const order = familyOrder(text);
    const at = (name: string): number => order.indexOf(name);
    assert.ok(at('mesh_build') >= 0 && at('mesh_build') < at('mesh_requests_total'), 'agent first');
    assert.ok(at('mesh_requests_total') < at('app_requests_total'), 'then proxy, then the app');
    assert.match(text, /^mesh_build\{component="pilot-agent",tag="9\.9\.9",revision="r1"\} 1$/m);
    assert.match(text, /^app_requests_total\{path="\/"\} 12$/m);
    assert.match(text, /^process_cpu_seconds_total 1\.5$/m);
    // One HELP/TYPE for the family both the proxy and the app have; the app's series kept.
    assert.equal(text.match(/^# TYPE mesh_requests_total /gm)?.length, 1);
    assert.match(text, /^# HELP mesh_requests_total Requests completed, by Istio's standard labels/m);
    assert.match(text, /^mesh_requests_total\{direction="app"\} 1$/m);
    assert.match(app.lastAccept, /^text\/plain;version=0\.0\.4/);
    assert.equal(failures(text, 'application'), 0);
  });

  it('counts every part of every scrape in scrapes_total', async () => {
    const before = await scrape();
    const after = await scrape();
    for (const type of ['agent', 'proxy', 'application']) {
      assert.equal(scrapes(after, type)! - scrapes(before, type)!, 1, type);
    }
  });

  it('leaves a failing application out, counts it, and still answers 200', async () => {
    const cases: [string, () => void][] = [
      ['status 500', () => { app.status = 500; }],
      ['invalid text', () => { app.body = 'this is { not metrics\n'; }],
      ['a time-out', () => { app.delayMs = 1000; }],
    ];
    for (const [what, breakIt] of cases) {
      const before = failures(await scrape(), 'application')!;
      breakIt();
      const text = await scrape();
      assert.equal(failures(text, 'application'), before + 1, what);
      assert.doesNotMatch(text, /app_requests_total/, what);
      assert.ok(sumOf(text, 'mesh_requests_total', { reporter: 'source', response_code: '200' }) > 0, `${what}: the proxy part is still there`);
      app.status = 200;
      app.body = appMetrics;
      app.delayMs = 0;
    }
  });

  it('counts a failing proxy part and keeps the others', async () => {
    const before = failures(await scrape(), 'proxy')!;
    proxyBroken = true;
    const text = await scrape();
    proxyBroken = false;
    assert.equal(failures(text, 'proxy'), before + 1);
    assert.doesNotMatch(text, /direction="outbound",response_code/);
    assert.match(text, /^app_requests_total/m);
    assert.match(text, /^mesh_build/m);
  });

  it('reads OpenMetrics and gzip answers of the application', async () => {
    app.contentType = 'application/openmetrics-text; version=1.0.0; charset=utf-8';
    app.gzip = true;
    app.body = '# TYPE om_jobs counter\nom_jobs_total 4\nom_jobs_created 1700000000\n# EOF\n';
    const text = await scrape();
    assert.match(text, /^# TYPE om_jobs_total counter\nom_jobs_total 4$/m);
    assert.doesNotMatch(text, /_created|# EOF/);
    app.contentType = 'text/plain; version=0.0.4';
    app.gzip = false;
    app.body = appMetrics;
  });

  it('answers 404 elsewhere', async () => {
    assert.equal((await httpGet(server.port, '/metrics')).status, 404);
  });

  it('does not scrape itself when the annotation names its own port', async () => {
    const self = await startMergedMetricsServer({
      port: 0, host: '127.0.0.1', agentRegistry: createAgentMetrics({ defaultMetrics: false }).registry,
      proxyMetrics: () => Promise.resolve(''), localhostOnly: false,
    });
    await self.close();
    const again = await startMergedMetricsServer({
      port: self.port, host: '127.0.0.1', agentRegistry: createAgentMetrics({ defaultMetrics: false }).registry,
      proxyMetrics: () => Promise.resolve(''), localhostOnly: false, app: { port: self.port, path: '/stats/prometheus' },
    });
    try {
      const r = await httpGet(again.port, '/stats/prometheus');
      assert.equal(r.status, 200);
      assert.doesNotMatch(r.body, /type="application"/);
    } finally {
      await again.close();
    }
  });
});

describe('METRICS_LOCALHOST_ACCESS_ONLY', () => {
  /** An address of this host that is not loopback, so a request to it does not come from 127.0.0.1. */
  const external = Object.values(networkInterfaces()).flat().find((a) => a && !a.internal && a.family === 'IPv4')?.address;
  let open: MetricsServer;
  let closed: MetricsServer;
  before(async () => {
    const registry = new Registry();
    registerProxyMetrics(registry, new ProxyStats());
    closed = await startProxyMetricsServer({ port: 0, registry, localhostOnly: true });
    open = await startMergedMetricsServer({
      port: 0, agentRegistry: createAgentMetrics({ defaultMetrics: false }).registry,
      proxyMetrics: () => registry.metrics(), localhostOnly: true,
    });
  });
  after(async () => {
    await closed.close();
    await open.close();
  });

  it('serves requests from 127.0.0.1 and ::1', async () => {
    for (const server of [closed, open]) {
      assert.equal((await httpGet(server.port, '/stats/prometheus')).status, 200);
      const v6 = await httpGet(server.port, '/stats/prometheus', '::1').catch(() => undefined);
      if (v6) assert.equal(v6.status, 200);
    }
  });

  it('answers 403 to a peer that is not loopback', async (t) => {
    if (!external) {
      t.skip('this host has no non-loopback IPv4 address');
      return;
    }
    for (const server of [closed, open]) {
      const r = await httpGet(server.port, '/stats/prometheus', external);
      assert.equal(r.status, 403);
      assert.match(r.body, /localhost only \(METRICS_LOCALHOST_ACCESS_ONLY\)/);
    }
  });
});
