#!/usr/bin/env node
// node scripts/h2-floor-relay.mjs [HOST:]LISTEN_PORT [HOST:]UPSTREAM_PORT     (after make build: it runs dist/)
// The floor of an HTTP/2 proxy on the frame layer of our own (src/proxy/http2/codec/), for the benches:
// h2c with prior knowledge both ways, each client stream relayed as a stream of one upstream
// connection (header blocks decoded, judged by RFC 9113 and encoded again; DATA within both sides'
// windows), and nothing else: no routing, no policy, no counters, no logs. What it costs per request
// against node:http2 (the sidecar) and haproxy says what the sidecar could reach on this layer.
// A bench tool, not a proxy: a request body is passed on as it comes, with no back-pressure across
// the relay beyond the two connections' windows.
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { relayAddress } from './relay-address.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { H2Connection } = await import(join(root, 'dist/src/proxy/http2/codec/connection.js'));

const address = relayAddress;
const listen = address(process.argv[2]);
const upstreamAt = address(process.argv[3]);
if (!listen || !upstreamAt) {
  console.error('usage: node scripts/h2-floor-relay.mjs [HOST:]LISTEN_PORT [HOST:]UPSTREAM_PORT');
  process.exit(2);
}

/** Hands a connection's output to its socket: one write, or a corked batch. */
function writerFor(socket) {
  return (chunks) => {
    if (socket.destroyed) return;
    if (chunks.length === 1) { socket.write(chunks[0]); return; }
    socket.cork();
    for (const c of chunks) socket.write(c);
    socket.uncork();
  };
}

/** Feeds what a socket reads to its connection, and ends the connection with the socket. */
function readInto(socket, conn) {
  socket.on('data', (d) => conn.receive(d));
  socket.on('end', () => { conn.end(); socket.destroy(); });
  socket.on('error', () => conn.end());
  socket.on('close', () => conn.end());
}

// Upstream connections, each used until the peer's SETTINGS_MAX_CONCURRENT_STREAMS is reached or
// it sent GOAWAY: then another.
const upstreams = new Set();
function upstreamConnection() {
  for (const c of upstreams) if (c.canOpen) return c;
  const socket = net.connect({ ...upstreamAt, noDelay: true });
  const conn = new H2Connection(false, writerFor(socket), {
    headers(s, fields, facts, end) {
      const x = s.ctx;
      if (!x) return;
      if (!facts.informational) x.body = undefined; // answered: never sent again
      x.down.headers(x.ds, fields, end);
    },
    data(s, data, end) {
      const x = s.ctx;
      if (!x) return;
      x.down.data(x.ds, data, end);
      conn.consumed(s, data.length);
    },
    reset(s, code) {
      const x = s.ctx;
      if (!x) return;
      s.ctx = undefined;
      // Refused (over the peer's stream cap, or above the last stream of its GOAWAY): never
      // processed, so sent again on another connection while the body is still held.
      if (code === 7 && x.body !== undefined && send(x)) return;
      x.ds.ctx = undefined;
      x.down.reset(x.ds, code === 7 ? 7 : 8);
    },
    closed() { upstreams.delete(conn); socket.end(); },
  });
  readInto(socket, conn);
  upstreams.add(conn);
  return conn;
}

/** Opens the exchange's upstream stream and sends what the client sent so far. */
function send(x) {
  const up = upstreamConnection();
  const us = up.request(x.fields, x.ended && x.body.length === 0, x.head);
  if (!us) return false;
  us.ctx = x;
  x.up = up;
  x.us = us;
  for (let i = 0; i < x.body.length; i++) up.data(us, x.body[i], x.ended && i === x.body.length - 1);
  return true;
}

/** Request bodies are held (copied) up to this, to be sent again if the upstream refuses the stream. */
const REPLAYABLE = 64 * 1024;

const server = net.createServer({ noDelay: true }, (socket) => {
  const conn = new H2Connection(true, writerFor(socket), {
    headers(s, fields, _facts, end) {
      const held = s.ctx;
      if (held) { // trailers
        held.ended = true;
        held.body = undefined;
        held.up.headers(held.us, fields, true);
        return;
      }
      const x = { down: conn, ds: s, up: undefined, us: undefined, fields, head: fields[1] === 'HEAD', body: [], ended: end, held: 0 };
      s.ctx = x;
      if (!send(x)) { s.ctx = undefined; conn.reset(s, 7); }
    },
    data(s, data, end) {
      const x = s.ctx;
      if (!x) return;
      if (end) x.ended = true;
      if (x.body !== undefined) {
        x.held += data.length;
        if (x.held <= REPLAYABLE) x.body.push(Buffer.from(data));
        else x.body = undefined;
      }
      x.up.data(x.us, data, end);
      conn.consumed(s, data.length);
    },
    reset(s) {
      const x = s.ctx;
      if (!x) return;
      s.ctx = undefined;
      x.us.ctx = undefined;
      x.up.reset(x.us, 8);
    },
    closed() { socket.end(); },
  });
  readInto(socket, conn);
});
server.listen(listen.port, listen.host, () => console.log(`h2-floor-relay: ${listen.host}:${listen.port} -> ${upstreamAt.host}:${upstreamAt.port}`));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
