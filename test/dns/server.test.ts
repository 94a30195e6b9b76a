// The DNS proxy on loopback: local answers from ServiceEntry resources, forwarding to a fake
// upstream, UDP and TCP, malformed input thrown at it, and the in-flight bound under a flood.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { ServiceEntry } from '../../src/config/resources/types.js';
import { DEFAULT_RESOLVER_CONFIG, type ResolverConfig } from '../../src/dns/resolv-conf.js';
import { startDnsProxy, type DnsProxy } from '../../src/dns/server.js';
import {
  answerTo, countingMetrics, fakeUpstream, parse, query, sleep, tcpAsk, texts, TYPE, txtAnswer, udpAsk, type FakeUpstream,
} from './dns-test-kit.js';

function serviceEntry(hosts: string[], addresses: string[]): ServiceEntry {
  return {
    meta: { kind: 'ServiceEntry', apiVersion: 'networking.mesh.io/v1', name: hosts[0]!, namespace: 'ns1', origin: { file: 'x.yaml', index: 0 } },
    hosts, addresses, ports: [{ number: 80, name: 'http' }], endpoints: [], subjectAltNames: [],
  };
}

const resolver = (upstreams: FakeUpstream[], extra: Partial<ResolverConfig> = {}): ResolverConfig =>
  ({ ...DEFAULT_RESOLVER_CONFIG, nameservers: upstreams.map((u) => u.host), search: ['ns1.svc.cluster.local', 'svc.cluster.local', 'cluster.local'], ...extra });

