// Forwards a query to the pod's name servers and returns the answer as the server sent it.
//
// Policy: one server at a time in resolv.conf order, each given `timeoutMs`, or all at once
// (DNS_FORWARD_PARALLEL); the first good answer wins. A good answer is any answer but SERVFAIL,
// REFUSED and NOTIMP (which say "ask another server", as glibc reads them); when no server gives a
// good one, the last such answer is passed on, and when none answers at all the client gets SERVFAIL.
//
// Transport: a UDP query goes out over UDP; an answer with TC set is asked again over TCP from the
// same server and used when it fits the client's UDP size, otherwise the truncated answer is passed
// on so the client retries over TCP itself. A TCP query goes out over TCP (one connection each).
//
// Bytes: the client's query is sent unchanged except for its id: UDP queries share one socket per
// address family, so each gets an id of its own (random, unused), and the answer gets the client's
// id back — everything else in it (flags, every section, EDNS options) is the server's, byte for
// byte. An answer is accepted only from the server asked, with the id and question sent.
// These sockets belong to this process (uid 1337 in a pod), which the DNS capture rules exempt.
import { randomFillSync } from 'node:crypto';
import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { connect, isIP, type Socket } from 'node:net';
import { scope } from '../log/logger.js';
import type { DnsMetrics } from './metrics.js';
import { answersQuery, errorResponse, isTruncated, messageId, RCODE, rcodeOf, withId, type Query } from './wire.js';

const log = scope('dns');

export interface Upstream {
  /** IP address; an IPv6 zone (`fe80::1%eth0`) is allowed. */
  readonly host: string;
  readonly port: number;
}

export interface ForwarderOptions {
  readonly upstreams: readonly Upstream[];
  /** Ask every server at once (DNS_FORWARD_PARALLEL) instead of one after the other. */
  readonly parallel: boolean;
  /** How long each server is given to answer (UDP, and again for a TCP retry). */
  readonly timeoutMs: number;
  readonly metrics?: DnsMetrics;
}

export type Transport = 'udp' | 'tcp';

/** What became of one forwarded query, for the server's counters. */
export interface ForwardResult {
  readonly answer: Buffer;
  /** A good answer came back (not SERVFAIL, REFUSED, NOTIMP, nor a time-out). */
  readonly ok: boolean;
}

/** Answers that say "ask another server". */
function isGood(answer: Uint8Array): boolean {
  const rcode = rcodeOf(answer);
  return rcode !== RCODE.SERVFAIL && rcode !== RCODE.REFUSED && rcode !== RCODE.NOTIMP;
}

/** The address as the kernel reports a datagram's source (IPv6 compressed, lower case, no zone). */
function canonicalIp(address: string): string {
  const bare = address.replace(/%.*$/, '');
  return isIP(bare) === 6 ? new URL(`http://[${bare}]/`).hostname.slice(1, -1) : bare;
}

/** Ends an exchange that is no longer needed. */
type Cancels = (() => void)[];

interface Pending {
  readonly from: string;
  readonly sent: Buffer;
  readonly questionEnd: number;
  readonly resolve: (answer: Buffer) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

class UpstreamTimeout extends Error {
  constructor(upstream: Upstream, transport: Transport, ms: number) {
    super(`${transport} ${upstream.host}:${upstream.port}: no answer within ${ms}ms`);
    this.name = 'UpstreamTimeout';
  }
}

export class Forwarder {
  readonly upstreams: readonly Upstream[];
  readonly #o: ForwarderOptions;
  readonly #keys: readonly string[];
  readonly #pending = new Map<number, Pending>();
  readonly #sockets: { udp4?: UdpSocket; udp6?: UdpSocket } = {};
  readonly #tcp = new Set<Socket>();
  // Random ids drawn in batches: crypto per query would cost more than the rest of the query.
  readonly #ids = new Uint16Array(1024);
  #idAt = this.#ids.length;
  #closed = false;

