// L7 handling of HTTP/1.x connections (sidecar inbound and outbound, gateway): requests are parsed
// by Node's HTTP server machinery (fed the already-accepted sockets), a decider says where each one
// goes (the connection's original destination, a route, or a local answer such as 401), and the
// request is forwarded over a keep-alive pool and streamed both ways with back-pressure (pipe).
import {
  STATUS_CODES, Server, request, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { scope } from '../log/logger.js';
import { connectUpstream, sourceFor, UpstreamAgent, type UpstreamMode } from './upstream.js';
import type { Endpoint } from './socket-options.js';
import type { DirectionStats } from './stats.js';

const log = scope('default');

/** Forward the request to `address:port`, edited as given. */
export interface ForwardTarget {
  readonly kind: 'forward';
  readonly address: string;
  readonly port: number;
  /** Replaces the request target (path and query). */
  readonly path?: string;
  /** Lower-case names of request headers not to forward (e.g. a JWT the rule does not forward). */
  readonly removeHeaders?: readonly string[];
  /** Request headers to set (replacing any of the same name). */
  readonly setHeaders?: readonly (readonly [string, string])[];
  /** No response head within this time: 504. */
  readonly timeoutMs?: number;
}

/** Answer locally (401, 403, 404, a redirect...) without going upstream. */
export interface LocalReply {
  readonly kind: 'reply';
  readonly status: number;
  readonly body: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export type Verdict = ForwardTarget | LocalReply;

/** Where requests go: policy and routing plug in here. Synchronous when it can (the hot path). */
export interface RequestDecider {
  decide(req: IncomingMessage, dst: Endpoint | undefined): Verdict | Promise<Verdict>;
  /** Once per request, when its response is complete or abandoned (status undefined: no answer sent). */
  completed?(req: IncomingMessage, verdict: Verdict | undefined, status: number | undefined, durationMs: number): void;
}

/** The sidecar's default: every request to the connection's original destination. */
export const ORIGINAL_DESTINATION: RequestDecider = {
  decide: (_req, dst) => (dst ? { kind: 'forward', address: dst.address, port: dst.port } : NO_DESTINATION),
};

const UPSTREAM_FAILURE = 'upstream connect error or disconnect/reset before headers. reset reason: ';
const NO_DESTINATION: LocalReply = { kind: 'reply', status: 503, body: `${UPSTREAM_FAILURE}no original destination\n` };

export interface HttpHandlerOptions {
  readonly stats: DirectionStats;
  readonly upstream: UpstreamMode;
  /** ENABLE_100_CONTINUE_HEADERS: pass `Expect: 100-continue` on and relay the upstream's 100. */
  readonly forward100Continue: boolean;
  /** PILOT_HTTP10: accept HTTP/1.0 requests (else 426). */
  readonly allowHttp10: boolean;
  /** Where each accepted connection was going; set by the listener before handing it over. */
  readonly destinationOf: (socket: Socket) => Endpoint | undefined;
  /** Default ORIGINAL_DESTINATION. */
  readonly decider?: RequestDecider;
}

/** Headers that describe one hop and are not forwarded (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

function forwardedHeaders(raw: readonly string[], dropExpect: boolean, target?: ForwardTarget): string[] {
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
    if (target?.removeHeaders?.includes(name)) continue;
    if (target?.setHeaders?.some(([n]) => n === name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  if (target?.setHeaders) for (const [n, v] of target.setHeaders) out.push(n, v);
  return out;
}

function sendReply(res: ServerResponse, reply: LocalReply): void {
  res.writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers, 'content-length': Buffer.byteLength(reply.body) }).end(reply.body);
}

export class HttpHandler {
  readonly server: Server;
  private readonly agent: UpstreamAgent;
  private draining = false;
  private readonly sockets = new Set<Socket>();

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
    if (head.length > 0) socket.unshift(head);
    // This server never listens, so it does not track its connections: drain() needs them.
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    this.server.emit('connection', socket);
  }

  /**
   * Drain: idle keep-alive connections close now, busy ones after their current response (which
   * says `connection: close`); in-flight requests finish.
   */
  drain(): void {
    this.draining = true;
    for (const socket of this.sockets) {
      // node:http keeps the response in progress on the socket; none means the connection is idle.
      const current = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
      if (current) current.shouldKeepAlive = false;
      else socket.destroy();
    }
    for (const sockets of Object.values(this.agent.freeSockets)) for (const s of sockets ?? []) s.destroy();
  }

  private forward(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void {
    const s = this.o.stats;
    const started = performance.now();
    s.rqTotal++;
    s.rqActive++;
    if (this.draining) res.shouldKeepAlive = false;
    let verdict: Verdict | undefined;
    res.on('close', () => {
      s.rqActive--;
      // A request whose client left before any answer has no status (statusCode would read 200).
      const status = res.headersSent ? res.statusCode : undefined;
      const ms = performance.now() - started;
      if (status !== undefined) s.recordResponse(status, ms);
      this.decider.completed?.(req, verdict, status, ms);
    });
    if (req.httpVersion === '1.0' && !this.o.allowHttp10) {
      res.writeHead(426, { connection: 'close', 'content-length': 0 }).end();
      return;
    }
    const decided = this.decide(req);
    const go = (v: Verdict): void => {
      verdict = v;
      if (v.kind === 'reply') {
        // The body was not read: after a local answer the connection cannot be reused safely.
        if (!req.complete) res.shouldKeepAlive = false;
        sendReply(res, v);
      } else {
        this.send(req, res, v, expectContinue);
      }
    };
    if (decided instanceof Promise) decided.then(go, (err: Error) => go(decisionFailed(err)));
    else go(decided);
  }

  private get decider(): RequestDecider {
    return this.o.decider ?? ORIGINAL_DESTINATION;
  }

  /** The decider's verdict; a decider that throws answers 500 instead of taking the process down. */
  private decide(req: IncomingMessage): Verdict | Promise<Verdict> {
    try {
      return this.decider.decide(req, this.o.destinationOf(req.socket));
    } catch (err) {
      return decisionFailed(err as Error);
    }
  }

  private send(req: IncomingMessage, res: ServerResponse, target: ForwardTarget, expectContinue: boolean): void {
    const s = this.o.stats;
    const up = request({
      agent: this.agent,
      host: target.address,
      port: target.port,
      method: req.method,
      path: target.path ?? req.url,
      headers: forwardedHeaders(req.rawHeaders, !expectContinue, target) as unknown as OutgoingHttpHeaders,
      setHost: false,
      localAddress: sourceFor(this.o.upstream, target, req.socket.remoteAddress),
    });
    if (expectContinue) up.on('continue', () => res.writeContinue());
    if (target.timeoutMs) {
      const timer = setTimeout(() => {
        if (res.headersSent) return;
        s.upstreamRqTimeouts++;
        res.writeHead(504, { 'content-type': 'text/plain', connection: 'close' }).end('upstream request timeout\n');
        up.destroy();
      }, target.timeoutMs);
      up.once('response', () => clearTimeout(timer));
      res.once('close', () => clearTimeout(timer));
    }
    up.on('response', (upRes: IncomingMessage) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardedHeaders(upRes.rawHeaders, false));
      upRes.pipe(res);
      upRes.on('error', () => res.destroy());
    });
    up.on('error', (err: NodeJS.ErrnoException) => {
      if (res.headersSent && res.statusCode === 504) return;
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

  /** Upgrade (WebSocket) and CONNECT: decided like a request; the head goes up as is, then bytes flow both ways. */
  private tunnel(req: IncomingMessage, socket: Socket, head: Buffer): void {
    // A tunnel is a connection in flight, not an idle keep-alive one: drain leaves it be.
    this.sockets.delete(socket);
    socket.on('error', () => undefined);
    const decided = this.decide(req);
    const go = (v: Verdict): void => {
      if (socket.destroyed) return;
      if (v.kind === 'reply') {
        socket.end(`HTTP/1.1 ${v.status} ${STATUS_CODES[v.status] ?? ''}\r\ncontent-type: text/plain\r\n`
          + `${Object.entries(v.headers ?? {}).map(([n, x]) => `${n}: ${x}\r\n`).join('')}`
          + `content-length: ${Buffer.byteLength(v.body)}\r\nconnection: close\r\n\r\n${v.body}`);
        return;
      }
      this.open(req, socket, head, v);
    };
    if (decided instanceof Promise) decided.then(go, (err: Error) => go(decisionFailed(err)));
    else go(decided);
  }

  private open(req: IncomingMessage, socket: Socket, head: Buffer, target: ForwardTarget): void {
    const upstream = connectUpstream(this.o.upstream, target, sourceFor(this.o.upstream, target, socket.remoteAddress));
    const raw = target.removeHeaders || target.setHeaders ? editedRawHeaders(req.rawHeaders, target) : req.rawHeaders;
    let lines = `${req.method} ${target.path ?? req.url} HTTP/${req.httpVersion}\r\n`;
    for (let i = 0; i < raw.length; i += 2) lines += `${raw[i]}: ${raw[i + 1]}\r\n`;
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

/** A tunnel keeps its hop-by-hop headers (Upgrade, Connection): only the target's own edits apply. */
function editedRawHeaders(raw: readonly string[], target: ForwardTarget): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (target.removeHeaders?.includes(name) || target.setHeaders?.some(([n]) => n === name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  for (const [n, v] of target.setHeaders ?? []) out.push(n, v);
  return out;
}

function decisionFailed(err: Error): LocalReply {
  log.error(`request decision failed: ${err.message}`, { stack: err.stack });
  return { kind: 'reply', status: 500, body: 'internal error deciding this request\n' };
}
