import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { createServer as createTlsServer, connect as connectTls } from 'node:tls';
import { DirectWriter, directWritesAvailable } from '../../src/proxy/direct-write.js';
import { createRootCa } from '../helpers/mesh-certs.js';

/** A server that keeps each accepted socket, paused (nothing read until the test says). */
async function pausedServer(): Promise<{ server: Server; accepted: Promise<Socket> }> {
  let take!: (s: Socket) => void;
  const accepted = new Promise<Socket>((resolve) => { take = resolve; });
  const server = createServer({ pauseOnConnect: true }, (s) => take(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, accepted };
}

/** Everything `s` sends until it ends. */
async function readAll(s: Socket): Promise<Buffer> {
  const parts: Buffer[] = [];
  s.on('data', (d: Buffer) => parts.push(d));
  s.resume();
  await once(s, 'end');
  return Buffer.concat(parts);
}

describe('DirectWriter (writes past the Writable stream when nothing waits in it)', () => {
  const servers: Server[] = [];
  const sockets: Socket[] = [];
  after(() => {
    for (const s of sockets) s.destroy();
    for (const s of servers) s.close();
  });

  it('is available in this node', () => {
    assert.equal(directWritesAvailable, true, 'process.binding(\'stream_wrap\') should give WriteWrap here');
  });

  it('keeps the order of every write, direct or through the stream, across a write the kernel cannot take whole', async () => {
    const { server, accepted } = await pausedServer();
    servers.push(server);
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    sockets.push(client);
    let drained = 0;
    const w = new DirectWriter(client, () => { drained++; });
    // Written while connecting: through the stream, first on the wire.
    assert.equal(w.write('connecting;'), true);
    await once(client, 'connect');
    const peer = await accepted;
    sockets.push(peer);
    const big = Buffer.alloc(16 * 1024 * 1024, 0x61);
    const expected: Buffer[] = [Buffer.from('connecting;')];
    const put = (data: string | Buffer): boolean => {
      expected.push(typeof data === 'string' ? Buffer.from(data, 'latin1') : data);
      return w.write(data);
    };
    await new Promise((resolve) => setImmediate(resolve)); // the connecting write is out
    assert.equal(put('head-1;'), true);
    assert.equal(put(Buffer.from('body-1;')), true);
    let writtenCalls = 0;
    expected.push(big);
    // The peer reads nothing yet: the kernel takes part of 16 MiB, libuv keeps the rest.
    assert.equal(w.write(big, () => { writtenCalls++; }), false, 'a write the kernel cannot take whole asks the caller to wait');
    assert.equal(writtenCalls, 0);
    assert.equal(put('after-big;'), false, 'queued behind the big write: still waiting');
    // The stream itself, directly: its first write goes to libuv behind the big one, its second
    // waits in the stream (one write at a time): a direct write now would overtake that one.
    expected.push(Buffer.from('stream-1;'), Buffer.from('stream-2;'));
    client.write('stream-1;');
    client.write('stream-2;');
    assert.equal(put('after-stream;'), false, 'the stream holds bytes: this one goes through it, behind them');
    assert.equal(drained, 0);
    const all = readAll(peer);
    await new Promise<void>((resolve) => {
      const check = (): void => { if (drained > 0 && client.writableLength === 0) resolve(); else setTimeout(check, 5); };
      check();
    });
    assert.equal(writtenCalls, 1, 'the big write\'s callback ran once it was out');
    assert.ok(drained >= 1);
    client.end();
    const got = await all;
    const want = Buffer.concat(expected);
    assert.equal(got.length, want.length);
    assert.ok(got.equals(want), 'the peer got every byte in the order written');
    assert.equal(client.bytesWritten, want.length, 'socket.bytesWritten counts the direct bytes');
  });

  it('a write to a connection the peer reset ends the socket with the write\'s error, never a throw', async () => {
    const { server, accepted } = await pausedServer();
    servers.push(server);
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    sockets.push(client);
    await once(client, 'connect');
    const peer = await accepted;
    peer.resetAndDestroy();
    const w = new DirectWriter(client);
    const failed = new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
      client.once('error', (e: NodeJS.ErrnoException) => resolve(e));
      client.once('close', () => resolve(undefined));
    });
    // Whatever the socket's state by now (the reset seen or not), writing never throws.
    for (let i = 0; i < 50 && !client.destroyed; i++) {
      w.write(Buffer.alloc(64 * 1024, 1));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await failed;
    assert.ok(client.destroyed, 'the socket ended');
  });

  it('a TLS socket writes through its stream (its handle encrypts), and the bytes arrive', async () => {
    const ca = await createRootCa();
    let got = '';
    const server = createTlsServer({ key: ca.key.keyPem, cert: ca.certPem }, (s) => {
      s.setEncoding('latin1');
      s.on('data', (d: string) => { got += d; });
      s.on('end', () => s.end());
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = connectTls({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', rejectUnauthorized: false });
    sockets.push(client);
    await once(client, 'secureConnect');
    const w = new DirectWriter(client);
    w.write('one;');
    w.write(Buffer.from('two;'));
    client.end();
    await once(client, 'close');
    assert.equal(got, 'one;two;');
  });
});
