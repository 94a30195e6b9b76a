// Reading a peer's frame of the TCP metadata exchange off a real socket (loopback): in pieces, with
// the application's bytes behind it; bytes that are no frame handed on as they came; a frame too
// large skipped unread; a stalled frame closing the connection; silence and an early end going on.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { MAX_EXCHANGE_DATA_BYTES } from '../../../src/metrics/tcp-exchange-frame.js';
import { metadataOfHeader } from '../../../src/metrics/peer-metadata.js';
import { adoptAccepted, attachReader } from '../../../src/proxy/read-buffers.js';
import { readPeerFrame } from '../../../src/proxy/tcp/metadata-exchange.js';
import { envoyFrame, sidecarFields } from '../../helpers/exchange-frames.js';

const servers: Server[] = [];
const sockets: Socket[] = [];
after(() => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
});

const FRAME = envoyFrame(sidecarFields({ pod: 'ratings-v1-7dc98c7588-kx2l9', namespace: 'bookinfo', workload: 'ratings-v1', app: 'ratings', version: 'v1', ip: '10.0.0.9' }));

interface Outcome {
  readonly peerKey: string;
  readonly readAhead: string | undefined;
  /** What the socket gave its next reader after the exchange (until the client's end). */
  readonly later: Promise<string>;
  readonly server: Socket;
}

/** A server socket (adopted, as the listeners read) handed to readPeerFrame; the client writes `pieces` with a pause between. */
async function exchange(pieces: (Buffer | 'end')[], timeoutMs = 2_000): Promise<{ outcome: Promise<Outcome>; closed: Promise<void> }> {
  let resolveOutcome: (o: Outcome) => void;
  const outcome = new Promise<Outcome>((resolve) => { resolveOutcome = resolve; });
  let resolveClosed: () => void;
  const closed = new Promise<void>((resolve) => { resolveClosed = resolve; });
  const server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, (accepted) => {
    const s = adoptAccepted(accepted);
    sockets.push(s);
    s.on('error', () => undefined);
    s.once('close', () => resolveClosed());
    readPeerFrame(s, timeoutMs, (peerKey, readAhead) => {
      const later = new Promise<string>((resolve) => {
        let got = '';
        // The next reader, as the relay would be.
        setImmediate(() => {
          if (s.readableEnded) { resolve(got); return; }
          attachReader(s, (d: Buffer) => { got += d.toString('latin1'); });
          s.on('end', () => resolve(got));
          s.on('close', () => resolve(got));
          s.resume();
        });
      });
      resolveOutcome({ peerKey, readAhead: readAhead?.toString('latin1'), later, server: s });
    });
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', allowHalfOpen: true });
  client.on('error', () => undefined);
  sockets.push(client);
  await once(client, 'connect');
  void (async () => {
    for (const p of pieces) {
      if (p === 'end') client.end();
      else client.write(p);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  closed.then(() => client.destroy(), () => undefined);
  return { outcome, closed };
}

describe('reading the peer\'s frame off a socket', () => {
  it('takes a frame sent in pieces, hands on what follows it, and the socket reads on for the next reader', async () => {
    const { outcome } = await exchange([FRAME.subarray(0, 3), FRAME.subarray(3, 11), Buffer.concat([FRAME.subarray(11), Buffer.from('app-1')]), Buffer.from('app-2'), 'end']);
    const o = await outcome;
    assert.equal(metadataOfHeader(o.peerKey)?.workload, 'ratings-v1');
    assert.equal(o.readAhead, 'app-1');
    assert.equal(await o.later, 'app-2');
  });

  it('a frame and nothing after it: no read-ahead, the application\'s bytes come next', async () => {
    const { outcome } = await exchange([FRAME, Buffer.from('app'), 'end']);
    const o = await outcome;
    assert.equal(metadataOfHeader(o.peerKey)?.app, 'ratings');
    assert.equal(o.readAhead, undefined);
    assert.equal(await o.later, 'app');
  });

  it('bytes that are not a frame are the application\'s, whole and in order (Envoy\'s choice for a peer without the filter)', async () => {
    const { outcome } = await exchange([Buffer.from('=#'), Buffer.from('hello'), 'end']);
    const o = await outcome;
    assert.equal(o.peerKey, '');
    assert.equal(`${o.readAhead ?? ''}${await o.later}`, '=#hello');
  });

  it('skips a frame larger than the limit unread, then hands on what follows', async () => {
    const size = MAX_EXCHANGE_DATA_BYTES * 4;
    const prefix = Buffer.from([0x3d, 0x23, 0x04, 0x67, 0, 0, 0, 0]);
    prefix.writeUInt32BE(size, 4);
    const { outcome } = await exchange([prefix, Buffer.alloc(size - 10, 0x41), Buffer.concat([Buffer.alloc(10, 0x42), Buffer.from('after')]), 'end']);
    const o = await outcome;
    assert.equal(o.peerKey, '');
    assert.equal(`${o.readAhead ?? ''}${await o.later}`, 'after');
  });

  it('closes a connection whose frame stalls half way (the application never gets half a frame)', async () => {
    const { outcome, closed } = await exchange([FRAME.subarray(0, 20)], 150);
    const result = await Promise.race([outcome.then(() => 'handed on'), closed.then(() => 'closed')]);
    assert.equal(result, 'closed');
  });

  it('a peer silent past the deadline: the connection goes on without metadata', async () => {
    const { outcome } = await exchange([], 100);
    const o = await outcome;
    assert.equal(o.peerKey, '');
    assert.equal(o.readAhead, undefined);
    assert.equal(o.server.destroyed, false);
  });

  it('the peer\'s end before a whole frame: what came goes on, with the end', async () => {
    const { outcome } = await exchange([FRAME.subarray(0, 6), 'end']);
    const o = await outcome;
    assert.equal(o.peerKey, '');
    assert.equal(o.readAhead, FRAME.subarray(0, 6).toString('latin1'));
    assert.equal(await o.later, '');
  });
});
