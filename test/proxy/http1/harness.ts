// Test scaffolding for the HTTP/1.1 path: a proxy listener on 127.0.0.1 feeding an Http1Handler
// (the way CaptureListener does, first bytes read), an upstream node:http server, a recording
// decider, and a raw client that writes exact bytes and parses what comes back on its own.
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { Server, connect, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AccessLogSink, AccessRecord, ListenerRole } from '../../../src/log/access-record.js';
import type { RequestDecider, Verdict } from '../../../src/proxy/decider.js';
import type { Http1Settings } from '../../../src/proxy/http1/connection.js';
import { Http1Handler } from '../../../src/proxy/http1/handler.js';
import type { Endpoint } from '../../../src/proxy/socket-options.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import type { UpstreamMode } from '../../../src/proxy/upstream.js';

export interface Completion {
  readonly url: string;
  readonly status: number | undefined;
  readonly verdict: Verdict | undefined;
}

/** Wraps a decider (default: the destination) and records every `completed` call, and doubles. */
export class Recorder implements RequestDecider {
  readonly completions: Completion[] = [];
  readonly seen = new Set<object>();
  duplicates = 0;

  constructor(private readonly inner: (req: IncomingMessage, dst: Endpoint | undefined) => Verdict | Promise<Verdict>) {}

  decide(req: IncomingMessage, dst: Endpoint | undefined): Verdict | Promise<Verdict> {
    return this.inner(req, dst);
  }

  completed(req: IncomingMessage, verdict: Verdict | undefined, status: number | undefined): void {
    if (this.seen.has(req)) this.duplicates++;
    this.seen.add(req);
    this.completions.push({ url: req.url ?? '', status, verdict });
  }

  /** Waits until `n` requests completed. */
  async waitFor(n: number): Promise<Completion[]> {
    for (let i = 0; i < 400 && this.completions.length < n; i++) await sleep(10);
    return this.completions;
  }
}

export function toDestination(req: IncomingMessage, dst: Endpoint | undefined): Verdict {
  void req;
  return { kind: 'forward', address: dst!.address, port: dst!.port };
}

export interface ProxyOptions extends Partial<Http1Settings> {
  readonly destination: Endpoint;
  readonly decider?: RequestDecider;
  /** Hand the first chunk as `head`, like the capture listener (default); false: nothing read. */
  readonly sniff?: boolean;
  readonly host?: string;
  readonly upstream?: UpstreamMode;
  readonly accessLog?: AccessLogSink;
  readonly role?: ListenerRole;
}

export interface Proxy {
  readonly port: number;
  readonly handler: Http1Handler;
  readonly stats: DirectionStats;
  readonly sockets: Set<Socket>;
  close(): Promise<void>;
}

