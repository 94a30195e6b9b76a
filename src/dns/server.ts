// The DNS proxy (DNS_PROXY_ADDR, default localhost:15053) on UDP and TCP: names of the table are
// answered here, everything else is forwarded to the pod's resolv.conf servers.
//
// The listening sockets are node:dgram and node:net rather than dns2's servers: those hand the
// handler a re-parsed Packet, never the bytes received, and the query must go upstream as the client
// sent it (dns2 drops EDNS options it does not know when it re-encodes); they also parse before any
// size check (see wire.ts) and cap neither connections nor pipelined queries. dns2 encodes the local
// answers (local-answer.ts, each encoded once and reused).
//
// Bounds: at most `maxInFlight` forwarded queries wait for upstreams (over the bound, a UDP query is
// dropped — its client retries — and a TCP one gets SERVFAIL); at most `maxTcpConnections`
// connections, each with at most 32 queries in progress (reading pauses beyond that) and closed
// after `tcpIdleMs` without a query. Local answers are computed at once and hold nothing.
// A malformed message gets FORMERR (or NOTIMP for another opcode), or is dropped when it is shorter
// than a header or is a response; nothing a client sends can throw out of the handlers.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, isIP, type Server, type Socket } from 'node:net';
import { localAddresses } from '../net/local-addresses.js';
import type { ServiceEntry } from '../config/resources/types.js';
import { AgentError } from '../errors/agent-error.js';
import { scope } from '../log/logger.js';
import { Forwarder, type Transport, type Upstream } from './forwarder.js';
import { LocalAnswerCache } from './local-answer.js';
import type { DnsMetrics } from './metrics.js';
import { NameTable } from './name-table.js';
import { DNS_CAPTURE_PORT, listenHosts, parseProxyAddress } from './proxy-address.js';
import type { ResolverConfig } from './resolv-conf.js';
import { errorResponse, QCLASS_IN, QTYPE, RCODE, rcodeOf, readQuery } from './wire.js';
import { answeredAddresses } from './answered-addresses.js';

const log = scope('dns');

export interface DnsProxyOptions {
  /** DNS_PROXY_ADDR, e.g. `localhost:15053`; port 0 picks one port shared by every socket. */
  readonly address: string;
  /** The proxy's DNS domain (--domain), for the short names of the table. */
  readonly domain: string;
  /** The pod's resolver configuration (/etc/resolv.conf): upstream servers and search domains. */
  readonly resolver: ResolverConfig;
  /** DNS_FORWARD_PARALLEL. */
  readonly parallel: boolean;
  /** Per-server time-out; default the resolver's `options timeout` (5 s). */
  readonly timeoutMs?: number;
  /** Port of the upstream servers; default 53. */
  readonly upstreamPort?: number;
  readonly metrics?: DnsMetrics;
  /** Forwarded queries waiting for an answer at once; default 1024. */
  readonly maxInFlight?: number;
  /** Open TCP connections at once; default 256. */
  readonly maxTcpConnections?: number;
  /** An idle TCP connection is closed after this long; default 10 s (RFC 7766 6.2.3). */
  readonly tcpIdleMs?: number;
  /** This pod's addresses, for an empty or wildcard host; default from the interfaces. */
  readonly localAddresses?: () => readonly string[];
  /** Told of each forwarded answer with A/AAAA records: the name asked and the addresses given. */
  readonly onAnswered?: (name: string, addresses: readonly string[]) => void;
}

export interface DnsEndpoint {
  readonly transport: Transport;
  readonly host: string;
  readonly port: number;
}

/** Plain counters (the Prometheus series are in metrics.ts). */
export interface DnsProxyStats {
  /** Queries read (local, forwarded, and answered FORMERR/NOTIMP). */
  requests: number;
  local: number;
  forwarded: number;
  /** Answered FORMERR or NOTIMP. */
  malformed: number;
  /** Dropped unanswered: shorter than a header, or a response. */
  dropped: number;
  /** Over the in-flight bound: UDP dropped, TCP answered SERVFAIL. */
  overloaded: number;
}

const TCP_PIPELINE = 32;

