#!/usr/bin/env node
// node scripts/h2-node-floor-relay.mjs [HOST:]LISTEN_PORT [HOST:]UPSTREAM_PORT
// node:http2's own floor as an HTTP/2 proxy, for the benches: a node:http2 server for the clients and
// one node:http2 session upstream (h2c both ways), each stream relayed with its headers, body and
// trailers, nothing else (no routing, policy, counters or logs). Beside the sidecar (which runs on
// node:http2) and scripts/h2-floor-relay.mjs (the same relay on our own frame layer), it says how much
// of the sidecar's cost per request is node:http2's.
import http2 from 'node:http2';
import { relayAddress } from './relay-address.mjs';

const address = relayAddress;
const listen = address(process.argv[2]);
const upstreamAt = address(process.argv[3]);
if (!listen || !upstreamAt) {
  console.error('usage: node scripts/h2-node-floor-relay.mjs [HOST:]LISTEN_PORT [HOST:]UPSTREAM_PORT');
  process.exit(2);
}

let session;
function upstream() {
  if (session === undefined || session.closed || session.destroyed) {
    session = http2.connect(`http://${upstreamAt.host}:${upstreamAt.port}`);
    session.on('error', () => {});
  }
  return session;
}

// The sidecar's own economies are kept (trailers waited for only when the client takes them, bodies by
// 'data' events rather than pipe()), so that the comparison is node:http2's floor, not a naive relay's.
const server = http2.createServer();
server.on('stream', (stream, headers, flags) => {
  const ended = (flags & 1) !== 0;
  const takesTrailers = headers.te === 'trailers';
  const req = upstream().request(headers, { endStream: ended });
  let trailers;
  req.on('trailers', (t) => { trailers = t; });
  req.on('response', (h, f) => {
    if (stream.destroyed) return;
    const bodyless = (f & 1) !== 0;
    stream.respond(h, { endStream: bodyless, waitForTrailers: !bodyless && takesTrailers });
    if (bodyless) return;
    if (takesTrailers) stream.on('wantTrailers', () => stream.sendTrailers(trailers ?? {}));
    req.on('data', (d) => { if (!stream.write(d)) { req.pause(); stream.once('drain', () => req.resume()); } });
    req.on('end', () => stream.end());
  });
  req.on('close', () => { if (!stream.destroyed && req.rstCode) stream.close(req.rstCode); });
  req.on('error', () => {});
  stream.on('close', () => { if (!req.destroyed) req.close(http2.constants.NGHTTP2_CANCEL); });
  stream.on('error', () => {});
  if (!ended) {
    stream.on('data', (d) => { if (!req.write(d)) { stream.pause(); req.once('drain', () => stream.resume()); } });
    stream.on('end', () => req.end());
  }
});
server.listen(listen.port, listen.host, () => console.log(`h2-node-floor-relay: ${listen.host}:${listen.port} -> ${upstreamAt.host}:${upstreamAt.port}`));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
