#!/usr/bin/env node
// Micro-benchmark of the strict HTTP/1.1 request parser (src/proxy/http1/request-parser.ts) and the
// message built from it (message.ts: the checks, the forwarded lines, the head written upstream),
// next to llhttp, node's own parser, on the same bytes as a reference. llhttp only parses: its side
// also writes a head from the lines it hands over, so both columns end with the bytes a proxy sends.
// Needs a build (dist/); no root, no network. What the strictness costs per request, in ns.
//
//   node scripts/bench-parser.mjs [--ms N] [--rounds R]
//
// Requests: the bench's (wrk's GET with its Host line, as `make bench` sends it) and one carrying a
// 700-byte bearer token among the headers a browser or an SDK sends. Each round runs each parser on
// each request for N ms (default 400) after a warm-up; the figure is the median of R rounds (5).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median, nsPerCall } from './microbench.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => join(root, 'dist', 'src', p);
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const windowMs = opt('--ms', 400);
const rounds = opt('--rounds', 5);

if (!existsSync(dist('proxy/http1/request-parser.js'))) {
  console.error('bench-parser: build first (make build)');
  process.exit(1);
}
const { RequestParser } = await import(pathToFileURL(dist('proxy/http1/request-parser.js')).href);
const { requestMessage, upstreamHead, isMessageError } = await import(pathToFileURL(dist('proxy/http1/message.js')).href);
const { HTTPParser, methods } = createRequire(import.meta.url)('_http_common');

const token = `eyJhbGciOiJSUzI1NiJ9.${'A'.repeat(640)}.${'s'.repeat(40)}`.slice(0, 700);
const REQUESTS = {
  bench: 'GET /1k.html HTTP/1.1\r\nHost: 198.19.2.1:8080\r\n\r\n',
  token: 'GET /api/v1/orders?limit=20&page=3 HTTP/1.1\r\nHost: shop.example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36\r\n'
    + 'Accept: application/json\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-GB,en;q=0.9\r\n'
    + `Authorization: Bearer ${token}\r\nX-Request-Id: 6f1c2a9e-8a4b-4c2d-9e1f-3b5a7c9d0e21\r\nCookie: session=abc123; theme=dark\r\n\r\n`,
};

/** Ours: parse, judge the message, write the upstream head. */
function ours(bytes) {
  let head;
  const parser = new RequestParser({ onHead: (h) => { head = h; return false; }, onBody: () => {}, onEnd: () => false });
  return () => {
    head = undefined;
    const r = parser.execute(bytes);
    if (typeof r !== 'number' || head === undefined) throw new Error(`our parser refused the request: ${r?.message ?? 'no head'}`);
    const m = requestMessage(head, { normalization: 'BASE' });
    if (isMessageError(m)) throw new Error(`refused: ${m.reason}`);
    return upstreamHead(m, undefined, false).length;
  };
}

/** llhttp through node's binding, and a head written from its lines as a proxy would. */
function llhttp(bytes) {
  const parser = new HTTPParser();
  parser.initialize(HTTPParser.REQUEST, {});
  let out = 0;
  parser[HTTPParser.kOnHeadersComplete] = (major, minor, headers, method, url) => {
    let text = `${methods[method]} ${url} HTTP/${major}.${minor}\r\n`;
    for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
    out = `${text}\r\n`.length;
    return 0;
  };
  parser[HTTPParser.kOnMessageComplete] = () => {};
  return () => {
    const r = parser.execute(bytes);
    if (r instanceof Error || out === 0) throw new Error(`llhttp refused the request: ${r?.message ?? 'no head'}`);
    return out;
  };
}

/** ns per call of `fn` over `ms` milliseconds. */
function measure(fn, ms) {
  const run = (n) => {
    let sink = 0;
    for (let i = 0; i < n; i++) sink += fn();
    return sink;
  };
  return nsPerCall(run, ms, (sink) => {
    if (sink === 0) throw new Error('nothing was written');
  });
}

console.log(`== bench-parser: ns per request (parse + the head written upstream), median of ${rounds} rounds of ${windowMs} ms; node ${process.version}`);
for (const [name, text] of Object.entries(REQUESTS)) {
  const bytes = Buffer.from(text, 'latin1');
  const runs = { ours: ours(bytes), llhttp: llhttp(bytes) };
  for (const fn of Object.values(runs)) measure(fn, 200); // warm-up: compiled before it counts
  const per = { ours: [], llhttp: [] };
  for (let r = 0; r < rounds; r++) for (const [k, fn] of Object.entries(runs)) per[k].push(measure(fn, windowMs));
  const o = median(per.ours);
  const l = median(per.llhttp);
  console.log(`${name.padEnd(6)} (${String(bytes.length).padStart(4)} bytes): ours ${o.toFixed(0)} ns, llhttp ${l.toFixed(0)} ns, ours/llhttp ${(o / l).toFixed(2)}x`
    + `   rounds: ours ${per.ours.map((x) => x.toFixed(0)).join(' ')}; llhttp ${per.llhttp.map((x) => x.toFixed(0)).join(' ')}`);
}