export async function startProxy(o: ProxyOptions): Promise<Proxy> {
  const stats = new DirectionStats();
  const { destination, decider, sniff: _sniff, host: _host, upstream, accessLog, role, ...settings } = o;
  const handler = new Http1Handler({
    stats, upstream: upstream ?? { kind: 'direct' }, destinationOf: () => destination,
    ...(decider ? { decider } : {}), settings, accessLog, ...(role ? { role } : {}),
  });
  const sockets = new Set<Socket>();
  const server = new Server({ pauseOnConnect: true, allowHalfOpen: true, noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    if (o.sniff === false) {
      handler.accept(socket, Buffer.alloc(0));
      return;
    }
    socket.once('data', (head: Buffer) => {
      socket.pause();
      handler.accept(socket, head);
    });
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, o.host ?? '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    handler, stats, sockets,
    close: async () => {
      for (const s of sockets) s.destroy();
      handler.drain();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface Upstream {
  readonly server: HttpServer;
  readonly endpoint: Endpoint;
  /** Connections the upstream accepted. */
  connections: number;
  /** Remote addresses of those connections. */
  readonly peers: string[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A node:http upstream; `route` answers each request (default: echo of method, url, headers, body). */
export async function startUpstream(route: Handler = echo, host = '127.0.0.1'): Promise<Upstream> {
  const server = createServer({ keepAliveTimeout: 60_000 }, route);
  const sockets = new Set<Duplex>();
  const up: Upstream = {
    server, endpoint: { address: host, port: 0 }, connections: 0, peers: [],
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  server.on('connection', (s: Socket) => {
    up.connections++;
    up.peers.push(s.remoteAddress ?? '');
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  (up as { endpoint: Endpoint }).endpoint = { address: host, port: (server.address() as AddressInfo).port };
  return up;
}

/** Answers JSON: method, url, headers (raw), body. */
export function echo(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.stringify({ method: req.method, url: req.url, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks).toString('latin1') });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  });
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly rawHead: string;
  readonly body: Buffer;
  readonly chunked: boolean;
}

/** A client that writes exact bytes and parses responses itself (independently of the proxy's parser). */
export class RawClient {
  buf = Buffer.alloc(0);
  ended = false;
  closed = false;
  private waiters: (() => void)[] = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => { this.buf = Buffer.concat([this.buf, d]); this.wake(); });
    socket.on('end', () => { this.ended = true; this.wake(); });
    socket.on('close', () => { this.closed = true; this.wake(); });
    socket.on('error', () => undefined);
  }

  /** Around a connected socket (a TLS one, say). */
  static wrap(socket: Socket): RawClient {
    return new RawClient(socket);
  }

  static connect(port: number, host = '127.0.0.1', localAddress?: string): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const s = connect({ port, host, ...(localAddress ? { localAddress } : {}) }, () => resolve(new RawClient(s)));
      s.once('error', reject);
    });
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** The next complete response (1xx ones included); `head`: the request was HEAD (no body). */
  async response(o: { head?: boolean } = {}): Promise<RawResponse> {
    for (;;) {
      const r = this.parse(o.head ?? false);
      if (r) return r;
      if (this.ended || this.closed) throw new Error(`connection ended with ${this.buf.length} bytes unparsed: ${JSON.stringify(this.buf.toString('latin1').slice(0, 200))}`);
      await this.next();
    }
  }

  /** Resolves when the server ended or closed the connection. */
  async end(): Promise<void> {
    while (!this.ended && !this.closed) await this.next();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private next(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private parse(headOnly: boolean): RawResponse | undefined {
    const text = this.buf.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const rawHead = text.slice(0, end);
    const [statusLine = '', ...lines] = rawHead.split('\r\n');
    const status = Number(statusLine.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      const name = line.slice(0, i).toLowerCase();
      const value = line.slice(i + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    let at = end + 4;
    let body = Buffer.alloc(0);
    const chunked = /chunked/i.test(headers['transfer-encoding'] ?? '');
    if (headOnly || status < 200 || status === 204 || status === 304) {
      // no body
    } else if (chunked) {
      const parts: Buffer[] = [];
      for (;;) {
        const lineEnd = this.buf.indexOf('\r\n', at, 'latin1');
        if (lineEnd < 0) return undefined;
        const size = parseInt(this.buf.subarray(at, lineEnd).toString('latin1'), 16);
        if (this.buf.length < lineEnd + 2 + size + 2) return undefined;
        parts.push(this.buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(parts);
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (this.buf.length < at + n) return undefined;
      body = this.buf.subarray(at, at + n);
      at += n;
    } else {
      if (!this.ended && !this.closed) return undefined; // delimited by the close
      body = this.buf.subarray(at);
      at = this.buf.length;
    }
    this.buf = this.buf.subarray(at);
    return { status, headers, rawHead, body: Buffer.from(body), chunked };
  }
}

export interface RawServer {
  readonly endpoint: Endpoint;
  /** Connections accepted so far. */
  connections: number;
  close(): Promise<void>;
}

/** A TCP server speaking whatever `onConnection` writes (for upstreams node:http would not be). */
export async function startRawServer(onConnection: (s: Socket) => void): Promise<RawServer> {
  const sockets = new Set<Socket>();
  const raw: RawServer = {
    endpoint: { address: '127.0.0.1', port: 0 }, connections: 0,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = new Server((s) => {
    raw.connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    onConnection(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  (raw as { endpoint: Endpoint }).endpoint = { address: '127.0.0.1', port: (server.address() as AddressInfo).port };
  return raw;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `check` until it holds (or gives up after ~4 s, and the assertion that follows fails). */
export async function eventually(check: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !check(); i++) await sleep(10);
}

/** An access log sink that keeps the records (the formatter is tested on its own). */
export class RecordedLog implements AccessLogSink {
  /** Turned off and on by the tests of a log switched at run time (a Telemetry). */
  on = true;
  readonly records: AccessRecord[] = [];
  constructor(readonly responseHeaders: readonly string[] = []) {}
  write(record: AccessRecord): void {
    this.records.push(record);
  }
  /** Waits until `n` records were written. */
  async waitFor(n: number): Promise<AccessRecord[]> {
    await eventually(() => this.records.length >= n);
    return this.records;
  }
}
