// The gateway's TLS termination against the findings of the connection-layer review, with real
// clients (openssl s_client, node's https and tls) from inside a namespace of the test's own: SNI
// chooses the server, and the server's hosts are all a connection can reach; each server's
// minProtocolVersion / maxProtocolVersion / cipherSuites are what is negotiated; a client cannot
// renegotiate; a handshake not done within MESH_TLS_HANDSHAKE_TIMEOUT is closed; every one counted.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { rawConnections } from '../../helpers/raw-connections.js';
import { credentialDir, routeTo, startGatewayPod, type GatewayPod, type RequestSpec } from '../../helpers/gateway.js';

const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: tls, namespace: edge}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8443, name: https, protocol: HTTPS}
    hosts: [a.example.com]
    tls: {mode: SIMPLE, credentialName: a}
  - port: {number: 8443, name: https, protocol: HTTPS}
    hosts: [b.example.com]
    tls: {mode: SIMPLE, credentialName: b, maxProtocolVersion: TLSV1_2, cipherSuites: [ECDHE-RSA-AES256-GCM-SHA384]}
  - port: {number: 9443, name: https-any, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: SIMPLE, credentialName: any}
  - port: {number: 9443, name: https-any, protocol: HTTPS}
    hosts: [c.example.com]
    tls: {mode: SIMPLE, credentialName: c, minProtocolVersion: TLSV1_3}
---
${routeTo('a', ['a.example.com'], 'tls', 9080, 'edge')}---
${routeTo('b', ['b.example.com'], 'tls', 9180, 'edge')}---
${routeTo('any', ['*'], 'tls', 9280, 'edge')}`;

/** A Gateway this agent cannot honour: rejected at load, with the field and the value named. */
const UNHONOURABLE = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: old-clients, namespace: edge}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 10443, name: https, protocol: HTTPS}
    hosts: [old.example.com]
    tls: {mode: SIMPLE, credentialName: a, minProtocolVersion: TLSV1_0, cipherSuites: [AES128-SHA]}
`;

interface Handshake {
  readonly ok: boolean;
  readonly protocol?: string;
  readonly cipher?: string;
  /** The CN of the certificate the server presented. */
  readonly peer?: string;
  readonly text: string;
}

