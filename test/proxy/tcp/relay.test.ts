// The relay's end when one side is gone before the other has said all: bytes a client sends after
// the server closed (a TLS client's alert as it leaves) must not leave the client's side waiting for
// a 'drain' that never comes, or its FIN is never read and the connection stays open (nothing logged)
// until the idle time-out.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, it } from 'node:test';
import { adoptAccepted } from '../../../src/proxy/read-buffers.js';
import { relay } from '../../../src/proxy/tcp/relay.js';

const servers: Server[] = [];
after(() => { for (const s of servers) s.close(); });

/** A listening server on loopback whose first accepted socket is handed over. */
async function accepting(onSocket: (s: Socket) => void): Promise<number> {
  const server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, onSocket);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

it('ends both sides when the client writes after the upstream has closed, then closes', async () => {
  // The upstream answers and closes at once (as a TLS server's end()).
  const upstreamPort = await accepting((s) => { s.resume(); s.end('bye\n'); });
  let ended: (v: { error: Error | undefined }) => void;
  let upstreamClosed: () => void;
  const closed = new Promise<void>((resolve) => { upstreamClosed = resolve; });
  const done = new Promise<{ error: Error | undefined }>((resolve) => { ended = resolve; });
  // Read as the listeners read it: into reused memory (read-buffers.ts).
  const proxyPort = await accepting((accepted) => {
    const downstream = adoptAccepted(accepted);
    const upstream = connect(upstreamPort, '127.0.0.1');
    upstream.once('close', () => upstreamClosed());
    relay(downstream, upstream, undefined, (error) => ended({ error }));
  });
  const client = connect({ port: proxyPort, host: '127.0.0.1', allowHalfOpen: true });
  let got = '';
  client.on('data', (d: Buffer) => { got += d.toString(); });
  client.on('error', () => { /* a reset is fine: the relay's end is what is checked */ });
  // As a TLS client leaves once the server has closed: its alert and its FIN at once, when the
  // upstream is gone (these bytes have nowhere to go).
  client.on('end', () => { void closed.then(() => client.end('alert')); });
  await once(client, 'close');
  assert.equal(got, 'bye\n');
  const result = await Promise.race([done, new Promise((resolve) => setTimeout(() => resolve('still open'), 2000))]);
  assert.notEqual(result, 'still open', 'the relay never ended: the client side waits for a drain of a closed socket');
});
