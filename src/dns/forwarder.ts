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
// An answer bigger than a UDP client takes (512 bytes, or its EDNS size) is truncated for it
// (wire.ts truncateAnswer: whole records, TC set), so that it asks again over TCP.
//
// Spoofing (RFC 5452): every UDP exchange (one query to one server) has a socket of its own, made
// for it and closed when it ends (answer, time-out, error, another server's answer won, close()). So
// each query leaves from a port the kernel picks at random (Linux: 32768–60999), and a forged answer
// has to guess that port as well as the random id, not the id alone, as with one socket for all. As
// Istio's agent (miekg/dns dials a socket per exchange). The socket is connected: the kernel hands
// it datagrams from the server's address and port only, and an ICMP unreachable ends it at once.
// A datagram that still is not the answer (another id, another question, not a response) is
// counted (dns_upstream_mismatched_answers_total), dropped, and the exchange goes on waiting for
// the real one until its time-out: ending it would let a forger cut queries short.
// File descriptors: one per exchange in progress, so at most the server's in-flight bound (1024)
// times the servers asked at once (1, or up to 3 in parallel); Node raises the soft RLIMIT_NOFILE to
// the hard one at start. A socket that cannot be made (EMFILE) fails its exchange like a send error.
//
// Bytes: the client's query is sent unchanged except for its id over UDP (random per exchange, the
// client's id being the client's choice, maybe a counter), and the answer gets the client's id
// back — everything else in it (flags, every section, EDNS options) is the server's, byte for byte,
// unless it must be truncated. An answer is accepted only with the id and question sent.
// These sockets belong to this process (uid 1337 in a pod), which the DNS capture rules exempt.
import { createSocket } from 'node:dgram';
import { connect, isIP } from 'node:net';
import { scope } from '../log/logger.js';
import type { DnsMetrics } from './metrics.js';
import { answersQuery, errorResponse, isTruncated, RCODE, rcodeOf, truncateAnswer, withId, type Query } from './wire.js';

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

/** Ends an exchange that is no longer needed. */
type Cancels = (() => void)[];

/** Ends an exchange: with its answer, or with an error. Only the first call counts. */
type Finish = (err: Error | undefined, answer?: Buffer) => void;

class UpstreamTimeout extends Error {
  constructor(upstream: Upstream, transport: Transport, ms: number) {
    super(`${transport} ${upstream.host}:${upstream.port}: no answer within ${ms}ms`);
    this.name = 'UpstreamTimeout';
  }
}

export class Forwarder {
  readonly upstreams: readonly Upstream[];
  readonly #o: ForwarderOptions;
  readonly #udpTypes: readonly ('udp4' | 'udp6')[];
  /** Every exchange in progress, each holding one socket: what close() ends. */
  readonly #open = new Set<Finish>();
  // Random ids drawn in batches: crypto per query would cost more than the rest of the query.
  readonly #ids = new Uint16Array(1024);
  #idAt = this.#ids.length;
  #closed = false;

  constructor(options: ForwarderOptions) {
    this.#o = options;
    this.upstreams = options.upstreams;
    this.#udpTypes = options.upstreams.map((u) => (isIP(u.host.replace(/%.*$/, '')) === 6 ? 'udp6' : 'udp4'));
  }

  /** The answer for the client (its id, and its UDP size), never a rejection: failures become SERVFAIL. */
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
    // The client's id back; nothing else is touched unless it is too big for the client.
    let answer = result.answer;
    answer[0] = query.id >> 8;
    answer[1] = query.id & 0xff;
    if (transport === 'udp' && answer.length > query.udpLimit) {
      log.debug(`upstream answer of ${answer.length} bytes for ${query.name}: truncated to the client's ${query.udpLimit}`);
      answer = truncateAnswer(answer, query.udpLimit, query.hasOpt);
    }
    return { answer, ok: result.good };
  }

  /** Ends every exchange in progress (their queries answer SERVFAIL), closing its socket; no new ones start. */
  close(): void {
    this.#closed = true;
    for (const finish of [...this.#open]) finish(new Error('forwarder closed'));
  }

  /** Exchanges in progress, each holding one socket (UDP, or a TCP connection). */
  get openSockets(): number {
    return this.#open.size;
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

  #randomId(): number {
    if (this.#idAt === this.#ids.length) {
      process.getBuiltinModule('node:crypto').randomFillSync(this.#ids); // node:crypto loaded by the first query
      this.#idAt = 0;
    }
    return this.#ids[this.#idAt++]!;
  }

  /**
   * The frame of every exchange: `open` makes its socket, starts the query, calls `finish` when the
   * answer (or an error) comes, and returns what closes the socket. The time-out, a cancel (another
   * server won) and close() finish it too; whichever comes first closes the socket, exactly once.
   */
  #exchange(upstream: Upstream, transport: Transport, cancels: Cancels, open: (finish: Finish) => () => void): Promise<Buffer> {
    if (this.#closed) return Promise.reject(new Error('forwarder closed'));
    return new Promise((resolve, reject) => {
      let release: (() => void) | undefined;
      let settled = false;
      const finish: Finish = (err, answer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#open.delete(finish);
        release?.();
        if (err) reject(err);
        else resolve(answer!);
      };
      const timer = setTimeout(() => finish(new UpstreamTimeout(upstream, transport, this.#o.timeoutMs)), this.#o.timeoutMs);
      this.#open.add(finish);
      cancels.push(() => finish(new Error('cancelled: the query was answered')));
      try {
        release = open(finish);
      } catch (err) {
        finish(err as Error);
      }
      if (settled) release?.(); // finished inside open(), before `release` was known
    });
  }

  /** Something on an exchange's socket that is not its answer: counted, dropped, the exchange waits on. */
  #mismatched(upstream: Upstream, transport: Transport): void {
    this.#o.metrics?.incUpstreamMismatches();
    log.debug(`upstream ${upstream.host}: ${transport} message that does not answer the query (id or question), ignored`);
  }

  /** One query over a UDP socket of its own, connected to the server, with a random id. */
  #udpExchange(i: number, msg: Buffer, questionEnd: number, cancels: Cancels): Promise<Buffer> {
    const upstream = this.upstreams[i]!;
    const sent = withId(msg, this.#randomId());
    return this.#exchange(upstream, 'udp', cancels, (finish) => {
      const socket = createSocket(this.#udpTypes[i]!);
      // ECONNREFUSED (an ICMP unreachable, the socket being connected), EMFILE, and the like.
      socket.on('error', (err) => finish(err));
      socket.on('message', (answer) => {
        if (answersQuery(answer, sent, questionEnd)) finish(undefined, answer);
        else this.#mismatched(upstream, 'udp');
      });
      // Binds to port 0 first: the kernel's random ephemeral port.
      socket.connect(upstream.port, upstream.host, (err?: Error) => {
        if (err) finish(err);
        else socket.send(sent, (sendErr) => { if (sendErr) finish(sendErr); });
      });
      return () => socket.close();
    });
  }

  /** One query over a TCP connection of its own (RFC 1035 4.2.2 framing), the query's id kept. */
  #tcpExchange(upstream: Upstream, msg: Buffer, questionEnd: number, cancels: Cancels): Promise<Buffer> {
    return this.#exchange(upstream, 'tcp', cancels, (finish) => {
      const socket = connect({ host: upstream.host, port: upstream.port });
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
          this.#mismatched(upstream, 'tcp');
        }
      });
      socket.on('error', (err) => finish(err));
      socket.on('close', () => finish(new Error(`tcp ${upstream.host}:${upstream.port}: closed before an answer`)));
      return () => socket.destroy();
    });
  }
}