  constructor(options: ForwarderOptions) {
    this.#o = options;
    this.upstreams = options.upstreams;
    this.#keys = options.upstreams.map((u) => `${canonicalIp(u.host)}|${u.port}`);
  }

  /** The answer for the client (its id), never a rejection: failures become SERVFAIL. */
  async forward(msg: Buffer, query: Query, transport: Transport): Promise<ForwardResult> {
    const m = this.#o.metrics;
    m?.incUpstreamRequests();
    const started = performance.now();
    const attempt = transport === 'udp'
      ? (i: number, cancels: Cancels) => this.#udpThenTcp(i, msg, query, cancels)
      : (i: number, cancels: Cancels) => this.#tcpExchange(this.upstreams[i]!, msg, query.questionEnd, cancels);
    const result = this.upstreams.length === 0 || this.#closed ? { good: false } : await this.#race(attempt);
    if (result.answer) m?.observeUpstreamDuration((performance.now() - started) / 1000);
    if (!result.good) m?.incUpstreamFailures();
    if (!result.answer) return { answer: errorResponse(msg, RCODE.SERVFAIL, query.questionEnd), ok: false };
    // The client's id back; nothing else is touched.
    result.answer[0] = query.id >> 8;
    result.answer[1] = query.id & 0xff;
    return { answer: result.answer, ok: result.good };
  }

  /** Ends every exchange in flight (they answer SERVFAIL) and closes the sockets. */
  close(): void {
    this.#closed = true;
    for (const [id, p] of this.#pending) {
      clearTimeout(p.timer);
      this.#pending.delete(id);
      p.reject(new Error('forwarder closed'));
    }
    for (const s of this.#tcp) s.destroy();
    this.#sockets.udp4?.close();
    this.#sockets.udp6?.close();
    delete this.#sockets.udp4;
    delete this.#sockets.udp6;
  }

  /** Number of UDP exchanges waiting for an answer (bounded by the server's in-flight limit). */
  get pending(): number {
    return this.#pending.size;
  }

  /** Runs attempts by the policy; resolves with the first good answer, else the last bad one, else nothing. */
  #race(attempt: (i: number, cancels: Cancels) => Promise<Buffer>): Promise<{ answer?: Buffer; good: boolean }> {
    const count = this.upstreams.length;
    // Exchanges still waiting when the race is decided (parallel) are ended at once, not left to time out.
    const cancels: Cancels = [];
    return new Promise<{ answer?: Buffer; good: boolean }>((resolve) => {
      let launched = 0;
      let settled = 0;
      let done = false;
      let lastBad: Buffer | undefined;
      const failed = (): void => {
        settled++;
        if (settled === count) {
          done = true;
          resolve(lastBad ? { answer: lastBad, good: false } : { good: false });
        } else if (!this.#o.parallel && settled === launched) {
          launch();
        }
      };
      const launch = (): void => {
        const i = launched++;
        attempt(i, cancels).then((answer) => {
          if (done) return;
          if (isGood(answer)) {
            done = true;
            resolve({ answer, good: true });
            return;
          }
          lastBad = answer;
          failed();
        }, (err: Error) => {
          if (done) return;
          log.debug(`upstream ${this.upstreams[i]!.host}: ${err.message}`);
          failed();
        });
      };
      if (this.#o.parallel) for (let i = 0; i < count; i++) launch();
      else launch();
    }).finally(() => {
      for (const cancel of cancels) cancel();
    });
  }

  async #udpThenTcp(i: number, msg: Buffer, query: Query, cancels: Cancels): Promise<Buffer> {
    const upstream = this.upstreams[i]!;
    const answer = await this.#udpExchange(i, msg, query.questionEnd, cancels);
    if (!isTruncated(answer)) return answer;
    try {
      const full = await this.#tcpExchange(upstream, msg, query.questionEnd, cancels);
      if (full.length <= query.udpLimit) return full;
      log.debug(`upstream ${upstream.host}: the TCP answer (${full.length} bytes) exceeds the client's ${query.udpLimit}; passing the truncated one`);
    } catch (err) {
      log.debug(`upstream ${upstream.host}: TCP retry of a truncated answer failed: ${(err as Error).message}`);
    }
    return answer;
  }