type Reply = (answer: Buffer | undefined) => void;

export class DnsProxy {
  readonly stats: DnsProxyStats = { requests: 0, local: 0, forwarded: 0, malformed: 0, dropped: 0, overloaded: 0 };
  readonly #o: DnsProxyOptions;
  readonly #maxInFlight: number;
  readonly #udp: UdpSocket[] = [];
  readonly #tcp: Server[] = [];
  readonly #connections = new Set<Socket>();
  readonly #endpoints: DnsEndpoint[] = [];
  #forwarder: Forwarder;
  #table = NameTable.empty();
  readonly #answers = new LocalAnswerCache();
  #inFlight = 0;
  #closed = false;

  private constructor(o: DnsProxyOptions) {
    this.#o = o;
    this.#maxInFlight = o.maxInFlight ?? 1024;
    this.#forwarder = this.#makeForwarder();
  }

  static async start(o: DnsProxyOptions): Promise<DnsProxy> {
    const proxy = new DnsProxy(o);
    const { host, port } = parseProxyAddress(o.address);
    const hosts = listenHosts(host, (o.localAddresses ?? localAddresses)());
    try {
      await proxy.#bindAll(hosts, port);
    } catch (err) {
      // DNS_PROXY_ADDR ending in :53 is meant for an agent running as root; without the right to
      // bind a low port, listen where the capture rules send DNS instead.
      if ((err as NodeJS.ErrnoException).code !== 'EACCES' || port >= 1024) {
        proxy.#forwarder.close();
        throw listenError(o.address, err);
      }
      log.warn(`DNS_PROXY_ADDR ${o.address}: no permission to bind port ${port} (not root); listening on ${DNS_CAPTURE_PORT} instead`);
      try {
        await proxy.#bindAll(hosts, DNS_CAPTURE_PORT);
      } catch (again) {
        proxy.#forwarder.close();
        throw listenError(o.address, again);
      }
    }
    // Built once the sockets are bound: a resolv.conf naming this very proxy (DNS_PROXY_ADDR
    // 127.0.0.1:53) must not be forwarded to.
    proxy.#forwarder.close();
    proxy.#forwarder = proxy.#makeForwarder();
    const ends = [...new Set(proxy.#endpoints.map((e) => `${isIP(e.host) === 6 ? `[${e.host}]` : e.host}:${e.port}`))];
    const ups = proxy.#forwarder.upstreams.map((u) => u.host);
    log.info(`DNS proxy on ${ends.join(', ')} (UDP and TCP); forwarding to ${ups.join(', ') || 'no server (resolv.conf has none): SERVFAIL'}`
      + `${o.parallel ? ' in parallel' : ' in order'}, ${proxy.#timeoutMs()}ms per server`);
    return proxy;
  }

  /** Where it listens (after port 0 was resolved). */
  get endpoints(): readonly DnsEndpoint[] {
    return this.#endpoints;
  }

  /** The port every socket listens on. */
  get port(): number {
    return this.#endpoints[0]?.port ?? 0;
  }

  get upstreams(): readonly Upstream[] {
    return this.#forwarder.upstreams;
  }

  /** Forwarded queries waiting for upstreams now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** The names answered locally: called with every new set of ServiceEntry resources. */
  setServiceEntries(entries: readonly ServiceEntry[]): void {
    this.#table = NameTable.build(entries, { domain: this.#o.domain, searchDomains: this.#o.resolver.search });
    this.#answers.clear();
    log.info(`DNS name table: ${this.#table.size} names from ${entries.length} ServiceEntry resources`);
    if (log.enabled('debug')) log.debug(`DNS name table: ${this.#table.names().join(', ')}`);
  }

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    this.#forwarder.close();
    return this.#closeSockets();
  }

  #closeSockets(): Promise<void> {
    for (const c of this.#connections) c.destroy();
    const udp = this.#udp.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
    const tcp = this.#tcp.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
    this.#endpoints.length = 0;
    return Promise.all([...udp, ...tcp]).then(() => undefined);
  }

  #timeoutMs(): number {
    return this.#o.timeoutMs ?? this.#o.resolver.timeoutMs;
  }

