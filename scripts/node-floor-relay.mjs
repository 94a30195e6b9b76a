#!/usr/bin/env node
// node scripts/node-floor-relay.mjs LISTEN_PORT UPSTREAM_PORT (both on 127.0.0.1)
// The floor of any HTTP/1.1 proxy written on Node, for the benches: what Node itself costs per request
// (two reads, two writes, their callbacks), so that a bench can tell Node's share from the proxy's.
// It is no proxy: each client connection gets its own upstream connection and the bytes are copied
// both ways as they come, with no parsing, no framing, no policy. It reads as the proxy does
// (net.Socket `onread` into one reused buffer) and writes a copy of each read (a write may complete
// later, so the shared buffer cannot be written from).
import net from 'node:net';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
if (!Number.isInteger(listenPort) || !Number.isInteger(upstreamPort)) {
  console.error('usage: node scripts/node-floor-relay.mjs LISTEN_PORT UPSTREAM_PORT');
  process.exit(2);
}
const shared = Buffer.allocUnsafe(64 * 1024);
const copyTo = (to) => (n) => {
  to.write(Buffer.from(shared.subarray(0, n)));
  return true;
};

const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
  // net.Server has no `onread`: the accepted handle moves into a socket made with one (as the proxy does).
  const handle = accepted._handle;
  accepted._handle = null;
  accepted.destroy();
  const client = new net.Socket({ handle, readable: true, writable: true, onread: { buffer: shared, callback: (n) => copy(n) } });
  const upstream = net.connect({ host: '127.0.0.1', port: upstreamPort, onread: { buffer: shared, callback: copyTo(client) } });
  const copy = copyTo(upstream);
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  for (const [a, b] of [[client, upstream], [upstream, client]]) {
    a.on('error', () => b.destroy());
    a.on('close', () => b.destroy());
  }
});
server.listen(listenPort, '127.0.0.1');
