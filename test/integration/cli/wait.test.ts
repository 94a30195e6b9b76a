// `pilot-agent wait` against real servers: plain HTTP, HTTPS, late readiness, time-outs, and the
// spec's default URL (https://:15021/healthz/ready) inside a network namespace of the test's own.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';

const CERT = join(repoRoot, 'test', 'fixtures', 'localhost.crt');
const KEY = join(repoRoot, 'test', 'fixtures', 'localhost.key');

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    resolve(typeof address === 'object' && address ? address.port : 0);
  }));
}

describe('pilot-agent wait', () => {
  const servers: Server[] = [];
  after(() => servers.forEach((s) => s.close()));

  it('exits 0 once the URL answers 200, polling through 503s', async () => {
    let hits = 0;
    const server = createServer((_req, res) => { res.statusCode = ++hits >= 3 ? 200 : 503; res.end(); });
    servers.push(server);
    const port = await listen(server);
    const r = await runCli(['wait', '--url', `http://127.0.0.1:${port}/healthz/ready`, '--periodMillis', '50', '--timeoutSeconds', '10']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(hits, 3);
    assert.match(r.stdout, /The proxy is ready!/);
  });

  it('exits 1 with the last error when the time is up', async () => {
    const server = createServer((_req, res) => { res.statusCode = 503; res.end('draining\n'); });
    servers.push(server);
    const port = await listen(server);
    const started = Date.now();
    const r = await runCli(['wait', '--url', `http://127.0.0.1:${port}/healthz/ready`, '--periodMillis', '100', '--timeoutSeconds', '1']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /timeout waiting for the proxy to become ready.*Last error: HTTP status code 503: draining$/m);
    assert.ok(Date.now() - started >= 1000, 'waited the full second');
  });

  it('bounds each attempt by --requestTimeoutMillis', async () => {
    const server = createServer(() => { /* never answers */ });
    servers.push(server);
    const port = await listen(server);
    const r = await runCli(['wait', '--url', `http://127.0.0.1:${port}/`, '--requestTimeoutMillis', '100', '--timeoutSeconds', '1']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Last error: no response within 100ms/);
    server.closeAllConnections();
  });

  it('reports a refused connection as the last error', async () => {
    const server = createServer();
    const port = await listen(server);
    await new Promise((resolve) => server.close(resolve));
    const r = await runCli(['wait', '--url', `http://127.0.0.1:${port}/`, '--timeoutSeconds', '0']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Last error: connect ECONNREFUSED/);
  });

  describe('with the default URL, in a network namespace', () => {
    let ns: Netns | undefined;
    before(() => { ns = createNetns(); });
    after(() => ns?.close());

    it('succeeds against a plain-HTTP status port 15021 (as the proxy serves it)', async () => {
      assert.ok(ns, 'needs root to create a network namespace');
      await ns.startServer(['--port', '15021', '--ready-after', '700']);
      const r = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '10']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /The proxy is ready!/);
    });

    it('also succeeds against an HTTPS status port with a self-signed certificate', async () => {
      assert.ok(ns, 'needs root to create a network namespace');
      const tlsNs = createNetns()!;
      try {
        await tlsNs.startServer(['--port', '15021', '--tls', CERT, KEY]);
        const r = await tlsNs.runCli(['wait', '--timeoutSeconds', '5']);
        assert.equal(r.code, 0, r.stderr);
      } finally {
        tlsNs.close();
      }
    });

    it('times out when nothing listens on 15021', async () => {
      assert.ok(ns, 'needs root to create a network namespace');
      const empty = createNetns()!;
      try {
        const r = await empty.runCli(['wait', '--timeoutSeconds', '1', '--periodMillis', '200']);
        assert.equal(r.code, 1);
        assert.match(r.stderr, /https:\/\/localhost:15021\/healthz\/ready.*ECONNREFUSED/);
      } finally {
        empty.close();
      }
    });
  });
});
