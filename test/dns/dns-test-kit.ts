// Shared by the DNS tests: queries encoded with dns2, a scriptable fake name server (UDP and TCP on
// one loopback port), and clients that send one query and wait for its answer.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { Packet, type Resource } from 'dns2';
import type { DnsMetrics } from '../../src/dns/metrics.js';

export const TYPE = { A: 1, CNAME: 5, MX: 15, TXT: 16, AAAA: 28, OPT: 41, ANY: 255 } as const;

let nextId = 0x1000;

/** A query for `name`, with an OPT record (payload size, optional raw options) when `edns` is given. */
export function query(name: string, type: number, o: { id?: number; edns?: number; ednsOptions?: Buffer; rd?: boolean } = {}): Buffer {
  const id = o.id ?? (nextId = (nextId + 7) & 0xffff);
  const p = new Packet({ id, qr: 0, opcode: 0, rd: o.rd === false ? 0 : 1 } as never);
  p.questions.push({ name, type, class: 1 } as never);
  let buf = p.toBuffer();
  if (o.edns !== undefined) {
    // OPT written by hand so arbitrary options (a cookie, code 10) can ride along.
    const options = o.ednsOptions ?? Buffer.alloc(0);
    const opt = Buffer.alloc(11);
    opt.writeUInt8(0, 0); // root name
    opt.writeUInt16BE(TYPE.OPT, 1);
    opt.writeUInt16BE(o.edns, 3);
    opt.writeUInt32BE(0, 5);
    opt.writeUInt16BE(options.length, 9);
    buf = Buffer.concat([buf, opt, options]);
    buf.writeUInt16BE(1, 10);
  }
  return buf;
}

export interface Parsed {
  id: number;
  rcode: number;
  aa: number;
  tc: number;
  rd: number;
  ra: number;
  questions: { name: string; type: number }[];
  answers: Resource[];
  additionals: Resource[];
}

export function parse(buf: Buffer): Parsed {
  const p = Packet.parse(buf);
  const h = p.header;
  return {
    id: h.id, rcode: h.rcode, aa: h.aa, tc: h.tc, rd: h.rd, ra: h.ra,
    questions: p.questions.map((q) => ({ name: q.name, type: q.type })),
    answers: p.answers, additionals: p.additionals,
  };
}

/** An answer to `q` with A records (or other records given), built with dns2. */
export function answerTo(q: Buffer, o: { addresses?: string[]; rcode?: number; tc?: boolean; ttl?: number; extra?: number } = {}): Buffer {
  const req = Packet.parse(q);
  const res = Packet.createResponseFromRequest(req);
  res.header.rcode = o.rcode ?? 0;
  res.header.tc = o.tc ? 1 : 0;
  res.header.ra = 1;
  const question = req.questions[0]!;
  for (const address of o.addresses ?? []) {
    res.answers.push({ name: question.name, type: TYPE.A, class: 1, ttl: o.ttl ?? 60, address } as Resource);
  }
  for (let i = 0; i < (o.extra ?? 0); i++) {
    res.answers.push({ name: question.name, type: TYPE.A, class: 1, ttl: 60, address: `10.9.${i >> 8}.${i & 0xff}` } as Resource);
  }
  return res.toBuffer();
}

/** What a fake server does with a query: the answer to send (undefined: none); `send` sends more datagrams first. */
export type Behaviour = (q: Buffer, transport: 'udp' | 'tcp', send: (extra: Buffer) => void) => Buffer | undefined | Promise<Buffer | undefined>;

export interface FakeUpstream {
  readonly host: string;
  readonly port: number;
  /** Every query received, in order. */
  readonly received: { transport: 'udp' | 'tcp'; msg: Buffer; at: number }[];
  behaviour: Behaviour;
  close(): Promise<void>;
}

/** A name server on `host` (UDP and TCP, one port) doing whatever `behaviour` says; undefined: silence. */
export async function fakeUpstream(behaviour: Behaviour, host = '127.0.0.1'): Promise<FakeUpstream> {
  const udp: UdpSocket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
  await new Promise<void>((resolve) => udp.bind(0, host, resolve));
  const port = udp.address().port;
  const sockets = new Set<Socket>();
  const tcp: Server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    let buf = Buffer.alloc(0);
    s.on('data', async (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const msg = buf.subarray(2, 2 + buf.readUInt16BE(0));
        buf = buf.subarray(2 + msg.length);
        fake.received.push({ transport: 'tcp', msg: Buffer.from(msg), at: Date.now() });
        const answer = await fake.behaviour(Buffer.from(msg), 'tcp', () => {});
        if (answer && !s.destroyed) {
          const len = Buffer.alloc(2);
          len.writeUInt16BE(answer.length);
          s.write(Buffer.concat([len, answer]));
        }
      }
    });
  });
  await new Promise<void>((resolve) => tcp.listen(port, host, resolve));
  udp.on('message', async (msg, rinfo) => {
    fake.received.push({ transport: 'udp', msg, at: Date.now() });
    const answer = await fake.behaviour(msg, 'udp', (extra) => udp.send(extra, rinfo.port, rinfo.address));
    if (answer) udp.send(answer, rinfo.port, rinfo.address);
  });
  const fake: FakeUpstream = {
    host, port, received: [], behaviour,
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => tcp.close(() => r()))]);
    },
  };
  return fake;
}

/** Sends one UDP datagram and resolves with the first answer, or undefined after `timeoutMs`. */
export function udpAsk(host: string, port: number, msg: Buffer, timeoutMs = 2000): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const s = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    const timer = setTimeout(() => { s.close(); resolve(undefined); }, timeoutMs);
    s.on('message', (answer) => { clearTimeout(timer); s.close(); resolve(answer); });
    s.on('error', () => { clearTimeout(timer); s.close(); resolve(undefined); });
    s.send(msg, port, host);
  });
}

/** Sends `messages` (already framed or not) over one TCP connection and collects `expect` answers. */
export function tcpAsk(host: string, port: number, messages: Buffer[], o: { expect?: number; timeoutMs?: number; halfClose?: boolean; raw?: boolean } = {}): Promise<Buffer[]> {
  const expect = o.expect ?? messages.length;
  return new Promise((resolve) => {
    const answers: Buffer[] = [];
    const s = connect(port, host);
    let buf = Buffer.alloc(0);
    const done = (): void => { clearTimeout(timer); s.destroy(); resolve(answers); };
    const timer = setTimeout(done, o.timeoutMs ?? 2000);
    s.on('connect', () => {
      const frames = messages.map((m) => {
        if (o.raw) return m;
        const len = Buffer.alloc(2);
        len.writeUInt16BE(m.length);
        return Buffer.concat([len, m]);
      });
      if (o.halfClose) s.end(Buffer.concat(frames));
      else s.write(Buffer.concat(frames));
      if (expect === 0) setTimeout(done, 100);
    });
    s.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        answers.push(Buffer.from(buf.subarray(2, 2 + buf.readUInt16BE(0))));
        buf = buf.subarray(2 + buf.readUInt16BE(0));
      }
      if (answers.length >= expect) done();
    });
    s.on('error', done);
    s.on('close', done);
  });
}

/** A DnsMetrics that counts in plain numbers. */
export function countingMetrics(): DnsMetrics & { requests: number; upstream: number; failures: number; durations: number[] } {
  const m = {
    requests: 0, upstream: 0, failures: 0, durations: [] as number[],
    incRequests: () => { m.requests++; },
    incUpstreamRequests: () => { m.upstream++; },
    incUpstreamFailures: () => { m.failures++; },
    observeUpstreamDuration: (s: number) => { m.durations.push(s); },
  };
  return m;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