  #socket(family: 4 | 6): UdpSocket {
    const name = family === 4 ? 'udp4' : 'udp6';
    let socket = this.#sockets[name];
    if (!socket) {
      socket = createSocket(name);
      socket.on('message', (msg, rinfo) => this.#onAnswer(msg, rinfo));
      // Send errors reach the send callback; anything else is logged, never thrown.
      socket.on('error', (err) => log.warn(`upstream ${name} socket: ${err.message}`));
      this.#sockets[name] = socket;
    }
    return socket;
  }

  #freeId(): number {
    for (;;) {
      if (this.#idAt === this.#ids.length) {
        randomFillSync(this.#ids);
        this.#idAt = 0;
      }
      const id = this.#ids[this.#idAt++]!;
      if (!this.#pending.has(id)) return id;
    }
  }

  #udpExchange(i: number, msg: Buffer, questionEnd: number, cancels: Cancels): Promise<Buffer> {
    const upstream = this.upstreams[i]!;
    const family = isIP(upstream.host.replace(/%.*$/, '')) === 6 ? 6 : 4;
    if (this.#pending.size >= 0xf000) return Promise.reject(new Error('too many queries in flight'));
    const id = this.#freeId();
    const sent = withId(msg, id);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new UpstreamTimeout(upstream, 'udp', this.#o.timeoutMs));
      }, this.#o.timeoutMs);
      const entry: Pending = { from: this.#keys[i]!, sent, questionEnd, resolve, reject, timer };
      this.#pending.set(id, entry);
      cancels.push(() => {
        if (this.#pending.get(id) !== entry) return;
        clearTimeout(timer);
        this.#pending.delete(id);
        reject(new Error('cancelled: the query was answered'));
      });
      this.#socket(family).send(sent, upstream.port, upstream.host, (err) => {
        if (!err || this.#pending.get(id)?.sent !== sent) return;
        clearTimeout(timer);
        this.#pending.delete(id);
        reject(err);
      });
    });
  }

  #onAnswer(msg: Buffer, rinfo: RemoteInfo): void {
    if (msg.length < 12) return;
    const id = messageId(msg);
    const p = this.#pending.get(id);
    if (!p || p.from !== `${canonicalIp(rinfo.address)}|${rinfo.port}` || !answersQuery(msg, p.sent, p.questionEnd)) return;
    clearTimeout(p.timer);
    this.#pending.delete(id);
    p.resolve(msg);
  }

  /** One query over a TCP connection of its own (RFC 1035 4.2.2 framing), the query's id kept. */
  #tcpExchange(upstream: Upstream, msg: Buffer, questionEnd: number, cancels: Cancels): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: upstream.host, port: upstream.port });
      this.#tcp.add(socket);
      let settled = false;
      const finish = (err: Error | undefined, answer?: Buffer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#tcp.delete(socket);
        socket.destroy();
        if (err) reject(err);
        else resolve(answer!);
      };
      const timer = setTimeout(() => finish(new UpstreamTimeout(upstream, 'tcp', this.#o.timeoutMs)), this.#o.timeoutMs);
      cancels.push(() => finish(new Error('cancelled: the query was answered')));
      socket.setNoDelay(true);
      const frame = Buffer.allocUnsafe(msg.length + 2);
      frame.writeUInt16BE(msg.length, 0);
      msg.copy(frame, 2);
      socket.write(frame);
      let buffered: Buffer = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2) {
          const length = buffered.readUInt16BE(0);
          if (buffered.length < length + 2) return;
          const answer = buffered.subarray(2, length + 2);
          buffered = buffered.subarray(length + 2);
          if (answersQuery(answer, msg, questionEnd)) {
            finish(undefined, Buffer.from(answer));
            return;
          }
        }
      });
      socket.on('error', (err) => finish(err));
      socket.on('close', () => finish(new Error(`tcp ${upstream.host}:${upstream.port}: closed before an answer`)));
    });
  }
}
