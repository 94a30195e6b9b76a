// Runs one application probe the way the kubelet would have run it before the injector rewrote it
// to the status port: HTTP(S) GET, TCP connect or gRPC health check, bounded by timeoutSeconds.
//
// Where the probes go. The destination is the pod IP (INSTANCE_IP), as in Istio; with
// REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION it is `localhost` (for apps that listen on loopback only);
// when INSTANCE_IP is empty (not running in a pod: tests, local runs) it is 127.0.0.1. An httpGet or
// tcpSocket `host` field wins over all of these, as with the kubelet.
//
// Why probes to the pod IP leave from 127.0.0.6. The agent runs as uid 1337, which the capture rules
// exempt from outbound capture, so the connection is never sent to 15001. But a connection from uid
// 1337 to the pod's own IP leaves through `lo`, and the rules send exactly that traffic (`-o lo
// ! -d 127.0.0.1 -m owner --uid-owner 1337 -j MESH_IN_REDIRECT`) to the inbound listener, 15006, the
// path the proxy uses for a service VIP that resolves to its own pod. The rule before it returns
// traffic from 127.0.0.6 on lo (the proxy's own inbound passthrough), so, as Istio does, a probe to
// the pod IP binds 127.0.0.6 (`::6` for IPv6, when that address exists on the host) and reaches the
// app directly. Probes to loopback (`localhost`, 127.0.0.1) or to another host are not redirected
// and are not bound.
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import {
  Agent as HttpAgent, request as httpRequest,
  type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type RequestOptions,
} from 'node:http';
// node:tls and node:https are loaded by the first HTTPS probe (process.getBuiltinModule).
import type { Agent as HttpsAgent } from 'node:https';
import type { ClientHttp2Session } from 'node:http2';
import { http2 } from '../proxy/http2/node-http2.js';
import { networkInterfaces } from 'node:os';
import type { AppProbe, GrpcProbe, HttpGetProbe, TcpSocketProbe } from './app-probers.js';
import { INBOUND_PASSTHROUGH_ADDR_V4, INBOUND_PASSTHROUGH_ADDR_V6 } from '../iptables/constants.js';
import { serverNameIndication } from '../net/server-name.js';

export interface ProbeEnv {
  /** INSTANCE_IP: the pod IP; '' outside a pod. */
  readonly instanceIp: string;
  /** REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION: probe `localhost` instead of the pod IP. */
  readonly rewriteLegacyLocalhost: boolean;
  /** ENABLE_PROBE_KEEPALIVE_CONNECTIONS: reuse connections between HTTP probes. */
  readonly keepAlive: boolean;
  /** MESH_ENABLE_HTTP2_PROBING: offer h2 (ALPN) to HTTPS apps, falling back to HTTP/1.1. */
  readonly http2Probing: boolean;
}

export interface ProbeResult {
  readonly ok: boolean;
  /** What happened, in one line: `HTTP probe failed with statuscode: 503`, `connect ECONNREFUSED ...`. */
  readonly message: string;
}

/** setTimeout's ceiling; a larger timeoutSeconds would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const NO_VERIFY = { rejectUnauthorized: false } as const;

/** Hop-by-hop and framing headers of the kubelet's request that must not be forwarded to the app. */
const NOT_FORWARDED = new Set([
  'host', 'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer',
  'upgrade', 'content-length', 'expect', 'http2-settings',
]);

class ProbeTimeout extends Error {}

// ---------------------------------------------------------------------------------------------
// grpc.health.v1 messages, encoded by hand (two fields are not worth a protobuf library).

/** HealthCheckResponse.ServingStatus names, by number. */
export const SERVING_STATUS = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'] as const;
const SERVING = 1;

/** gRPC status code names, by number (grpc/codes). */
const GRPC_CODES = [
  'OK', 'Canceled', 'Unknown', 'InvalidArgument', 'DeadlineExceeded', 'NotFound', 'AlreadyExists',
  'PermissionDenied', 'ResourceExhausted', 'FailedPrecondition', 'Aborted', 'OutOfRange',
  'Unimplemented', 'Internal', 'Unavailable', 'DataLoss', 'Unauthenticated',
];

