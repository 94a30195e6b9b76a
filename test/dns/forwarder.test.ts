// The forwarding policy against fake name servers on loopback: order, parallel, failures, time-out,
// truncation, the bytes passed back, and what keeps forged answers out (a socket per exchange).
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { readdirSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { Forwarder, type ForwarderOptions } from '../../src/dns/forwarder.js';
import { readQuery } from '../../src/dns/wire.js';
import {
  answerTo, countingMetrics, fakeUpstream, frame, parse, query, sleep, texts, TYPE, txtAnswer, type Behaviour, type FakeUpstream,
} from './dns-test-kit.js';

const fakes: FakeUpstream[] = [];
const forwarders: Forwarder[] = [];
after(async () => {
  for (const f of forwarders) f.close();
  await Promise.all(fakes.map((f) => f.close()));
});

/** Fake servers on 127.0.0.1, 127.0.0.2, ... sharing one port (the forwarder asks every server on one port). */
async function servers(...behaviours: Behaviour[]): Promise<FakeUpstream[]> {
  const first = await fakeUpstream(behaviours[0]!, '127.0.0.1');
  const out = [first];
  fakes.push(first); // each one as it comes, so that after() closes it even when the next fails
  for (let i = 1; i < behaviours.length; i++) {
    out.push(await fakeUpstreamOn(`127.0.0.${i + 1}`, first.port, behaviours[i]!));
    fakes.push(out.at(-1)!);
  }
  return out;
}

/** fakeUpstream binds port 0; for the others, retry until the shared port is free on that address. */
async function fakeUpstreamOn(host: string, port: number, b: Behaviour): Promise<FakeUpstream> {
  const { createSocket } = await import('node:dgram');
  const { createServer } = await import('node:net');
  const received: FakeUpstream['received'] = [];
  const udp = createSocket('udp4');
  await new Promise<void>((resolve, reject) => { udp.once('error', reject); udp.bind(port, host, resolve); });
  const sockets = new Set<import('node:net').Socket>();
  const fake: FakeUpstream = {
    host, port, received, behaviour: b,
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => tcp.close(() => r()))]);
    },
  };
  udp.on('message', async (msg, rinfo) => {
    received.push({ transport: 'udp', msg, at: Date.now(), port: rinfo.port });
    const a = await fake.behaviour(msg, 'udp', (extra) => udp.send(extra, rinfo.port, rinfo.address));
    if (a) udp.send(a, rinfo.port, rinfo.address);
  });
  const tcp = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('data', async (chunk: Buffer) => {
      const msg = chunk.subarray(2, 2 + chunk.readUInt16BE(0));
      received.push({ transport: 'tcp', msg, at: Date.now(), port: s.remotePort! });
      const a = await fake.behaviour(msg, 'tcp', (extra) => s.write(frame(extra)));
      if (a) s.write(frame(a));
    });
  });
  await new Promise<void>((resolve) => tcp.listen(port, host, resolve));
  return fake;
}

function forwarder(ups: FakeUpstream[], o: Partial<ForwarderOptions> = {}): Forwarder {
  const f = new Forwarder({ upstreams: ups.map((u) => ({ host: u.host, port: u.port })), parallel: false, timeoutMs: 300, ...o });
  forwarders.push(f);
  return f;
}

async function ask(f: Forwarder, msg: Buffer, transport: 'udp' | 'tcp' = 'udp') {
  const r = readQuery(msg);
  assert.ok(r.ok);
  return f.forward(msg, r.query, transport);
}

const ok = (address: string): Behaviour => (q) => answerTo(q, { addresses: [address] });
const rcode = (code: number): Behaviour => (q) => answerTo(q, { rcode: code });
const silent: Behaviour = () => undefined;
const slow = (ms: number, b: Behaviour): Behaviour => async (q, t, send) => { await sleep(ms); return b(q, t, send); };