describe('DNS proxy server', () => {
  let upstream: FakeUpstream;
  let proxy: DnsProxy;
  const metrics = countingMetrics();
  const H = '127.0.0.1';

  before(async () => {
    upstream = await fakeUpstream((q) => answerTo(q, { addresses: ['192.0.2.99'] }));
    proxy = await startDnsProxy({
      address: `${H}:0`, domain: 'ns1.svc.cluster.local', resolver: resolver([upstream]), parallel: false,
      upstreamPort: upstream.port, timeoutMs: 300, metrics,
    });
    proxy.setServiceEntries([
      serviceEntry(['reviews.ns1.svc.cluster.local'], ['10.0.0.1', '2001:db8::1']),
      serviceEntry(['api.example.com'], ['192.0.2.10']),
      serviceEntry(['v6only.example.com'], ['2001:db8::6']),
      serviceEntry(['*.wild.example.com'], ['192.0.2.20']),
      serviceEntry(['big.example.com'], Array.from({ length: 60 }, (_, i) => `10.1.0.${i + 1}`)),
    ]);
  });
  after(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  const ask = async (name: string, type: number, transport: 'udp' | 'tcp' = 'udp', o: Parameters<typeof query>[2] = {}) => {
    const q = query(name, type, o);
    const raw = transport === 'udp' ? await udpAsk(H, proxy.port, q) : (await tcpAsk(H, proxy.port, [q]))[0];
    assert.ok(raw, `no answer for ${name} over ${transport}`);
    const p = parse(raw);
    assert.equal(p.id, q.readUInt16BE(0), 'the answer carries the query id');
    return { ...p, raw };
  };

  for (const transport of ['udp', 'tcp'] as const) {
    describe(`local answers over ${transport}`, () => {
      const cases: { name: string; q: string; type: number; rcode: number; answers: string[] }[] = [
        { name: 'A of a ServiceEntry host', q: 'api.example.com', type: TYPE.A, rcode: 0, answers: ['A 192.0.2.10'] },
        { name: 'the name lower-cased, the question echoed as asked', q: 'API.Example.COM', type: TYPE.A, rcode: 0, answers: ['A 192.0.2.10'] },
        { name: 'AAAA of a dual-stack host', q: 'reviews.ns1.svc.cluster.local', type: TYPE.AAAA, rcode: 0, answers: ['AAAA 2001:db8::1'] },
        { name: 'short name in the proxy namespace', q: 'reviews', type: TYPE.A, rcode: 0, answers: ['A 10.0.0.1'] },
        { name: 'name.namespace', q: 'reviews.ns1', type: TYPE.A, rcode: 0, answers: ['A 10.0.0.1'] },
        { name: 'name.namespace.svc', q: 'reviews.ns1.svc', type: TYPE.A, rcode: 0, answers: ['A 10.0.0.1'] },
        { name: 'known name, no record of the type: NOERROR, empty', q: 'api.example.com', type: TYPE.AAAA, rcode: 0, answers: [] },
        { name: 'known name, A asked of an IPv6-only host: NOERROR, empty', q: 'v6only.example.com', type: TYPE.A, rcode: 0, answers: [] },
        { name: 'known name, MX: NOERROR, empty', q: 'api.example.com', type: TYPE.MX, rcode: 0, answers: [] },
        { name: 'wildcard host', q: 'x.y.wild.example.com', type: TYPE.A, rcode: 0, answers: ['A 192.0.2.20'] },
        { name: 'first search domain: CNAME to the host, then its records', q: 'api.example.com.ns1.svc.cluster.local', type: TYPE.A, rcode: 0, answers: ['CNAME api.example.com', 'A 192.0.2.10'] },
        { name: 'another search domain: NXDOMAIN', q: 'api.example.com.svc.cluster.local', type: TYPE.A, rcode: 3, answers: [] },
      ];
      for (const c of cases) {
        it(c.name, async () => {
          const before = upstream.received.length;
          const a = await ask(c.q, c.type, transport);
          assert.equal(a.rcode, c.rcode);
          assert.equal(a.aa, 1, 'authoritative');
          assert.deepEqual(a.questions, [{ name: c.q, type: c.type }]);
          assert.deepEqual(a.answers.map((r) => `${r.type === TYPE.CNAME ? 'CNAME' : r.type === TYPE.A ? 'A' : 'AAAA'} ${r.address ?? r.domain}`), c.answers);
          for (const r of a.answers) assert.equal(r.ttl, 30);
          assert.equal(upstream.received.length, before, 'not forwarded');
        });
      }
    });
  }

  it('answers a big local answer truncated over UDP (TC) and whole over TCP', async () => {
    const udp = await ask('big.example.com', TYPE.A, 'udp');
    assert.equal(udp.tc, 1);
    assert.equal(udp.answers.length, 0);
    const tcp = await ask('big.example.com', TYPE.A, 'tcp');
    assert.equal(tcp.tc, 0);
    assert.equal(tcp.answers.length, 60);
    const edns = await ask('big.example.com', TYPE.A, 'udp', { edns: 4096 });
    assert.equal(edns.tc, 0, 'fits the client\'s EDNS size');
    assert.equal(edns.answers.length, 60);
    assert.ok(edns.additionals.some((r) => r.type === TYPE.OPT), 'an OPT record answers an OPT record');
  });

  for (const transport of ['udp', 'tcp'] as const) {
    it(`forwards other names over ${transport}, the upstream's answer with the client's id`, async () => {
      const before = upstream.received.length;
      const m = metrics.upstream;
      const a = await ask('elsewhere.example.org', TYPE.A, transport);
      assert.equal(a.rcode, 0);
      assert.deepEqual(a.answers.map((r) => r.address), ['192.0.2.99']);
      assert.equal(upstream.received.length, before + 1);
      assert.equal(upstream.received.at(-1)!.transport, transport);
      assert.equal(metrics.upstream, m + 1);
    });
  }

  it('forwards names of other classes (CH) even when the name is in the table', async () => {
    const q = query('api.example.com', TYPE.A);
    q.writeUInt16BE(3, q.length - 2); // class CH
    const before = upstream.received.length;
    assert.ok(await udpAsk(H, proxy.port, q));
    assert.equal(upstream.received.length, before + 1);
  });

  it('answers a TCP client that sent its query and closed its side', async () => {
    const answers = await tcpAsk(H, proxy.port, [query('api.example.com', TYPE.A), query('far.example.org', TYPE.A)], { halfClose: true });
    assert.equal(answers.length, 2);
  });

  it('answers pipelined TCP queries, each by its id', async () => {
    const qs = Array.from({ length: 50 }, (_, i) => query(i % 2 ? 'api.example.com' : `n${i}.example.org`, TYPE.A));
    const answers = await tcpAsk(H, proxy.port, qs, { timeoutMs: 5000 });
    assert.equal(answers.length, 50);
    assert.deepEqual(new Set(answers.map((a) => a.readUInt16BE(0))), new Set(qs.map((q) => q.readUInt16BE(0))));
  });

  it('counts every request in dns_requests_total', async () => {
    const before = metrics.requests;
    await ask('api.example.com', TYPE.A);
    await ask('x.example.org', TYPE.A);
    assert.equal(metrics.requests, before + 2);
  });

  describe('malformed input', () => {
    const header = (o: { qd?: number; an?: number; ns?: number; ar?: number; flags?: number } = {}): Buffer => {
      const h = Buffer.alloc(12);
      h.writeUInt16BE(0xbeef, 0);
      h.writeUInt16BE(o.flags ?? 0x0100, 2);
      h.writeUInt16BE(o.qd ?? 1, 4);
      h.writeUInt16BE(o.an ?? 0, 6);
      h.writeUInt16BE(o.ns ?? 0, 8);
      h.writeUInt16BE(o.ar ?? 0, 10);
      return h;
    };
    const good = query('api.example.com', TYPE.A);
    const cases: { name: string; msg: Buffer; expect: 'drop' | number }[] = [
      { name: 'empty', msg: Buffer.alloc(0), expect: 'drop' },
      { name: 'one byte', msg: Buffer.from([7]), expect: 'drop' },
      { name: 'truncated header (11 bytes)', msg: good.subarray(0, 11), expect: 'drop' },
      { name: 'a response (QR set)', msg: Buffer.concat([header({ flags: 0x8180 }), good.subarray(12)]), expect: 'drop' },
      { name: 'header only, one question announced', msg: header(), expect: 1 },
      { name: 'no question', msg: header({ qd: 0 }), expect: 1 },
      { name: 'two questions', msg: Buffer.concat([header({ qd: 2 }), good.subarray(12), good.subarray(12)]), expect: 1 },
      { name: 'huge counts in every section', msg: Buffer.concat([header({ qd: 0xffff, an: 0xffff, ns: 0xffff, ar: 0xffff }), good.subarray(12)]), expect: 1 },
      { name: 'huge additional count', msg: Buffer.concat([header({ ar: 0xffff }), good.subarray(12)]), expect: 1 },
      { name: 'question cut inside a label', msg: good.subarray(0, 16), expect: 1 },
      { name: 'question without type and class', msg: good.subarray(0, good.length - 3), expect: 1 },
      { name: 'label longer than the message', msg: Buffer.concat([header(), Buffer.from([63, 0x61])]), expect: 1 },
      { name: 'compression pointer to itself', msg: Buffer.concat([header(), Buffer.from([0xc0, 12, 0, 1, 0, 1])]), expect: 1 },
      { name: 'compression pointer loop in the additional section', msg: Buffer.concat([header({ ar: 1 }), good.subarray(12), Buffer.from([0xc0, good.length, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0])]), expect: 1 },
      { name: 'reserved label type 0x40', msg: Buffer.concat([header(), Buffer.from([0x41, 0x61, 0, 0, 1, 0, 1])]), expect: 1 },
      { name: 'name over 255 octets', msg: Buffer.concat([header(), ...Array.from({ length: 5 }, () => Buffer.concat([Buffer.from([63]), Buffer.alloc(63, 0x61)])), Buffer.from([0, 0, 1, 0, 1])]), expect: 1 },
      { name: 'an opcode other than QUERY (UPDATE)', msg: Buffer.concat([header({ flags: 0x2800 }), good.subarray(12)]), expect: 4 },
      { name: 'two OPT records', msg: (() => { const q = query('x.example.org', TYPE.A, { edns: 1232 }); const opt = q.subarray(q.length - 11); const m = Buffer.concat([q, opt]); m.writeUInt16BE(2, 10); return m; })(), expect: 1 },
    ];
    for (const c of cases) {
      it(`${c.name}: ${c.expect === 'drop' ? 'dropped' : `rcode ${c.expect}`}, and the server still answers`, async () => {
        const raw = await udpAsk(H, proxy.port, c.msg, c.expect === 'drop' ? 200 : 2000);
        if (c.expect === 'drop') assert.equal(raw, undefined);
        else {
          assert.ok(raw, 'an answer');
          assert.equal(raw.readUInt16BE(0), c.msg.readUInt16BE(0), 'the query id');
          assert.equal(raw[3]! & 0x0f, c.expect);
          assert.equal(raw[2]! & 0x80, 0x80, 'QR set');
        }
        const tcp = await tcpAsk(H, proxy.port, [c.msg], { expect: c.expect === 'drop' ? 0 : 1, timeoutMs: 1000 });
        if (c.expect !== 'drop') assert.equal(tcp[0]![3]! & 0x0f, c.expect);
        assert.equal(parse((await udpAsk(H, proxy.port, query('api.example.com', TYPE.A)))!).answers.length, 1, 'still answering');
      });
    }

    it('survives 3000 random datagrams and random TCP streams, then answers', async () => {
      const { createSocket } = await import('node:dgram');
      const s = createSocket('udp4');
      for (let i = 0; i < 3000; i++) {
        const junk = randomBytes(1 + (i % 300));
        if (i % 3 === 0) junk[2] = junk[2]! & 0x7f; // many of them look like queries
        s.send(junk, proxy.port, H);
        if (i % 200 === 0) await sleep(5);
      }
      for (let i = 0; i < 20; i++) await tcpAsk(H, proxy.port, [randomBytes(1 + i * 37)], { raw: true, expect: 0, timeoutMs: 200 });
      await sleep(200);
      s.close();
      assert.equal(parse((await udpAsk(H, proxy.port, query('api.example.com', TYPE.A)))!).answers.length, 1);
      assert.equal(parse((await tcpAsk(H, proxy.port, [query('api.example.com', TYPE.A)]))[0]!).answers.length, 1);
    });
  });
});

describe('DNS proxy: a forwarded answer too big for a UDP client', () => {
  // The resolver answers 40 TXT records (4,833 bytes, 4,844 with OPT) without TC, over UDP and TCP alike.
  let upstream: FakeUpstream;
  let proxy: DnsProxy;
  before(async () => {
    upstream = await fakeUpstream((q) => txtAnswer(q, { answers: 40, ...(q.readUInt16BE(10) > 0 ? { opt: { size: 4096 } } : {}) }));
    proxy = await startDnsProxy({
      address: '127.0.0.1:0', domain: 'ns1.svc.cluster.local', resolver: resolver([upstream]), parallel: false,
      upstreamPort: upstream.port, timeoutMs: 1000,
    });
  });
  after(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  for (const c of [{ name: 'no EDNS: 512 bytes', edns: undefined, limit: 512 }, { name: 'EDNS 1232', edns: 1232, limit: 1232 }]) {
    it(`reaches the client truncated to its size with TC (${c.name}); the client's retry over TCP gets it whole`, async () => {
      const q = query('big.example.org', TYPE.TXT, c.edns === undefined ? {} : { edns: c.edns });
      const udp = await udpAsk('127.0.0.1', proxy.port, q);
      assert.ok(udp, 'an answer over UDP');
      assert.ok(udp.length <= c.limit, `${udp.length} bytes over UDP`);
      const truncated = parse(udp);
      assert.equal(truncated.tc, 1);
      assert.ok(truncated.answers.length > 0, 'as many whole records as fit');
      assert.equal(truncated.additionals.some((r) => r.type === TYPE.OPT), c.edns !== undefined);
      const [tcp] = await tcpAsk('127.0.0.1', proxy.port, [q]);
      const whole = parse(tcp!);
      assert.deepEqual([whole.tc, whole.answers.length, tcp!.length], [0, 40, c.edns === undefined ? 4833 : 4844]);
      assert.deepEqual(texts(truncated.answers), texts(whole.answers).slice(0, truncated.answers.length));
    });
  }
});

describe('DNS proxy under a flood', () => {
  let silent: FakeUpstream;
  let proxy: DnsProxy;
  before(async () => {
    silent = await fakeUpstream(() => undefined);
    proxy = await startDnsProxy({
      address: '127.0.0.1:0', domain: 'ns1.svc.cluster.local', resolver: resolver([silent]), parallel: false,
      upstreamPort: silent.port, timeoutMs: 1500, maxInFlight: 16,
    });
  });
  after(async () => {
    await proxy?.close();
    await silent?.close();
  });

  it('holds at most maxInFlight forwarded queries: UDP beyond it is dropped, TCP gets SERVFAIL, then SERVFAIL on time-out', async () => {
    const { createSocket } = await import('node:dgram');
    const s = createSocket('udp4');
    const answers: Buffer[] = [];
    s.on('message', (m) => answers.push(m));
    for (let i = 0; i < 500; i++) s.send(query(`flood${i}.example.org`, TYPE.A), proxy.port, '127.0.0.1');
    await sleep(300);
    assert.ok(proxy.inFlight <= 16, `in flight ${proxy.inFlight}`);
    assert.ok(proxy.stats.overloaded > 0);
    assert.ok(silent.received.length <= 16, `upstream saw ${silent.received.length}`);
    const [tcp] = await tcpAsk('127.0.0.1', proxy.port, [query('one-more.example.org', TYPE.A)]);
    assert.equal(parse(tcp!).rcode, 2, 'SERVFAIL over TCP beyond the bound');
    await sleep(1600);
    s.close();
    assert.ok(answers.length > 0 && answers.length <= 16, `${answers.length} answers`);
    for (const a of answers) assert.equal(parse(a).rcode, 2, 'time-out: SERVFAIL');
    assert.equal(proxy.inFlight, 0);
  });
});

describe('DNS proxy listening', () => {
  it('listens on localhost (both loopbacks) with one port for UDP and TCP', async () => {
    const proxy = await startDnsProxy({ address: 'localhost:0', domain: 'ns1.svc.cluster.local', resolver: DEFAULT_RESOLVER_CONFIG, parallel: false });
    try {
      const hosts = proxy.endpoints.map((e) => `${e.transport} ${e.host}`);
      assert.ok(hosts.includes('udp 127.0.0.1') && hosts.includes('tcp 127.0.0.1'), hosts.join());
      assert.equal(new Set(proxy.endpoints.map((e) => e.port)).size, 1);
      // No upstream at all: SERVFAIL.
      const raw = await udpAsk('127.0.0.1', proxy.port, query('anything.example.org', TYPE.A));
      assert.equal(parse(raw!).rcode, 2);
    } finally {
      await proxy.close();
    }
  });

  it('refuses an address it cannot parse, naming the variable', async () => {
    await assert.rejects(startDnsProxy({ address: 'nonsense', domain: 'd', resolver: DEFAULT_RESOLVER_CONFIG, parallel: false }),
      (err: Error & { code?: string }) => err.code === 'ERR_ENV_VALUE' && /DNS_PROXY_ADDR="nonsense"/.test(err.message));
  });

  it('does not forward to itself when resolv.conf names its own address', async () => {
    const first = await startDnsProxy({ address: '127.0.0.1:0', domain: 'd', resolver: DEFAULT_RESOLVER_CONFIG, parallel: false });
    const port = first.port;
    await first.close();
    const proxy = await startDnsProxy({
      address: `127.0.0.1:${port}`, domain: 'd', resolver: { ...DEFAULT_RESOLVER_CONFIG, nameservers: ['127.0.0.1', '127.0.0.2'] },
      parallel: false, upstreamPort: port,
    });
    try {
      assert.deepEqual(proxy.upstreams.map((u) => u.host), ['127.0.0.2']);
    } finally {
      await proxy.close();
    }
  });
});
