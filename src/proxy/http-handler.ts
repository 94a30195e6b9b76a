// L7 handling of HTTP/1.x connections, inbound or outbound: requests are parsed by Node's HTTP
// server machinery (fed the already-accepted sockets), forwarded to the connection's original
// destination over a keep-alive pool, and streamed both ways with back-pressure (pipe).
import {
  Server, request, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { scope } from '../log/logger.js';
import { connectUpstream, sourceFor, UpstreamAgent, type UpstreamMode } from './upstream.js';
import type { Endpoint } from './socket-options.js';
import type { DirectionStats } from './stats.js';

const log = scope('default');

export interface HttpHandlerOptions {
  readonly stats: DirectionStats;
  readonly upstream: UpstreamMode;
  /** ENABLE_100_CONTINUE_HEADERS: pass `Expect: 100-continue` on and relay the upstream's 100. */
  readonly forward100Continue: boolean;
  /** PILOT_HTTP10: accept HTTP/1.0 requests (else 426). */
  readonly allowHttp10: boolean;
  /** Where each accepted connection was going; set by the listener before handing it over. */
  readonly destinationOf: (socket: Socket) => Endpoint | undefined;
}

/** Headers that describe one hop and are not forwarded (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

function forwardedHeaders(raw: readonly string[], dropExpect: boolean): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') {
      for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || named.has(name) || (dropExpect && name === 'expect')) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

const UPSTREAM_FAILURE = 'upstream connect error or disconnect/reset before headers. reset reason: ';

export class HttpHandler {
  readonly server: Server;
  private readonly agent: UpstreamAgent;
  private draining = false;

  constructor(private readonly o: HttpHandlerOptions) {
    this.agent = new UpstreamAgent(o.upstream, o.stats, { keepAlive: true, maxFreeSockets: 1024, scheduling: 'lifo' });
    this.server = new Server({ requireHostHeader: false, keepAliveTimeout: 300_000, headersTimeout: 60_000, requestTimeout: 0 });
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => this.forward(req, res, false));
    if (o.forward100Continue) {
      // With a listener, Node leaves the 100 to us: it comes from the upstream.
      this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => this.forward(req, res, true));
    }
    this.server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => this.tunnel(req, socket, head));
    this.server.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) => this.tunnel(req, socket, head));
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
      if (err.code !== 'ECONNRESET' && err.code !== 'EPIPE') o.stats.rqProtocolErrors++;
      if (socket.writable && err.code !== 'ECONNRESET') socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      else socket.destroy();
    });
  }

  /** Takes over an accepted connection whose first bytes (`head`) looked like HTTP/1.x. */
  accept(socket: Socket, head: Buffer): void {
    socket.unshift(head);
    this.server.emit('connection', socket);
  }

  /**
   * Drain: idle keep-alive connections close now, busy ones after their current response (which
   * says `connection: close`); in-flight requests finish.
   */
  drain(): void {
    this.draining = true;
    this.server.closeIdleConnections();
    for (const sockets of Object.values(this.agent.freeSockets)) for (const s of sockets ?? []) s.destroy();
  }

  private forward(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void {
    const s = this.o.stats;
    const started = performance.now();
    s.rqTotal++;
    s.rqActive++;
    if (this.draining) res.shouldKeepAlive = false;
    res.on('close', () => {
      s.rqActive--;
      // A request whose client left before any answer has no status (statusCode would read 200).
      if (res.headersSent) s.recordResponse(res.statusCode, performance.now() - started);
    });
    if (req.httpVersion === '1.0' && !this.o.allowHttp10) {
      res.writeHead(426, { connection: 'close', 'content-length': 0 }).end();
      return;
    }
    const dst = this.o.destinationOf(req.socket);
    if (!dst) {
      res.writeHead(503, { 'content-type': 'text/plain' }).end(`${UPSTREAM_FAILURE}no original destination\n`);
      return;
    }
    const headers = forwardedHeaders(req.rawHeaders, !expectContinue) as unknown as OutgoingHttpHeaders;
    const up = request({
      agent: this.agent,
      host: dst.address,
      port: dst.port,
      method: req.method,
      path: req.url,
      headers,
      setHost: false,
      localAddress: sourceFor(this.o.upstream, dst, req.socket.remoteAddress),
    });
    if (expectContinue) up.on('continue', () => res.writeContinue());
    up.on('response', (upRes: IncomingMessage) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardedHeaders(upRes.rawHeaders, false));
      upRes.pipe(res);
      upRes.on('error', () => res.destroy());
    });
    up.on('error', (err: NodeJS.ErrnoException) => {
      s.upstreamRqErrors++;
      if (err.code === 'ECONNREFUSED' || err.code === 'EHOSTUNREACH' || err.code === 'ENETUNREACH' || err.code === 'ETIMEDOUT') {
        s.upstreamCxConnectFail++;
      }
      if (!res.headersSent) {
        res.writeHead(503, { 'content-type': 'text/plain', connection: 'close' })
          .end(`${UPSTREAM_FAILURE}${err.code === 'ECONNREFUSED' ? 'connection failure' : err.code ?? err.message}\n`);
      } else {
        res.destroy();
      }
    });
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  }

  /** Upgrade (WebSocket) and CONNECT: the request head goes up as is, then bytes flow both ways. */
  private tunnel(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const dst = this.o.destinationOf(socket);
    if (!dst) {
      socket.destroy();
      return;
    }
    const upstream = connectUpstream(this.o.upstream, dst, sourceFor(this.o.upstream, dst, socket.remoteAddress));
    let lines = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
    upstream.write(`${lines}\r\n`);
    if (head.length > 0) upstream.write(head);
    upstream.on('error', (err) => {
      this.o.stats.upstreamRqErrors++;
      log.debug('tunnel upstream error', { error: err.message });
      if (!socket.destroyed) socket.resetAndDestroy();
    });
    socket.on('error', () => upstream.destroy());
    socket.pipe(upstream).pipe(socket);
  }
}