describe('forwarding policy', () => {
  it('in order: asks only the first server when it answers', async () => {
    const [a, b] = await servers(ok('192.0.2.1'), ok('192.0.2.2'));
    const r = await ask(forwarder([a!, b!]), query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).answers[0]!.address, '192.0.2.1');
    assert.equal(a!.received.length, 1);
    assert.equal(b!.received.length, 0);
  });

  it('in order: a silent first server is given its time-out, then the second is asked', async () => {
    const [a, b] = await servers(silent, ok('192.0.2.2'));
    const r = await ask(forwarder([a!, b!], { timeoutMs: 200 }), query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).answers[0]!.address, '192.0.2.2');
    assert.equal(a!.received.length, 1);
    assert.equal(b!.received.length, 1);
    assert.ok(b!.received[0]!.at >= a!.received[0]!.at, 'the second after the first');
  });

  for (const [name, code] of [['SERVFAIL', 2], ['REFUSED', 5], ['NOTIMP', 4]] as const) {
    it(`in order: ${name} from the first server moves on to the second at once`, async () => {
      const [a, b] = await servers(rcode(code), ok('192.0.2.2'));
      const r = await ask(forwarder([a!, b!], { timeoutMs: 5000 }), query('x.example.org', TYPE.A));
      assert.equal(r.ok, true);
      assert.equal(parse(r.answer).answers[0]!.address, '192.0.2.2');
    });
  }

  it('NXDOMAIN is a good answer: passed on, the second server not asked', async () => {
    const [a, b] = await servers(rcode(3), ok('192.0.2.2'));
    const r = await ask(forwarder([a!, b!]), query('nope.example.org', TYPE.A));
    assert.equal(parse(r.answer).rcode, 3);
    assert.equal(b!.received.length, 0);
  });

  it('every server failing with an answer: the last answer is passed on, counted as a failure', async () => {
    const [a, b] = await servers(rcode(5), rcode(2));
    const m = countingMetrics();
    const r = await ask(forwarder([a!, b!], { metrics: m }), query('x.example.org', TYPE.A));
    assert.equal(r.ok, false);
    assert.equal(parse(r.answer).rcode, 2);
    assert.deepEqual([m.upstream, m.failures, m.durations.length], [1, 1, 1]);
  });

  it('every server silent: SERVFAIL with the question, after each one\'s time-out', async () => {
    const [a, b] = await servers(silent, silent);
    const m = countingMetrics();
    const q = query('x.example.org', TYPE.A);
    const r = await ask(forwarder([a!, b!], { timeoutMs: 150, metrics: m }), q);
    const p = parse(r.answer);
    assert.equal(p.rcode, 2);
    assert.equal(p.id, q.readUInt16BE(0));
    assert.deepEqual(p.questions, [{ name: 'x.example.org', type: TYPE.A }]);
    assert.equal(a!.received.length, 1);
    assert.equal(b!.received.length, 1);
    assert.deepEqual([m.upstream, m.failures], [1, 1]);
  });

  it('no server at all: SERVFAIL', async () => {
    const r = await ask(forwarder([]), query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).rcode, 2);
  });

  it('an unreachable server (nothing listening) counts as failed and the next is asked', async () => {
    const [b] = await servers(ok('192.0.2.2'));
    const f = new Forwarder({ upstreams: [{ host: '127.0.0.9', port: b!.port }, { host: b!.host, port: b!.port }], parallel: false, timeoutMs: 300 });
    forwarders.push(f);
    const r = await ask(f, query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).answers[0]!.address, '192.0.2.2');
  });

  it('parallel: every server is asked at once, the first good answer wins', async () => {
    const [a, b, c] = await servers(slow(400, ok('192.0.2.1')), ok('192.0.2.2'), silent);
    const r = await ask(forwarder([a!, b!, c!], { parallel: true, timeoutMs: 1000 }), query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).answers[0]!.address, '192.0.2.2');
    assert.equal(a!.received.length + b!.received.length + c!.received.length, 3);
  });

  it('parallel: a fast SERVFAIL does not win over a slower good answer', async () => {
    const [a, b] = await servers(rcode(2), slow(100, ok('192.0.2.2')));
    const r = await ask(forwarder([a!, b!], { parallel: true, timeoutMs: 1000 }), query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).rcode, 0);
    assert.equal(parse(r.answer).answers[0]!.address, '192.0.2.2');
  });

  it('parallel: the exchanges still waiting when a good answer wins are ended at once', async () => {
    const [a, b] = await servers(ok('192.0.2.1'), silent);
    const f = forwarder([a!, b!], { parallel: true, timeoutMs: 10_000 });
    await ask(f, query('x.example.org', TYPE.A));
    assert.equal(f.openSockets, 0);
  });

  it('forwards to an IPv6 server (UDP and TCP)', async () => {
    const v6 = await fakeUpstream(ok('192.0.2.6'), '::1');
    fakes.push(v6);
    const f = forwarder([v6]);
    assert.equal(parse((await ask(f, query('x.example.org', TYPE.A))).answer).answers[0]!.address, '192.0.2.6');
    assert.equal(parse((await ask(f, query('x.example.org', TYPE.A), 'tcp')).answer).answers[0]!.address, '192.0.2.6');
    assert.deepEqual(v6.received.map((x) => x.transport), ['udp', 'tcp']);
  });

  it('parallel: all silent → SERVFAIL after one time-out', async () => {
    const [a, b] = await servers(silent, silent);
    const r = await ask(forwarder([a!, b!], { parallel: true, timeoutMs: 150 }), query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).rcode, 2);
  });
});