function varint(value: number): number[] {
  const out: number[] = [];
  let v = value;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** A length-prefixed gRPC message carrying HealthCheckRequest{service}: field 1, wire type 2. */
export function encodeHealthCheckRequest(service: string): Buffer {
  const name = Buffer.from(service, 'utf8');
  // proto3 leaves a default (empty) string out.
  const message = name.length === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a, ...varint(name.length)]), name]);
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt8(0, 0); // not compressed
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

function readVarint(buf: Buffer, at: number): [value: number, next: number] {
  let value = 0;
  let factor = 1;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    const byte = buf[i]!;
    value += (byte & 0x7f) * factor;
    factor *= 128;
    if ((byte & 0x80) === 0) return [value, i + 1];
  }
  throw new Error('malformed protobuf varint');
}

/** The `status` (field 1) of a length-prefixed HealthCheckResponse; 0 (UNKNOWN) when absent. */
export function decodeHealthCheckResponse(frame: Buffer): number {
  if (frame.length < 5) throw new Error(`response of ${frame.length} bytes is shorter than a gRPC message header`);
  if (frame[0] !== 0) throw new Error('compressed gRPC response (none was accepted)');
  const length = frame.readUInt32BE(1);
  if (frame.length < 5 + length) throw new Error(`gRPC message of ${length} bytes truncated at ${frame.length - 5}`);
  const msg = frame.subarray(5, 5 + length);
  let status = 0;
  for (let at = 0; at < msg.length;) {
    const [tag, afterTag] = readVarint(msg, at);
    const fieldNumber = Math.floor(tag / 8);
    switch (tag % 8) {
      case 0: {
        const [value, next] = readVarint(msg, afterTag);
        if (fieldNumber === 1) status = value;
        at = next;
        break;
      }
      case 1: at = afterTag + 8; break;
      case 2: {
        const [len, next] = readVarint(msg, afterTag);
        at = next + len;
        break;
      }
      case 5: at = afterTag + 4; break;
      default: throw new Error(`unsupported protobuf wire type ${tag % 8}`);
    }
    if (at > msg.length) throw new Error('truncated protobuf field');
  }
  return status;
}

// ---------------------------------------------------------------------------------------------

function hostPort(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs `start` with `ms` to finish; the function it returns tears down what it opened when time is up. */
function bounded<T>(ms: number, start: (settle: (result: T) => void, fail: (err: unknown) => void) => () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    let cancel: () => void = () => {};
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      cancel();
      reject(new ProbeTimeout());
    }, Math.min(ms, MAX_TIMER_MS));
    const finish = (fn: () => void): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      fn();
    };
    try {
      cancel = start((r) => finish(() => resolve(r)), (e) => finish(() => reject(e)));
    } catch (err) {
      finish(() => reject(err));
    }
  });
}

/** True when the host has `::6` configured (the IPv6 inbound passthrough address). */
function hasPassthroughV6(): boolean {
  return Object.values(networkInterfaces()).some((list) => list?.some((a) => a.family === 'IPv6' && a.address === INBOUND_PASSTHROUGH_ADDR_V6));
}

/** Runs application probes; holds the keep-alive pools when ENABLE_PROBE_KEEPALIVE_CONNECTIONS is on. */
export class AppProber {
  readonly #env: ProbeEnv;
  readonly #destination: string;
  readonly #sourceForPodIp: string | undefined;
  readonly #httpAgent: HttpAgent | undefined;
  #httpsAgent: HttpsAgent | undefined;
  /** Keep-alive h2 sessions by origin. */
  readonly #h2Sessions = new Map<string, ClientHttp2Session>();
  /** Origins that answered ALPN with HTTP/1.1 (keep-alive mode: later probes use the https agent). */
  readonly #h1Origins = new Set<string>();

  constructor(env: ProbeEnv) {
    this.#env = env;
    this.#destination = env.rewriteLegacyLocalhost ? 'localhost' : env.instanceIp || '127.0.0.1';
    const family = env.instanceIp === '' ? 0 : isIP(env.instanceIp); // isIP('') compiles node's IPv6 pattern (~9 ms)
    const loopback = env.instanceIp.startsWith('127.') || env.instanceIp === '::1';
    this.#sourceForPodIp = family === 4 && !loopback ? INBOUND_PASSTHROUGH_ADDR_V4
      : family === 6 && !loopback && hasPassthroughV6() ? INBOUND_PASSTHROUGH_ADDR_V6 : undefined;
    if (env.keepAlive) {
      this.#httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 4 });
    }
  }

