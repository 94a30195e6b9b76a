// The HTTP/2 frame layer of our own with clients nobody here wrote, over loopback: curl, h2load and
// a @grpc/grpc-js channel through scripts/h2-floor-relay.mjs (the layer on both sides: clients'
// connections and the upstream connection) to a node:http2 and a grpc-js server. What each client
// gets must be what the upstream sent: bodies byte for byte both ways, every h2load request
// answered, the gRPC reply and its status (so the trailers got through).
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { repoRoot } from '../../helpers/repo.js';

const FILE = Buffer.alloc(10_240, 'f');
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

function run(cmd: string, args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: 30_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  s.close();
  return port;
}

/** A relay on the layer from a free port to `upstream`; resolves once it listens. */
async function relay(upstream: number): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, [join(repoRoot, 'scripts', 'h2-floor-relay.mjs'), `127.0.0.1:${port}`, `127.0.0.1:${upstream}`],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => { out += d; if (out.includes('h2-floor-relay:')) resolve(); });
    child.once('exit', (code) => reject(new Error(`the relay exited (${code})`)));
  });
  return { port, child };
}

describe('the HTTP/2 frame layer with curl, h2load and grpc-js (through scripts/h2-floor-relay.mjs)', () => {
  const closers: Array<() => void> = [];
  let h2Port = 0;
  let grpcPort = 0;
  let dir = '';
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'codec-clients-'));
    const server = http2.createServer();
    server.on('stream', (stream, headers) => {
      if (headers[':path'] === '/file') {
        stream.respond({ ':status': 200, 'content-type': 'application/octet-stream', 'content-length': FILE.length });
        stream.end(FILE);
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (d: Buffer) => chunks.push(d));
      stream.on('end', () => {
        const body = Buffer.concat(chunks);
        stream.respond({ ':status': 200, 'x-sha': sha(body) });
        stream.end(body);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => server.close());
    h2Port = (server.address() as net.AddressInfo).port;
    const g = new grpc.Server();
    const raw = (b: Buffer): Buffer => b;
    g.addService({ Ping: { path: '/bench.Echo/Ping', requestStream: false, responseStream: false,
      requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw } },
    { Ping: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from('pong:'), call.request])) });
    grpcPort = await new Promise<number>((resolve, reject) =>
      g.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))));
    closers.push(() => g.forceShutdown());
  });
  after(() => {
    for (const c of closers.reverse()) c();
    rmSync(dir, { recursive: true, force: true });
  });

  it('curl: a GET and a 300 KB POST, byte for byte', async () => {
    const r = await relay(h2Port);
    closers.push(() => r.child.kill());
    const got = await run('curl', ['-sS', '--http2-prior-knowledge', '-o', join(dir, 'file'), '-w', '%{http_code} %{http_version} %{size_download}', `http://127.0.0.1:${r.port}/file`]);
    assert.equal(got.code, 0, got.stderr);
    assert.equal(got.stdout, `200 2 ${FILE.length}`);
    const body = Buffer.alloc(300_000);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7) & 0xff;
    writeFileSync(join(dir, 'body'), body);
    const post = await run('curl', ['-sS', '--http2-prior-knowledge', '--data-binary', `@${join(dir, 'body')}`, '-D', '-', '-o', join(dir, 'echo'), `http://127.0.0.1:${r.port}/echo`]);
    assert.equal(post.code, 0, post.stderr);
    assert.match(post.stdout, new RegExp(`x-sha: ${sha(body)}`));
    assert.equal(sha(readFileSync(join(dir, 'echo'))), sha(body));
  });

  it('h2load: 4 connections of 10 concurrent streams, every request answered', async () => {
    const r = await relay(h2Port);
    closers.push(() => r.child.kill());
    const got = await run('h2load', ['-n', '4000', '-c', '4', '-m', '10', `http://127.0.0.1:${r.port}/file`]);
    assert.equal(got.code, 0, got.stderr);
    assert.match(got.stdout, /requests: 4000 total, 4000 started, 4000 done, 4000 succeeded, 0 failed/);
    assert.match(got.stdout, /status codes: 4000 2xx/);
  });

  it('grpc-js: unary calls over one channel, the reply and status OK (trailers relayed)', async () => {
    const r = await relay(grpcPort);
    closers.push(() => r.child.kill());
    const client = new grpc.Client(`127.0.0.1:${r.port}`, grpc.credentials.createInsecure());
    closers.push(() => client.close());
    const raw = (b: Buffer): Buffer => b;
    const call = (msg: string): Promise<Buffer> => new Promise((resolve, reject) =>
      client.makeUnaryRequest('/bench.Echo/Ping', raw, raw, Buffer.from(msg), new grpc.Metadata(), { deadline: Date.now() + 10_000 },
        (err, reply) => (err ? reject(err) : resolve(reply!))));
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => call(`m${i}`)));
    assert.deepEqual(replies.map((b) => b.toString()), Array.from({ length: 50 }, (_, i) => `pong:m${i}`));
  });
});