describe('forwarding transport and bytes', () => {
  it('passes the answer back byte for byte (flags, every section, unknown records) with the client\'s id', async () => {
    let upstreamAnswer: Buffer | undefined;
    const [a] = await servers((q) => {
      // A hand-made answer: odd flags (AA, AD), an answer, an authority and an additional with an
      // unknown type (65280) and a cookie option in OPT — what a re-encoder would lose.
      const head = Buffer.from(q.subarray(0, 12));
      head[2] = 0x85; head[3] = 0xa0;
      head.writeUInt16BE(1, 6); head.writeUInt16BE(1, 8); head.writeUInt16BE(2, 10);
      const question = q.subarray(12, q.indexOf(0, 12) + 5);
      const an = Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 42, 0, 4, 192, 0, 2, 7]);
      const ns = Buffer.from([0xc0, 12, 0xff, 0x00, 0, 1, 0, 0, 0, 1, 0, 3, 1, 2, 3]);
      const unknown = Buffer.from([0, 0xff, 0x01, 0, 1, 0, 0, 0, 1, 0, 2, 9, 9]);
      const opt = Buffer.from([0, 0, 41, 4, 208, 0, 0, 0x80, 0, 0, 12, 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
      upstreamAnswer = Buffer.concat([head, question, an, ns, unknown, opt]);
      return upstreamAnswer;
    });
    const cookie = Buffer.from([0, 10, 0, 8, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]);
    const q = query('bytes.example.org', TYPE.A, { edns: 1232, ednsOptions: cookie });
    const r = await ask(forwarder([a!]), q);
    const seen = a!.received[0]!.msg;
    assert.deepEqual(seen.subarray(2), q.subarray(2), 'the query went upstream unchanged but for its id');
    const expected = Buffer.from(upstreamAnswer!);
    expected.writeUInt16BE(q.readUInt16BE(0), 0);
    assert.deepEqual(r.answer, expected);
  });

  it('retries a truncated UDP answer over TCP and passes the whole answer when it fits', async () => {
    const [a] = await servers((q, t) => (t === 'udp' ? answerTo(q, { tc: true }) : answerTo(q, { addresses: ['192.0.2.1', '192.0.2.2'] })));
    const r = await ask(forwarder([a!]), query('tc.example.org', TYPE.A));
    const p = parse(r.answer);
    assert.equal(p.tc, 0);
    assert.deepEqual(p.answers.map((x) => x.address), ['192.0.2.1', '192.0.2.2']);
    assert.deepEqual(a!.received.map((x) => x.transport), ['udp', 'tcp']);
  });

  it('passes the truncated answer on when the TCP answer does not fit the client\'s UDP size', async () => {
    const [a] = await servers((q, t) => (t === 'udp' ? answerTo(q, { tc: true }) : answerTo(q, { extra: 100 })));
    const r = await ask(forwarder([a!]), query('big.example.org', TYPE.A));
    assert.equal(parse(r.answer).tc, 1, 'the client retries over TCP itself');
    const r2 = await ask(forwarder([a!]), query('big.example.org', TYPE.A, { edns: 4096 }));
    assert.equal(parse(r2.answer).answers.length, 100, 'fits 4096');
  });

  // 40 TXT records of 120 bytes after 33 bytes of header and question: 4,833 bytes (4,844 with OPT).
  const big: Behaviour = (q) => txtAnswer(q, { answers: 40, ...(q.readUInt16BE(10) > 0 ? { opt: { size: 4096 } } : {}) });
  const truncation: { name: string; o: Parameters<typeof query>[2]; transport: 'udp' | 'tcp'; records: number; tc: 0 | 1 }[] = [
    { name: 'UDP without EDNS: 512 bytes', o: {}, transport: 'udp', records: 3, tc: 1 },
    { name: 'UDP with an EDNS size below 512: 512 bytes', o: { edns: 100 }, transport: 'udp', records: 3, tc: 1 },
    { name: 'UDP with EDNS 1232: 1232 bytes, OPT kept', o: { edns: 1232 }, transport: 'udp', records: 9, tc: 1 },
    { name: 'UDP with EDNS 4096: 4096 bytes', o: { edns: 4096 }, transport: 'udp', records: 33, tc: 1 },
    { name: 'UDP with EDNS 8192: the whole answer', o: { edns: 8192 }, transport: 'udp', records: 40, tc: 0 },
    { name: 'TCP: the whole answer', o: {}, transport: 'tcp', records: 40, tc: 0 },
  ];
  for (const c of truncation) {
    it(`an answer bigger than the client takes is truncated to its size, whole records and TC set: ${c.name}`, async () => {
      const [a] = await servers(big);
      const q = query('big.example.org', TYPE.TXT, c.o);
      const r = await ask(forwarder([a!]), q, c.transport);
      const limit = c.transport === 'tcp' ? 65535 : Math.max(512, c.o?.edns ?? 512);
      assert.ok(r.answer.length <= limit, `${r.answer.length} bytes`);
      const p = parse(r.answer);
      assert.deepEqual([p.tc, p.answers.length, p.id], [c.tc, c.records, q.readUInt16BE(0)]);
      assert.deepEqual(texts(p.answers), texts(parse(big(q, 'udp', () => {}) as Buffer).answers).slice(0, c.records));
      assert.equal(p.additionals.some((x) => x.type === TYPE.OPT), c.o?.edns !== undefined, 'an OPT when the client sent one');
      assert.equal(r.ok, true);
      assert.deepEqual(a!.received.map((x) => x.transport), [c.transport], 'no TCP retry of an answer the server did not truncate');
    });
  }

  it('passes the truncated answer on when the TCP retry fails', async () => {
    const [a] = await servers((q, t) => (t === 'udp' ? answerTo(q, { tc: true }) : undefined));
    const r = await ask(forwarder([a!], { timeoutMs: 150 }), query('tc.example.org', TYPE.A));
    assert.equal(parse(r.answer).tc, 1);
    assert.equal(r.ok, true);
  });

  it('forwards a TCP query over TCP', async () => {
    const [a] = await servers(ok('192.0.2.1'));
    const q = query('x.example.org', TYPE.A);
    const r = await ask(forwarder([a!]), q, 'tcp');
    assert.equal(parse(r.answer).answers[0]!.address, '192.0.2.1');
    assert.deepEqual(a!.received.map((x) => x.transport), ['tcp']);
    assert.deepEqual(a!.received[0]!.msg, q, 'over TCP the query goes unchanged, id included');
  });

  it('closing answers every exchange in flight with SERVFAIL', async () => {
    const [a] = await servers(silent);
    const f = new Forwarder({ upstreams: [{ host: a!.host, port: a!.port }], parallel: false, timeoutMs: 10_000 });
    const pending = ask(f, query('x.example.org', TYPE.A));
    await sleep(50);
    f.close();
    assert.equal(parse((await pending).answer).rcode, 2);
  });
});