  /** Where a probe without a `host` goes. */
  get destination(): string {
    return this.#destination;
  }

  /** Runs the probe; `incoming` are the kubelet's request headers, forwarded to HTTP apps as Istio does. */
  async run(probe: AppProbe, incoming: IncomingHttpHeaders = {}): Promise<ProbeResult> {
    switch (probe.kind) {
      case 'httpGet': return this.#http(probe, incoming);
      case 'tcpSocket': return this.#tcp(probe);
      case 'grpc': return this.#grpc(probe);
    }
  }

  /** With ENABLE_PROBE_KEEPALIVE_CONNECTIONS, the pool of HTTPS probes, made by the first one. */
  #keepAliveHttpsAgent(): HttpsAgent | undefined {
    if (!this.#env.keepAlive) return undefined;
    return (this.#httpsAgent ??= new (process.getBuiltinModule('node:https').Agent)({ keepAlive: true, maxSockets: 4, ...NO_VERIFY }));
  }

  /** Closes pooled connections. */
  close(): void {
    this.#httpAgent?.destroy();
    this.#httpsAgent?.destroy();
    for (const session of this.#h2Sessions.values()) session.destroy();
    this.#h2Sessions.clear();
  }

  #target(host: string | undefined): { host: string; localAddress?: string } {
    const target = host || this.#destination;
    const source = target === this.#env.instanceIp ? this.#sourceForPodIp : undefined;
    return source ? { host: target, localAddress: source } : { host: target };
  }

  // --- TCP --------------------------------------------------------------------------------------

  async #tcp(probe: TcpSocketProbe): Promise<ProbeResult> {
    const { host, localAddress } = this.#target(probe.host);
    const where = hostPort(host, probe.port);
    try {
      await bounded<void>(probe.timeoutMs, (ok, fail) => {
        const socket = netConnect({ host, port: probe.port, ...(localAddress ? { localAddress } : {}) });
        socket.once('connect', () => { socket.destroy(); ok(); });
        socket.once('error', fail);
        return () => socket.destroy();
      });
      return { ok: true, message: `TCP probe succeeded: connected to ${where}` };
    } catch (err) {
      const why = err instanceof ProbeTimeout ? `no connection within ${probe.timeoutMs}ms` : errorText(err);
      return { ok: false, message: `TCP probe failed: ${where}: ${why}` };
    }
  }

  // --- HTTP(S) ----------------------------------------------------------------------------------

