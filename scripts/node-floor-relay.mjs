#!/usr/bin/env node
// node scripts/node-floor-relay.mjs [HOST:]LISTEN_PORT [HOST:]UPSTREAM_PORT [--accept-tls DIR] [--connect-tls DIR]
// The floor of any HTTP/1.1 proxy written on Node, for the benches: what Node itself costs per request
// (two reads, two writes, their callbacks), so that a bench can tell Node's share from the proxy's.
// It is no proxy: each client connection gets its own upstream connection and the bytes are copied
// both ways as they come, with no parsing, no framing, no policy. It reads as the proxy does
// (net.Socket `onread` into one reused buffer where Node allows it) and writes a copy of each read
// (a write may complete later, so the shared buffer cannot be written from). Hosts default to 127.0.0.1.
// With --accept-tls / --connect-tls, the client or upstream side is mutual TLS with the certificates
// in DIR (cert-chain.pem, key.pem, root-cert.pem, as a sidecar mounts them), the peer's chain checked
// against that root: a pair of these is the floor of two sidecars speaking mutual TLS.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { relayAddress } from './relay-address.mjs';

const usage = 'usage: node scripts/node-floor-relay.mjs [HOST:]LISTEN_PORT [HOST:]UPSTREAM_PORT [--accept-tls DIR] [--connect-tls DIR]';
const args = process.argv.slice(2);
const options = {};
const positional = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--accept-tls' || args[i] === '--connect-tls') options[args[i]] = args[++i];
  else positional.push(args[i]);
}
const address = relayAddress;
const listen = address(positional[0]);
const upstreamAt = address(positional[1]);
if (!listen || !upstreamAt || positional.length !== 2 || Object.values(options).some((d) => d === undefined)) {
  console.error(usage);
  process.exit(2);
}
const credentials = (dir) => dir && {
  cert: readFileSync(`${dir}/cert-chain.pem`), key: readFileSync(`${dir}/key.pem`), ca: readFileSync(`${dir}/root-cert.pem`),
};
const acceptTls = credentials(options['--accept-tls']);
const connectTls = credentials(options['--connect-tls']);

const shared = Buffer.allocUnsafe(64 * 1024);
const copyTo = (to) => (n) => {
  to.write(Buffer.from(shared.subarray(0, n)));
  return true;
};
const onread = (callback) => ({ buffer: shared, callback });

/** Relays between `client` (read by 'data' events when `readsItself` is false) and a new upstream connection. */
function relay(client, readsItself) {
  let copy = () => true;
  const upstream = connectTls
    ? tls.connect({ ...upstreamAt, ...connectTls, servername: undefined, checkServerIdentity: () => undefined, onread: onread(copyTo(client)) })
    : net.connect({ ...upstreamAt, onread: onread(copyTo(client)) });
  copy = copyTo(upstream);
  if (!readsItself) client.on('data', (chunk) => upstream.write(Buffer.from(chunk)));
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  for (const [a, b] of [[client, upstream], [upstream, client]]) {
    a.on('error', () => b.destroy());
    a.on('close', () => b.destroy());
  }
  return (n) => copy(n);
}

const server = acceptTls
  ? tls.createServer({ ...acceptTls, requestCert: true, rejectUnauthorized: true }, (client) => relay(client, false))
  : net.createServer({ pauseOnConnect: true }, (accepted) => {
    // net.Server has no `onread`: the accepted handle moves into a socket made with one (as the proxy does).
    const handle = accepted._handle;
    accepted._handle = null;
    accepted.destroy();
    let forward = () => true;
    const client = new net.Socket({ handle, readable: true, writable: true, onread: onread((n) => forward(n)) });
    forward = relay(client, true);
  });
server.listen(listen.port, listen.host);
