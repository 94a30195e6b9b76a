// A TLS socket made around an accepted connection, reading its plaintext into the shared buffer
// (adoptTlsReads), on real sockets: its reader gets views of the shared buffer, in order; what TLS
// decrypts while the socket is paused (a read of the network can hold several records) reaches no
// reader until it resumes, and then all of it, before the end; a reader set late gets what came first.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { connect, TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { adoptTlsReads, isShared, returnHeld, setReader } from '../../src/proxy/read-buffers.js';
import { createRootCa, issueWorkloadCert, type WorkloadCertSet } from '../helpers/mesh-certs.js';

describe('adoptTlsReads', () => {
  let leaf: WorkloadCertSet;
  let server: Server;
  let port = 0;
  let accepted: ((tls: TLSSocket) => void)[] = [];

  before(async () => {
    leaf = await issueWorkloadCert(await createRootCa(), { spiffeId: 'spiffe://cluster.local/ns/default/sa/reader' });
    server = createServer((raw: Socket) => {
      const tls = new TLSSocket(raw, { isServer: true, cert: leaf.chainPem, key: leaf.keyPem });
      assert.equal(adoptTlsReads(tls), true);
      assert.equal(adoptTlsReads(tls), false, 'a socket is adopted once');
      tls.on('error', () => undefined);
      accepted.shift()!(tls);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });

  after(() => server?.close());

  /** A client connection, and the server's TLS socket for it. */
  async function pair(): Promise<{ client: TLSSocket; tls: TLSSocket }> {
    const tls = new Promise<TLSSocket>((resolve) => accepted.push(resolve));
    const client = connect({ port, host: '127.0.0.1', rejectUnauthorized: false });
    client.on('error', () => undefined);
    await once(client, 'secureConnect');
    return { client, tls: await tls };
  }

  /** `n` bytes no two 1 KiB blocks of which are alike, so a reordered or lost read shows. */
  function pattern(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i += 4) b.writeUInt32BE(i, i);
    return b;
  }

  it('gives each read to the reader as a view of the shared buffer, with no data event', async () => {
    const { client, tls } = await pair();
    const got: Buffer[] = [];
    let views = 0;
    tls.on('data', () => assert.fail('a data event'));
    const done = new Promise<void>((resolve) => {
      setReader(tls, (bytes) => {
        if (isShared(bytes)) views++;
        got.push(Buffer.from(bytes));
        if (Buffer.concat(got).toString() === 'hello, world') resolve();
      });
    });
    client.write('hello, ');
    setTimeout(() => client.write('world'), 20);
    await done;
    assert.equal(views, got.length);
    client.destroy();
    tls.destroy();
  });

  it('holds what is decrypted while paused and gives all of it, in order, on resume, before the end', async () => {
    const { client, tls } = await pair();
    // Several 16 KiB records in flight at once: one read of the network decrypts more than one.
    const sent = pattern(512 * 1024);
    const got: Buffer[] = [];
    let paused = false;
    let readsWhilePaused = 0;
    let pauses = 0;
    const ended = new Promise<number>((resolve) => tls.once('end', () => resolve(Buffer.concat(got).length)));
    setReader(tls, (bytes) => {
      if (paused) readsWhilePaused++;
      got.push(Buffer.from(bytes));
      if (got.length % 3 === 1) { // pause now and then, for a while, as a busy reader does
        paused = true;
        pauses++;
        tls.pause();
        setTimeout(() => {
          paused = false;
          tls.resume();
        }, 5);
      }
    });
    tls.resume();
    client.end(sent);
    const lengthAtEnd = await ended;
    assert.equal(readsWhilePaused, 0, 'no read reached the reader while the socket was paused');
    assert.ok(pauses > 1);
    assert.equal(lengthAtEnd, sent.length, 'every byte came before the end');
    assert.ok(Buffer.concat(got).equals(sent), 'in order');
    tls.destroy();
  });

  it('gives a reader set late what came before it', async () => {
    const { client, tls } = await pair();
    const early = new Promise<void>((resolve) => tls.once('resume', () => resolve()));
    tls.resume();
    await early;
    client.write('early bytes');
    await new Promise((r) => setTimeout(r, 50)); // decrypted by now, with nobody to read them
    const got = await new Promise<string>((resolve, reject) => {
      setTimeout(() => reject(new Error('the early bytes never reached the reader')), 3_000).unref();
      const parts: Buffer[] = [];
      setReader(tls, (bytes) => {
        parts.push(Buffer.from(bytes));
        const text = Buffer.concat(parts).toString();
        if (text.endsWith('late bytes')) resolve(text);
      });
      client.write(', late bytes');
    });
    assert.equal(got, 'early bytes, late bytes');
    client.destroy();
    tls.destroy();
  });

  it('hands what it held back to the stream for a reader of the handle (node:http2), after the stream\'s own bytes', async () => {
    const { client, tls } = await pair();
    tls.resume();
    await once(tls, 'resume');
    client.end('held bytes');
    await new Promise((r) => setTimeout(r, 50));
    returnHeld(tls);
    tls.pause();
    tls.unshift(Buffer.from('head, '));
    const parts: Buffer[] = [];
    for (let chunk = tls.read() as Buffer | null; chunk !== null; chunk = tls.read() as Buffer | null) parts.push(chunk);
    assert.equal(Buffer.concat(parts).toString(), 'head, held bytes');
    tls.destroy();
  });
});
