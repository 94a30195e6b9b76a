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
  authorities: Resource[];
  additionals: Resource[];
}

export function parse(buf: Buffer): Parsed {
  const p = Packet.parse(buf);
  const h = p.header;
  return {
    id: h.id, rcode: h.rcode, aa: h.aa, tc: h.tc, rd: h.rd, ra: h.ra,
    questions: p.questions.map((q) => ({ name: q.name, type: q.type })),
    answers: p.answers, authorities: p.authorities, additionals: p.additionals,
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

/**
 * A hand-made answer to `q` as a real server writes it, owner names compressed to the question's
 * (0xc00c): `answers` TXT records of `txt` bytes each (`record-<n>-` then x's; n counts across the
 * sections), then `authority` and `additional` ones, then the OPT record when `opt` gives its
 * payload size (and options). 40 records of 107 bytes to `big.example.org` make 4,833 bytes.
 */
export function txtAnswer(q: Buffer, o: { answers: number; txt?: number; authority?: number; additional?: number; opt?: { size: number; options?: Buffer }; tc?: boolean }): Buffer {
  const questionEnd = q.indexOf(0, 12) + 5;
  const head = Buffer.from(q.subarray(0, 12));
  head[2] = 0x80 | (q[2]! & 0x01) | (o.tc ? 0x02 : 0);
  head[3] = 0x80;
  const counts = [o.answers, o.authority ?? 0, o.additional ?? 0];
  head.writeUInt16BE(1, 4);
  counts.forEach((n, i) => head.writeUInt16BE(n, 6 + 2 * i));
  const records: Buffer[] = [];
  const txt = o.txt ?? 107;
  for (let n = 0; n < counts[0]! + counts[1]! + counts[2]!; n++) {
    const text = Buffer.alloc(txt, 'x');
    text.write(`record-${n}-`);
    const fixed = Buffer.from([0xc0, 12, 0, TYPE.TXT, 0, 1, 0, 0, 0, 60, 0, 0, txt]);
    fixed.writeUInt16BE(txt + 1, 10);
    records.push(fixed, text);
  }
  if (o.opt) {
    const options = o.opt.options ?? Buffer.alloc(0);
    const opt = Buffer.from([0, 0, TYPE.OPT, 0, 0, 0, 0, 0, 0, 0, 0]);
    opt.writeUInt16BE(o.opt.size, 3);
    opt.writeUInt16BE(options.length, 9);
    records.push(opt, options);
    head.writeUInt16BE(counts[2]! + 1, 10);
  }
  return Buffer.concat([head, q.subarray(12, questionEnd), ...records]);
}

/** The TXT strings of parsed records (dns2 reads them as `data`). */
export function texts(records: Resource[]): string[] {
  return records.filter((r) => r.type === TYPE.TXT).map((r) => String((r as unknown as { data: string | string[] }).data));
}

/** What a fake server does with a query: the answer to send (undefined: none); `send` sends more messages first. */
export type Behaviour = (q: Buffer, transport: 'udp' | 'tcp', send: (extra: Buffer) => void) => Buffer | undefined | Promise<Buffer | undefined>;

export interface FakeUpstream {
  readonly host: string;
  readonly port: number;
  /** Every query received, in order, with the port it came from. */
  readonly received: { transport: 'udp' | 'tcp'; msg: Buffer; at: number; port: number }[];
  behaviour: Behaviour;
  close(): Promise<void>;
}

/** A message with its TCP length prefix (RFC 1035 4.2.2). */
export function frame(msg: Buffer): Buffer {
  const len = Buffer.alloc(2);
  len.writeUInt16BE(msg.length);
  return Buffer.concat([len, msg]);
}

/** A name server on `host` (UDP and TCP, one port) doing whatever `behaviour` says; undefined: silence. */
export async function fakeUpstream(behaviour: Behaviour, host = '127.0.0.1'): Promise<FakeUpstream> {
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
        fake.received.push({ transport: 'tcp', msg: Buffer.from(msg), at: Date.now(), port: s.remotePort! });
        const answer = await fake.behaviour(Buffer.from(msg), 'tcp', (extra) => s.write(frame(extra)));
        if (answer && !s.destroyed) s.write(frame(answer));
      }
    });
  });
  const { udp, port } = await sharePort(host, tcp);
  udp.on('message', async (msg, rinfo) => {
    fake.received.push({ transport: 'udp', msg, at: Date.now(), port: rinfo.port });
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

/**
 * A UDP socket on a port the kernel picks, with `tcp` listening on the same number. That number can
 * be taken for TCP already (by any process's outgoing connection: the test machine is shared), so
 * another is tried then.
 */
async function sharePort(host: string, tcp: Server): Promise<{ udp: UdpSocket; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const udp = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    await new Promise<void>((resolve) => udp.bind(0, host, resolve));
    const port = udp.address().port;
    try {
      await new Promise<void>((resolve, reject) => {
        tcp.once('error', reject);
        tcp.listen(port, host, () => { tcp.off('error', reject); resolve(); });
      });
      return { udp, port };
    } catch (err) {
      udp.close();
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 20) throw err;
    }
  }
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
export function countingMetrics(): DnsMetrics & { requests: number; upstream: number; failures: number; mismatches: number; durations: number[] } {
  const m = {
    requests: 0, upstream: 0, failures: 0, mismatches: 0, durations: [] as number[],
    incRequests: () => { m.requests++; },
    incUpstreamRequests: () => { m.upstream++; },
    incUpstreamFailures: () => { m.failures++; },
    observeUpstreamDuration: (s: number) => { m.durations.push(s); },
    incUpstreamMismatches: () => { m.mismatches++; },
  };
  return m;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