  /** The request headers: the kubelet's (minus hop-by-hop), then the probe's httpHeaders, which replace same-named ones. */
  #headers(probe: HttpGetProbe, incoming: IncomingHttpHeaders): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {};
    const dropped = new Set(NOT_FORWARDED);
    for (const token of String(incoming['connection'] ?? '').split(',')) dropped.add(token.trim().toLowerCase());
    for (const [name, value] of Object.entries(incoming)) {
      if (value === undefined || name.startsWith(':') || dropped.has(name)) continue;
      out[name] = value;
    }
    const own = new Map<string, string[]>();
    for (const { name, value } of probe.headers) {
      const key = name.toLowerCase();
      own.set(key, [...(own.get(key) ?? []), value]);
    }
    for (const [key, values] of own) out[key] = key === 'host' || values.length === 1 ? values[values.length - 1]! : values;
    return out;
  }

  async #http(probe: HttpGetProbe, incoming: IncomingHttpHeaders): Promise<ProbeResult> {
    const target = this.#target(probe.host);
    const headers = this.#headers(probe, incoming);
    const scheme = probe.scheme === 'HTTPS' ? 'https' : 'http';
    const url = `${scheme}://${hostPort(target.host, probe.port)}${probe.requestPath}`;
    try {
      const status = await bounded<number>(probe.timeoutMs, (ok, fail) =>
        probe.scheme === 'HTTPS' && this.#env.http2Probing
          ? this.#httpsAlpn(probe, target, headers, ok, fail)
          : this.#http1(probe, target, headers, ok, fail));
      // The kubelet's rule: 2xx and 3xx succeed (redirects are not followed here).
      return status >= 200 && status < 400
        ? { ok: true, message: `HTTP probe succeeded with statuscode: ${status}` }
        : { ok: false, message: `HTTP probe failed with statuscode: ${status}` };
    } catch (err) {
      const why = err instanceof ProbeTimeout ? `no response within ${probe.timeoutMs}ms` : errorText(err);
      return { ok: false, message: `HTTP probe failed: GET ${url}: ${why}` };
    }
  }

  /** Common options of an HTTP/1.1 probe request. */
  #h1Options(probe: HttpGetProbe, target: { host: string; localAddress?: string }, headers: OutgoingHttpHeaders): RequestOptions {
    return {
      method: 'GET', host: target.host, port: probe.port, path: probe.requestPath,
      headers: this.#env.keepAlive ? headers : { ...headers, connection: 'close' },
      ...(target.localAddress ? { localAddress: target.localAddress } : {}),
    };
  }

  /** Status of a response; the body is drained (so a keep-alive socket can be reused) and ignored. */
  static #onResponse(ok: (status: number) => void) {
    return (res: IncomingMessage): void => {
      res.on('error', () => {});
      res.resume();
      ok(res.statusCode ?? 0);
    };
  }

  #http1(probe: HttpGetProbe, target: { host: string; localAddress?: string }, headers: OutgoingHttpHeaders,
    ok: (status: number) => void, fail: (err: unknown) => void): () => void {
    const https = probe.scheme === 'HTTPS';
    const options: RequestOptions = {
      ...this.#h1Options(probe, target, headers),
      // Without keep-alive: `agent: false` opens a fresh connection for this request only.
      agent: (https ? this.#keepAliveHttpsAgent() : this.#httpAgent) ?? false,
      // As the kubelet: the app's certificate is not verified. SNI only for a name, not an address.
      ...(https ? { ...NO_VERIFY, servername: serverNameIndication(target.host) ?? '' } : {}),
    };
    const req = (https ? process.getBuiltinModule('node:https').request : httpRequest)(options, AppProber.#onResponse(ok));
    req.on('error', fail);
    req.end();
    return () => req.destroy();
  }

  /**
   * HTTPS with MESH_ENABLE_HTTP2_PROBING: one TLS handshake offering ALPN `h2, http/1.1`; the request
   * then goes over HTTP/2 if the app chose h2, else over HTTP/1.1 on the same connection (Go's
   * transport behaves the same way). With keep-alive, h2 sessions are kept per origin, and an origin
   * that chose HTTP/1.1 is remembered and served by the keep-alive https agent from then on.
   */
  #httpsAlpn(probe: HttpGetProbe, target: { host: string; localAddress?: string }, headers: OutgoingHttpHeaders,
    ok: (status: number) => void, fail: (err: unknown) => void): () => void {
    const origin = `${hostPort(target.host, probe.port)}|${target.localAddress ?? ''}`;
    const keepAlive = this.#env.keepAlive;
    if (keepAlive && this.#h1Origins.has(origin)) return this.#http1(probe, target, headers, ok, fail);
    const cached = this.#h2Sessions.get(origin);
    if (cached && !cached.closed && !cached.destroyed) return this.#h2Request(cached, probe, target, headers, false, ok, fail);

    const socket: TLSSocket = process.getBuiltinModule('node:tls').connect({
      host: target.host, port: probe.port, ...NO_VERIFY, ALPNProtocols: ['h2', 'http/1.1'],
      servername: serverNameIndication(target.host) ?? '',
      ...(target.localAddress ? { localAddress: target.localAddress } : {}),
    });
    let cancel = (): void => { socket.destroy(); };
    socket.once('error', fail);
    socket.once('secureConnect', () => {
      socket.removeListener('error', fail);
      socket.on('error', () => {}); // reported through the request or session that owns it now
      if (socket.alpnProtocol === 'h2') {
        const session = http2().connect(`https://${hostPort(target.host, probe.port)}`, { createConnection: () => socket });
        session.on('error', () => {});
        if (keepAlive) {
          this.#h2Sessions.set(origin, session);
          session.once('close', () => { if (this.#h2Sessions.get(origin) === session) this.#h2Sessions.delete(origin); });
          session.unref();
        }
        cancel = this.#h2Request(session, probe, target, headers, !keepAlive, ok, fail);
        return;
      }
      if (keepAlive) this.#h1Origins.add(origin);
      const req = httpRequest({
        ...this.#h1Options(probe, target, headers), headers: { ...headers, connection: 'close' },
        createConnection: () => socket,
      }, AppProber.#onResponse(ok));
      req.on('error', fail);
      req.end();
      cancel = () => req.destroy();
    });
    return () => cancel();
  }

  #h2Request(session: ClientHttp2Session, probe: HttpGetProbe, target: { host: string }, headers: OutgoingHttpHeaders,
    closeAfter: boolean, ok: (status: number) => void, fail: (err: unknown) => void): () => void {
    const { host, ...rest } = headers;
    const stream = session.request({
      ...rest,
      ':method': 'GET',
      ':scheme': 'https',
      ':path': probe.requestPath,
      ':authority': typeof host === 'string' ? host : hostPort(target.host, probe.port),
    }, { endStream: true });
    const end = (): void => { if (closeAfter) session.close(); };
    stream.once('response', (h) => {
      stream.resume();
      stream.on('error', () => {});
      end();
      ok(Number(h[':status']));
    });
    stream.once('error', (err) => { end(); fail(err); });
    return () => { stream.destroy(); if (closeAfter) session.destroy(); };
  }

  // --- gRPC -------------------------------------------------------------------------------------

  async #grpc(probe: GrpcProbe): Promise<ProbeResult> {
    const { host, localAddress } = this.#target(undefined);
    const authority = hostPort(host, probe.port);
    try {
      const status = await bounded<number>(probe.timeoutMs, (ok, fail) => {
        // A fresh HTTP/2 cleartext connection per probe, as the kubelet's gRPC prober makes.
        const session = http2().connect(`http://${authority}`, {
          createConnection: (): Socket => netConnect({ host, port: probe.port, ...(localAddress ? { localAddress } : {}) }),
        });
        session.on('error', fail);
        const stream = session.request({
          ':method': 'POST',
          ':path': '/grpc.health.v1.Health/Check',
          'content-type': 'application/grpc',
          te: 'trailers',
          'grpc-timeout': `${Math.min(probe.timeoutMs, 99_999_999)}m`,
          'user-agent': 'mesh-probe',
        });
        let headers: Record<string, unknown> = {};
        let trailers: Record<string, unknown> = {};
        const chunks: Buffer[] = [];
        stream.on('response', (h) => { headers = h; });
        stream.on('trailers', (t) => { trailers = t; });
        stream.on('data', (chunk: Buffer) => { chunks.push(chunk); });
        stream.on('error', fail);
        stream.on('end', () => {
          session.close();
          try {
            ok(grpcOutcome(headers, trailers, Buffer.concat(chunks)));
          } catch (err) {
            fail(err);
          }
        });
        stream.end(encodeHealthCheckRequest(probe.service));
        return () => session.destroy();
      });
      const name = SERVING_STATUS[status] ?? String(status);
      return status === SERVING
        ? { ok: true, message: `gRPC probe succeeded: ${name}` }
        : { ok: false, message: `gRPC probe failed: service unhealthy (responded with "${name}")` };
    } catch (err) {
      // A refused connection reaches the stream as "pending stream canceled", caused by the real error.
      const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
      const why = err instanceof ProbeTimeout ? `no response within ${probe.timeoutMs}ms` : errorText(cause);
      return { ok: false, message: `gRPC probe failed: ${authority}: ${why}` };
    }
  }
}

/** The serving status of a finished Health/Check call, or an error naming the RPC failure. */
function grpcOutcome(headers: Record<string, unknown>, trailers: Record<string, unknown>, body: Buffer): number {
  const httpStatus = Number(headers[':status']);
  if (httpStatus !== 200) throw new Error(`rpc error: HTTP status ${httpStatus}`);
  // A trailers-only answer (an error) carries grpc-status in the headers.
  const code = trailers['grpc-status'] ?? headers['grpc-status'];
  if (code === undefined) throw new Error('rpc error: no grpc-status in the response');
  if (String(code) !== '0') {
    const raw = String(trailers['grpc-message'] ?? headers['grpc-message'] ?? '');
    let desc = raw;
    try { desc = decodeURIComponent(raw); } catch { /* keep it as sent */ }
    throw new Error(`rpc error: code = ${GRPC_CODES[Number(code)] ?? `Code(${String(code)})`} desc = ${desc}`);
  }
  return decodeHealthCheckResponse(body);
}