describe('a socket per exchange: forged answers', () => {
  const openFds = (): number => readdirSync('/proc/self/fd').length;
  /** The forwarder's sockets are closed by now: its count is 0 and the process holds no more fds than before. */
  async function allClosed(f: Forwarder, baseline: number): Promise<void> {
    assert.equal(f.openSockets, 0);
    // A fake's side of a TCP connection closes once the FIN arrives.
    for (let i = 0; i < 50 && openFds() > baseline; i++) await sleep(20);
    assert.ok(openFds() <= baseline, `${openFds()} fds open, ${baseline} before`);
  }

  it('every query leaves from a port of its own, picked at random by the kernel', async () => {
    const [a] = await servers(ok('192.0.2.1'));
    const f = forwarder([a!]);
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(Array.from({ length: 20 }, (_, i) => ask(f, query(`p${batch}-${i}.example.org`, TYPE.A))));
    }
    const ports = a!.received.map((x) => x.port);
    assert.equal(ports.length, 200);
    // 200 draws from Linux's 28,232 ephemeral ports: about one repeat is expected, ten never.
    assert.ok(new Set(ports).size >= 190, `${new Set(ports).size} distinct ports of 200`);
    const steps = ports.slice(1).filter((p, i) => Math.abs(p - ports[i]!) === 1).length;
    assert.ok(steps < 20, `${steps} ports follow the one before: not random`);
    assert.equal(f.openSockets, 0);
  });

  const forgeries: { name: string; forge: (q: Buffer) => Buffer }[] = [
    { name: 'another id', forge: (q) => { const a = answerTo(q, { addresses: ['192.0.2.66'] }); a.writeUInt16BE((q.readUInt16BE(0) + 1) & 0xffff, 0); return a; } },
    { name: 'the id, another name', forge: (q) => answerTo(query('other.example.org', TYPE.A, { id: q.readUInt16BE(0) }), { addresses: ['192.0.2.66'] }) },
    { name: 'the id, another type', forge: (q) => answerTo(query('x.example.org', TYPE.AAAA, { id: q.readUInt16BE(0) })) },
    { name: 'the id, another class', forge: (q) => { const a = answerTo(q, { addresses: ['192.0.2.66'] }); a.writeUInt16BE(3, q.length - 2); return a; } },
    { name: 'a query, not an answer', forge: (q) => Buffer.from(q) },
    { name: 'shorter than a header', forge: () => Buffer.alloc(5) },
  ];
  for (const c of forgeries) {
    it(`an answer with ${c.name} is counted and ignored; the real one after it is taken`, async () => {
      const [a] = await servers(async (q, _t, send) => {
        send(c.forge(q));
        await sleep(30);
        return answerTo(q, { addresses: ['192.0.2.1'] });
      });
      const m = countingMetrics();
      const f = forwarder([a!], { timeoutMs: 1000, metrics: m });
      const r = await ask(f, query('x.example.org', TYPE.A));
      assert.deepEqual(parse(r.answer).answers.map((x) => x.address), ['192.0.2.1']);
      assert.deepEqual([m.mismatches, m.failures], [1, 0]);
      assert.equal(f.openSockets, 0);
    });
  }

  it('forgeries do not end the query: it waits for the real answer until its time-out, then SERVFAIL', async () => {
    const [a] = await servers((q, _t, send) => {
      for (const c of forgeries) send(c.forge(q));
      return undefined;
    });
    const m = countingMetrics();
    const f = forwarder([a!], { timeoutMs: 250, metrics: m });
    const started = Date.now();
    const r = await ask(f, query('x.example.org', TYPE.A));
    assert.equal(parse(r.answer).rcode, 2);
    assert.ok(Date.now() - started >= 240, `ended after ${Date.now() - started}ms`);
    assert.deepEqual([m.mismatches, m.failures], [forgeries.length, 1]);
  });

  it('counts an answer over TCP that does not match, and takes the one that does', async () => {
    const [a] = await servers((q, _t, send) => {
      send(answerTo(query('other.example.org', TYPE.A, { id: q.readUInt16BE(0) })));
      return answerTo(q, { addresses: ['192.0.2.1'] });
    });
    const m = countingMetrics();
    const r = await ask(forwarder([a!], { metrics: m }), query('x.example.org', TYPE.A), 'tcp');
    assert.deepEqual(parse(r.answer).answers.map((x) => x.address), ['192.0.2.1']);
    assert.equal(m.mismatches, 1);
  });

  it('an answer from another port never reaches the query: its socket is connected to the server', async () => {
    const spoofer = createSocket('udp4');
    await new Promise<void>((resolve) => spoofer.bind(0, '127.0.0.1', resolve));
    try {
      const [a] = await servers(async (q) => {
        // The right id and question, sent to the query's own port, but not from the server's port.
        spoofer.send(answerTo(q, { addresses: ['192.0.2.66'] }), a!.received.at(-1)!.port, '127.0.0.1');
        await sleep(50);
        return answerTo(q, { addresses: ['192.0.2.1'] });
      });
      const m = countingMetrics();
      const r = await ask(forwarder([a!], { timeoutMs: 1000, metrics: m }), query('x.example.org', TYPE.A));
      assert.deepEqual(parse(r.answer).answers.map((x) => x.address), ['192.0.2.1']);
      assert.equal(m.mismatches, 0, 'the kernel drops it before the process sees it');
    } finally {
      spoofer.close();
    }
  });

  const endings: { name: string; behaviours: Behaviour[]; o?: Partial<ForwarderOptions>; transport?: 'udp' | 'tcp'; refused?: boolean }[] = [
    { name: 'answered', behaviours: [ok('192.0.2.1')] },
    { name: 'timed out', behaviours: [silent] },
    { name: 'forged answers only, then timed out', behaviours: [(q, _t, send) => { send(forgeries[0]!.forge(q)); return undefined; }] },
    { name: 'refused (nothing listens: ICMP port unreachable), before its time-out', behaviours: [ok('192.0.2.1')], refused: true, o: { timeoutMs: 5000 } },
    { name: 'lost the race (parallel)', behaviours: [ok('192.0.2.1'), silent], o: { parallel: true, timeoutMs: 5000 } },
    { name: 'truncated, then asked over TCP', behaviours: [(q, t) => (t === 'udp' ? answerTo(q, { tc: true }) : answerTo(q, { addresses: ['192.0.2.1'] }))] },
    { name: 'TCP, answered', behaviours: [ok('192.0.2.1')], transport: 'tcp' },
    { name: 'TCP, timed out', behaviours: [silent], transport: 'tcp' },
  ];
  for (const c of endings) {
    it(`every socket is closed when its exchange ends: ${c.name}`, async () => {
      const ups = await servers(...c.behaviours);
      const f = c.refused
        ? new Forwarder({ upstreams: [{ host: '127.0.0.9', port: ups[0]!.port }], parallel: false, timeoutMs: 5000 })
        : forwarder(ups, { timeoutMs: 150, ...c.o });
      forwarders.push(f);
      await ask(f, query('warm-up.example.org', TYPE.A), c.transport);
      const baseline = openFds();
      const started = Date.now();
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => ask(f, query(`e${i}.example.org`, TYPE.A), c.transport)));
      if (c.refused) {
        assert.ok(Date.now() - started < 2000, 'ended by the ICMP error, not the time-out');
        for (const r of results) assert.equal(parse(r.answer).rcode, 2);
      }
      await allClosed(f, baseline);
    });
  }

  it('close() ends every exchange in progress, closes its socket, and starts no other', async () => {
    const [a, b] = await servers(silent, silent);
    const f = new Forwarder({ upstreams: [a!, b!].map((u) => ({ host: u.host, port: u.port })), parallel: false, timeoutMs: 10_000 });
    await sleep(10);
    const baseline = openFds();
    const pending = Promise.all(Array.from({ length: 50 }, (_, i) => ask(f, query(`c${i}.example.org`, TYPE.A), i % 2 ? 'udp' : 'tcp')));
    await sleep(100);
    assert.equal(f.openSockets, 50);
    f.close();
    for (const r of await pending) assert.equal(parse(r.answer).rcode, 2);
    assert.equal(b!.received.length, 0, 'the next server is not asked after close()');
    await allClosed(f, baseline);
  });

  it('a thousand queries at once: a socket each, a port each, all closed after', async () => {
    const [a] = await servers(silent);
    const f = forwarder([a!], { timeoutMs: 2000 });
    const baseline = openFds();
    const pending = Promise.all(Array.from({ length: 1000 }, (_, i) => ask(f, query(`k${i}.example.org`, TYPE.A))));
    await sleep(200);
    assert.equal(f.openSockets, 1000);
    // The fake's receive buffer holds a few hundred of the thousand; every one it got has a port of its own.
    const ports = a!.received.map((x) => x.port);
    assert.ok(ports.length >= 100, `${ports.length} received`);
    assert.equal(new Set(ports).size, ports.length);
    for (const r of await pending) assert.equal(parse(r.answer).rcode, 2);
    await allClosed(f, baseline);
  });
});