  #makeForwarder(): Forwarder {
    const port = this.#o.upstreamPort ?? 53;
    const own = new Set(this.#endpoints.map((e) => `${e.host}|${e.port}`));
    const upstreams = this.#o.resolver.nameservers
      .map((host) => ({ host, port }))
      .filter((u) => {
        const self = own.has(`${u.host}|${u.port}`);
        if (self) log.warn(`resolv.conf server ${u.host}:${u.port} is this DNS proxy itself; not forwarding to it`);
        return !self;
      });
    return new Forwarder({ upstreams, parallel: this.#o.parallel, timeoutMs: this.#timeoutMs(), ...(this.#o.metrics ? { metrics: this.#o.metrics } : {}) });
  }

  /**
   * Every host on one port. With port 0 the kernel picks it for UDP, and the same number can be
   * taken for TCP (any outgoing connection on the machine holds one), so another pick is tried.
   */
  async #bindAll(hosts: readonly string[], wanted: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#bindEach(hosts, wanted);
      } catch (err) {
        if (wanted !== 0 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 10) throw err;
      }
    }
  }

  async #bindEach(hosts: readonly string[], wanted: number): Promise<void> {
    let port = wanted;
    for (const host of hosts) {
      try {
        port = await this.#bindUdp(host, port);
        await this.#bindTcp(host, port);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // No IPv6 in this kernel or namespace (::1 missing): the IPv4 sockets do.
        if (isIP(host) === 6 && (code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT')) {
          log.info(`DNS proxy: ${host} unavailable (${code}), skipped`);
          this.#dropEndpoints(host);
          continue;
        }
        await this.#closeSockets();
        throw err;
      }
    }
    if (this.#endpoints.length === 0) throw Object.assign(new Error(`no address to listen on among ${hosts.join(', ') || '(none)'}`), { code: 'EADDRNOTAVAIL' });
  }

  #dropEndpoints(host: string): void {
    for (let i = this.#endpoints.length - 1; i >= 0; i--) {
      if (this.#endpoints[i]!.host !== host) continue;
      this.#endpoints.splice(i, 1);
      const udp = this.#udp.findIndex((s) => s.address().address === host);
      if (udp >= 0) this.#udp.splice(udp, 1)[0]!.close();
    }
  }

  #bindUdp(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const socket = createSocket(isIP(host) === 6 ? 'udp6' : 'udp4');
      socket.once('error', reject);
      socket.bind({ address: host, port, exclusive: true }, () => {
        socket.off('error', reject);
        socket.on('error', (err) => log.warn(`DNS proxy UDP ${host}: ${err.message}`));
        socket.on('message', (msg, rinfo) => this.#handle(msg, 'udp', (answer) => {
          if (answer) socket.send(answer, rinfo.port, rinfo.address, () => { /* a lost UDP answer is retried by the client */ });
        }));
        this.#udp.push(socket);
        const bound = socket.address().port;
        this.#endpoints.push({ transport: 'udp', host, port: bound });
        resolve(bound);
      });
    });
  }

  #bindTcp(host: string, port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      // Half-open: a client may send its query and close its side, and still wait for the answer.
      const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.#onConnection(socket));
      server.maxConnections = this.#o.maxTcpConnections ?? 256;
      server.once('error', reject);
      server.listen({ host, port, exclusive: true }, () => {
        server.off('error', reject);
        server.on('error', (err) => log.warn(`DNS proxy TCP ${host}: ${err.message}`));
        this.#tcp.push(server);
        this.#endpoints.push({ transport: 'tcp', host, port });
        resolve();
      });
    });
  }

  /** One message from a client; `reply` is called exactly once (undefined: no answer). */
  #handle(msg: Buffer, transport: Transport, reply: Reply): void {
    const read = readQuery(msg);
    if (!read.ok) {
      if (read.action === 'drop') {
        this.stats.dropped++;
        reply(undefined);
        return;
      }
      this.stats.requests++;
      this.stats.malformed++;
      this.#o.metrics?.incRequests();
      log.debug(`DNS ${transport}: answering ${read.rcode === RCODE.NOTIMP ? 'NOTIMP' : 'FORMERR'}: ${read.reason}`);
      reply(errorResponse(msg, read.rcode, read.questionEnd));
      return;
    }
    const q = read.query;
    this.stats.requests++;
    this.#o.metrics?.incRequests();
    const local = q.qclass === QCLASS_IN ? this.#table.lookup(q.name, q.qtype) : undefined;
    if (local) {
      this.stats.local++;
      let answer: Buffer;
      try {
        answer = this.#answers.answer(msg, q, local, transport === 'udp');
      } catch (err) {
        log.warn(`DNS: cannot encode the local answer for ${q.name}: ${(err as Error).message}`);
        answer = errorResponse(msg, RCODE.SERVFAIL, q.questionEnd);
      }
      reply(answer);
      return;
    }
    if (this.#inFlight >= this.#maxInFlight) {
      this.stats.overloaded++;
      reply(transport === 'tcp' ? errorResponse(msg, RCODE.SERVFAIL, q.questionEnd) : undefined);
      return;
    }
    this.stats.forwarded++;
    this.#inFlight++;
    this.#forwarder.forward(msg, q, transport).then((result) => {
      this.#inFlight--;
      reply(result.answer);
      const told = this.#o.onAnswered;
      if (told && result.answer && (q.qtype === QTYPE.A || q.qtype === QTYPE.AAAA) && rcodeOf(result.answer) === RCODE.NOERROR) {
        const addresses = answeredAddresses(result.answer);
        if (addresses.length > 0) told(q.name, addresses);
      }
    }, (err: Error) => {
      this.#inFlight--;
      log.warn(`DNS: forwarding failed: ${err.message}`);
      reply(errorResponse(msg, RCODE.SERVFAIL, q.questionEnd));
    });
  }

  /** RFC 7766: length-prefixed queries, pipelined, answered in any order. */
  #onConnection(socket: Socket): void {
    this.#connections.add(socket);
    socket.setTimeout(this.#o.tcpIdleMs ?? 10_000, () => socket.destroy());
    let buffered: Buffer = Buffer.alloc(0);
    let pending = 0;
    let peerEnded = false;
    const drain = (): void => {
      while (pending < TCP_PIPELINE && buffered.length >= 2) {
        const length = buffered.readUInt16BE(0);
        if (buffered.length < length + 2) break;
        const msg = buffered.subarray(2, length + 2);
        buffered = buffered.subarray(length + 2);
        pending++;
        this.#handle(msg, 'tcp', reply);
      }
      if (pending >= TCP_PIPELINE) socket.pause();
      else if (socket.isPaused()) socket.resume();
      if (peerEnded && pending === 0 && !socket.destroyed) socket.end();
    };
    const reply: Reply = (answer) => {
      pending--;
      if (answer && !socket.destroyed && socket.writable) {
        const frame = Buffer.allocUnsafe(answer.length + 2);
        frame.writeUInt16BE(answer.length, 0);
        answer.copy(frame, 2);
        socket.write(frame);
      }
      // Called synchronously from inside drain() for local answers; the loop there continues.
      if (!inDrain) guardedDrain();
    };
    let inDrain = false;
    const guardedDrain = (): void => {
      inDrain = true;
      try {
        drain();
      } finally {
        inDrain = false;
      }
    };
    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      guardedDrain();
    });
    socket.on('end', () => {
      peerEnded = true;
      if (buffered.length > 0) log.debug('DNS tcp: connection ended inside a message');
      guardedDrain();
    });
    socket.on('error', () => { /* reset by the client: nothing to answer */ });
    socket.on('close', () => this.#connections.delete(socket));
  }
}

function listenError(address: string, err: unknown): AgentError {
  return new AgentError('ERR_LISTEN', `DNS proxy: cannot listen on ${address} (DNS_PROXY_ADDR): ${(err as Error).message}`, { cause: err });
}

export function startDnsProxy(options: DnsProxyOptions): Promise<DnsProxy> {
  return DnsProxy.start(options);
}
