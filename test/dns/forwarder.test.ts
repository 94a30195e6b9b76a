// The forwarding policy against fake name servers on loopback: order, parallel, failures, time-out,
// truncation, and the bytes passed back.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Forwarder, type ForwarderOptions } from '../../src/dns/forwarder.js';
import { readQuery } from '../../src/dns/wire.js';
import { answerTo, countingMetrics, fakeUpstream, parse, query, sleep, TYPE, type Behaviour, type FakeUpstream } from './dns-test-kit.js';

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
  for (let i = 1; i < behaviours.length; i++) {
    out.push(await fakeUpstreamOn(`127.0.0.${i + 1}`, first.port, behaviours[i]!));
  }
  fakes.push(...out);
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
    received.push({ transport: 'udp', msg, at: Date.now() });
    const a = await fake.behaviour(msg, 'udp', (extra) => udp.send(extra, rinfo.port, rinfo.address));
    if (a) udp.send(a, rinfo.port, rinfo.address);
  });
  const tcp = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('data', async (chunk: Buffer) => {
      const msg = chunk.subarray(2, 2 + chunk.readUInt16BE(0));
      received.push({ transport: 'tcp', msg, at: Date.now() });
      const a = await fake.behaviour(msg, 'tcp', () => {});
      if (a) { const l = Buffer.alloc(2); l.writeUInt16BE(a.length); s.write(Buffer.concat([l, a])); }
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
    assert.equal(f.pending, 0);
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

  it('ignores an answer with another id or another question, and takes the right one after', async () => {
    const [a] = await servers(async (q, _t, send) => {
      const wrongId = answerTo(q, { addresses: ['192.0.2.66'] });
      wrongId.writeUInt16BE((q.readUInt16BE(0) + 1) & 0xffff, 0);
      send(wrongId);
      send(answerTo(query('other.example.org', TYPE.A, { id: q.readUInt16BE(0) }), { addresses: ['192.0.2.67'] }));
      await sleep(50);
      return answerTo(q, { addresses: ['192.0.2.1'] });
    });
    const r = await ask(forwarder([a!], { timeoutMs: 1000 }), query('x.example.org', TYPE.A));
    assert.deepEqual(parse(r.answer).answers.map((x) => x.address), ['192.0.2.1']);
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