describe('pilot-agent proxy router: TLS termination', () => {
  let pod: GatewayPod;
  const send = (specs: RequestSpec[]) => pod.send(specs);
  /** A counter of the gateway's listener in /stats (the `inbound` ones); undefined when there is none. */
  const stat = async (name: string): Promise<number | undefined> => {
    const r = await pod.ns.runCli(['request', 'GET', '/stats']);
    const m = new RegExp(`^listener\\.[^ ]*_15006\\.${name.replace(/\./g, '\\.')}: (\\d+)$`, 'm').exec(r.stdout);
    return m ? Number(m[1]) : undefined;
  };

  /** One `openssl s_client -brief` handshake from inside the namespace (stdin closed: it hangs up once connected). */
  const handshake = (port: number, args: string[]): Handshake => {
    const r = spawnSync('ip', ['netns', 'exec', pod.ns.name, 'openssl', 's_client', '-brief', '-connect', `127.0.0.1:${port}`, ...args],
      { input: '', encoding: 'utf8', timeout: 10_000 });
    const text = `${r.stdout}${r.stderr}`;
    const field = (name: string): string | undefined => new RegExp(`^${name}: (.*)$`, 'm').exec(text)?.[1]?.trim();
    const peer = /^Peer certificate: .*CN ?= ?([^,\n]+)/m.exec(text)?.[1];
    return {
      ok: /CONNECTION ESTABLISHED/.test(text), text,
      ...(field('Protocol version') ? { protocol: field('Protocol version')! } : {}),
      ...(field('Ciphersuite') ? { cipher: field('Ciphersuite')! } : {}),
      ...(peer ? { peer } : {}),
    };
  };

  /** An interactive `openssl s_client` (its commands: `R` renegotiate, `k`/`K` key update) from inside the namespace. */
  const interactive = (args: string[]): { write(text: string): void; output(): string; exited: Promise<number | null>; kill(): void } => {
    const client = spawn('ip', ['netns', 'exec', pod.ns.name, 'openssl', 's_client', '-connect', ...args, '-crlf'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    client.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
    client.stderr.setEncoding('utf8').on('data', (d: string) => { out += d; });
    return {
      write: (text) => client.stdin.write(text),
      output: () => out,
      exited: new Promise((resolve) => client.once('exit', (code) => resolve(code))),
      kill: () => { if (client.exitCode === null && client.signalCode === null) client.kill(); },
    };
  };
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'edge.yaml': RESOURCES, 'old.yaml': UNHONOURABLE },
      namespace: 'edge',
      apps: { 9080: 'a', 9180: 'b', 9280: 'any' },
      env: { MESH_TLS_HANDSHAKE_TIMEOUT: '1s' },
      prepare: (p) => {
        // A certificate per server, named after it, so a client can tell which one it got.
        for (const name of ['a', 'b', 'c', 'any']) {
          const dir = credentialDir(p.dir, name);
          const cn = name === 'any' ? 'any.example.com' : `${name}.example.com`;
          const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${cn}`,
            '-addext', `subjectAltName=DNS:${cn}`, '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt')], { encoding: 'utf8' });
          assert.equal(r.status, 0, r.stderr);
        }
      },
    });
  });
  after(() => pod?.close());

  it('rejects at load what it cannot honour, naming the field and the value; the rest is served', () => {
    assert.match(pod.output(), /configuration rejected: .*old\.yaml\[0\] Gateway edge\/old-clients: spec\.servers\[0\]\.tls\.minProtocolVersion: TLSV1_0 cannot be negotiated by this agent's OpenSSL/);
    assert.equal(handshake(10443, ['-servername', 'old.example.com']).ok, false, 'no listener for the rejected Gateway');
  });

  it('SNI chooses the server and its certificate; a name no server lists, or none without a * server, is refused in the handshake', () => {
    assert.equal(handshake(8443, ['-servername', 'a.example.com']).peer, 'a.example.com');
    assert.equal(handshake(8443, ['-servername', 'B.EXAMPLE.COM']).peer, 'b.example.com', 'SNI in any case');
    for (const args of [['-servername', 'elsewhere.example.org'], ['-noservername']]) {
      const h = handshake(8443, args);
      assert.equal(h.ok, false, `${args.join(' ')}: ${h.text}`);
    }
    assert.equal(handshake(9443, ['-servername', 'c.example.com']).peer, 'c.example.com');
    assert.equal(handshake(9443, ['-servername', 'elsewhere.example.org']).peer, 'any.example.com', 'the * server takes the rest');
    assert.equal(handshake(9443, ['-noservername']).peer, 'any.example.com', 'and clients without SNI');
  });

  it('routes a request by the hosts of the server its SNI chose only: a Host outside it is 404', () => {
    const answers = send([
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'a.example.com' }, servername: 'a.example.com' },
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'b.example.com' }, servername: 'a.example.com' },
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'b.example.com' }, servername: 'b.example.com' },
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'a.example.com' }, servername: 'elsewhere.example.org' },
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'a.example.com' }, servername: '' },
      { url: 'https://127.0.0.1:9443/x', headers: { host: 'a.example.com' }, servername: '' },
      { url: 'https://127.0.0.1:9443/x', headers: { host: 'a.example.com' }, servername: 'c.example.com' },
      { url: 'https://127.0.0.1:9443/x', headers: { host: 'c.example.com' }, servername: 'c.example.com' },
    ]);
    assert.deepEqual(answers.map((a) => (a.status === 200 ? a.body.split(' ')[0] : a.status)), [
      'a', // SNI a, Host a
      404, // SNI a, Host b: b's routes are not a's server's
      'b',
      0, // an SNI no server lists: refused in the handshake
      0, // no SNI, no * server
      'a', // the * server holds every host of the port's VirtualServices
      404, // the c server holds c.example.com only
      'any',
    ]);
    assert.match(answers[3]!.error ?? '', /socket|ECONNRESET|disconnected/i);
  });

  it('honours maxProtocolVersion, minProtocolVersion and cipherSuites per server; the default keeps forward secrecy', () => {
    const b = handshake(8443, ['-servername', 'b.example.com']);
    assert.deepEqual([b.protocol, b.cipher], ['TLSv1.2', 'ECDHE-RSA-AES256-GCM-SHA384']);
    assert.equal(handshake(8443, ['-servername', 'b.example.com', '-tls1_3']).ok, false, 'b: TLS 1.2 at most');
    assert.equal(handshake(8443, ['-servername', 'b.example.com', '-tls1_2', '-cipher', 'ECDHE-RSA-AES128-GCM-SHA256']).ok, false, 'b: its one suite only');
    const a = handshake(8443, ['-servername', 'a.example.com']);
    assert.equal(a.protocol, 'TLSv1.3');
    assert.match(handshake(8443, ['-servername', 'a.example.com', '-tls1_2']).cipher ?? '', /^ECDHE-RSA-/);
    for (const cipher of ['AES128-SHA', 'AES256-GCM-SHA384']) {
      assert.equal(handshake(8443, ['-servername', 'a.example.com', '-tls1_2', '-cipher', cipher]).ok, false, `${cipher}: no forward secrecy`);
    }
    assert.equal(handshake(8443, ['-servername', 'a.example.com', '-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0']).ok, false, 'TLS 1.1: below the minimum');
    assert.equal(handshake(9443, ['-servername', 'c.example.com', '-tls1_2']).ok, false, 'c: TLS 1.3 at least');
    assert.equal(handshake(9443, ['-servername', 'c.example.com', '-tls1_3']).protocol, 'TLSv1.3');
  });

  it('closes a connection whose client tries to renegotiate, and counts it', async () => {
    const before = (await stat('ssl.renegotiation_refused')) ?? 0;
    const client = interactive(['127.0.0.1:8443', '-servername', 'a.example.com', '-tls1_2']);
    try {
      await sleep(1000);
      assert.match(client.output(), /Protocol *: TLSv1\.2/, client.output());
      client.write('R\n');
      await sleep(1000);
      // Had the renegotiation been allowed, this request would be answered.
      client.write('GET /after HTTP/1.1\nHost: a.example.com\n\n');
      const code = await Promise.race([client.exited, sleep(3000).then(() => 'still running')]);
      assert.notEqual(code, 'still running', `the server kept the connection:\n${client.output()}`);
      assert.match(client.output(), /RENEGOTIATING/);
      assert.doesNotMatch(client.output(), /HTTP\/1\.1 200/);
    } finally {
      client.kill();
    }
    assert.equal(await stat('ssl.renegotiation_refused'), before + 1);
  });

  it('keeps a TLS 1.3 connection through key updates (they are not renegotiations)', async () => {
    const client = interactive(['127.0.0.1:8443', '-servername', 'a.example.com', '-tls1_3']);
    try {
      await sleep(1000);
      client.write('k\n');
      await sleep(300);
      client.write('K\n');
      await sleep(300);
      client.write('GET /after-key-update HTTP/1.1\nHost: a.example.com\n\n');
      await sleep(1000);
      assert.match(client.output(), /KEYUPDATE/);
      assert.match(client.output(), /a saw 127\.0\.0\.1 GET \/after-key-update/, client.output());
    } finally {
      client.kill();
    }
  });

  it('closes a connection whose handshake is not complete within MESH_TLS_HANDSHAKE_TIMEOUT (1 s here): nothing sent, or half a ClientHello', async () => {
    const timeoutsBefore = (await stat('ssl.handshake_timeout')) ?? 0;
    const halfHello = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 1, 2, 3]);
    const started = Date.now();
    const results = rawConnections((command, args, input) => {
      const run = spawnSync('ip', ['netns', 'exec', pod.ns.name, command, ...args], { encoding: 'utf8', input });
      assert.equal(run.status, 0, run.stderr);
      return run.stdout;
    }, '127.0.0.1', 8443, [{ data: '', quietMs: 5000 }, { data: halfHello.toString('latin1'), quietMs: 5000 }], { parallel: true });
    assert.deepEqual(results.map((r) => r.closed), [true, true]);
    assert.ok(Date.now() - started < 4000, 'closed at the 1 s deadline, not when the client gave up');
    assert.equal(await stat('ssl.handshake_timeout'), timeoutsBefore + 2);
  });

  it('shows the TLS counters in /stats and the Prometheus series', async () => {
    assert.ok(((await stat('ssl.handshake')) ?? 0) > 0);
    assert.ok(((await stat('ssl.connection_error')) ?? 0) >= 3, 'renegotiation and time-outs are TLS connection errors');
    assert.ok(((await stat('no_filter_chain_match')) ?? 0) >= 4, 'the refused server names');
    const body = pod.send([{ url: 'http://127.0.0.1:15090/stats/prometheus' }])[0]!.body;
    for (const name of ['mesh_tls_handshakes_total', 'mesh_tls_connection_errors_total', 'mesh_tls_handshake_timeouts_total', 'mesh_tls_renegotiations_refused_total', 'mesh_tls_no_server_match_total']) {
      assert.match(body, new RegExp(`^${name}\\{direction="inbound"\\} [1-9]`, 'm'), name);
    }
  });
});
