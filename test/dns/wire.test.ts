// Reading queries from raw bytes, error answers, and matching answers to queries.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { answersQuery, errorResponse, readQuery, truncateAnswer, withId, RCODE } from '../../src/dns/wire.js';
import { answerTo, parse, query, texts, TYPE, txtAnswer } from './dns-test-kit.js';

describe('readQuery', () => {
  it('reads id, RD, the name (lower-cased and as written), type, class and the question\'s end', () => {
    const q = query('Api.Example.COM', TYPE.AAAA, { id: 0x1234 });
    const r = readQuery(q);
    assert.ok(r.ok);
    assert.deepEqual(r.query, { id: 0x1234, rd: true, name: 'api.example.com', rawName: 'Api.Example.COM', qtype: TYPE.AAAA, qclass: 1, questionEnd: q.length, udpLimit: 512, hasOpt: false });
  });

  it('takes the UDP size from OPT, never below 512', () => {
    const big = readQuery(query('a.example', TYPE.A, { edns: 4096 }));
    assert.ok(big.ok && big.query.hasOpt && big.query.udpLimit === 4096);
    const small = readQuery(query('a.example', TYPE.A, { edns: 100 }));
    assert.ok(small.ok && small.query.udpLimit === 512);
    const huge = readQuery(query('a.example', TYPE.A, { edns: 65535 }));
    assert.ok(huge.ok && huge.query.udpLimit === 65507, 'no datagram carries more than 65507 bytes');
  });

  it('escapes a dot or an odd byte inside a label so it can never spell a table name', () => {
    const q = Buffer.concat([query('x', TYPE.A).subarray(0, 12), Buffer.from([7, ...Buffer.from('api.exa'), 2, ...Buffer.from('mp'), 0, 0, 1, 0, 1])]);
    const r = readQuery(q);
    assert.ok(r.ok);
    assert.equal(r.query.name, 'api\\046exa.mp');
  });

  it('reads a huge announced count in little time (bounded by the message, not the count)', () => {
    const q = query('a.example', TYPE.A);
    q.writeUInt16BE(0xffff, 6);
    q.writeUInt16BE(0xffff, 8);
    q.writeUInt16BE(0xffff, 10);
    const r = readQuery(q);
    assert.ok(!r.ok && r.action === 'reply' && r.rcode === RCODE.FORMERR);
  });
});

describe('errorResponse', () => {
  it('echoes id, opcode, RD and the question bytes; sets QR, RA and the rcode; nothing else', () => {
    const q = query('x.example.org', TYPE.A, { id: 0x4242, edns: 1232 });
    const r = readQuery(q);
    assert.ok(r.ok);
    const a = errorResponse(q, RCODE.SERVFAIL, r.query.questionEnd);
    const p = parse(a);
    assert.deepEqual([p.id, p.rcode, p.rd, p.ra, p.aa, p.tc], [0x4242, 2, 1, 1, 0, 0]);
    assert.deepEqual(p.questions, [{ name: 'x.example.org', type: TYPE.A }]);
    assert.equal(p.additionals.length, 0);
    assert.deepEqual(a.subarray(12), q.subarray(12, r.query.questionEnd));
  });

  it('without a readable question: the header alone, no question', () => {
    const a = errorResponse(Buffer.from([1, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63]), RCODE.FORMERR);
    assert.equal(a.length, 12);
    assert.deepEqual([a[0], a[1], a[3]! & 0xf, a.readUInt16BE(4)], [1, 2, 1, 0]);
  });
});

describe('answersQuery and withId', () => {
  const q = query('x.example.org', TYPE.A, { id: 7 });
  const end = q.length;
  it('matches the same id and question, case aside', () => {
    assert.equal(answersQuery(answerTo(q), q, end), true);
    const upper = answerTo(query('X.EXAMPLE.ORG', TYPE.A, { id: 7 }));
    assert.equal(answersQuery(upper, q, end), true);
  });
  it('refuses another id, another question, a query, a short message', () => {
    assert.equal(answersQuery(answerTo(query('x.example.org', TYPE.A, { id: 8 })), q, end), false);
    assert.equal(answersQuery(answerTo(query('y.example.org', TYPE.A, { id: 7 })), q, end), false);
    assert.equal(answersQuery(answerTo(query('x.example.org', TYPE.AAAA, { id: 7 })), q, end), false);
    assert.equal(answersQuery(q, q, end), false);
    assert.equal(answersQuery(Buffer.alloc(5), q, end), false);
  });
  it('accepts an error answer without a question', () => {
    assert.equal(answersQuery(errorResponse(q, RCODE.REFUSED), q, end), true);
  });
  it('withId changes the two id bytes only, on a copy', () => {
    const c = withId(q, 0xabcd);
    assert.equal(c.readUInt16BE(0), 0xabcd);
    assert.deepEqual(c.subarray(2), q.subarray(2));
    assert.equal(q.readUInt16BE(0), 7);
  });
});

describe('truncateAnswer', () => {
  // A TXT query for big.example.org: header and question are 33 bytes, each record of txtAnswer 120.
  const q = query('big.example.org', TYPE.TXT);
  /** An OPT of this payload size with `options` bytes of options: one EDNS padding option (code 12). */
  const opt = (size: number, options = 0) => {
    const padding = Buffer.alloc(options);
    if (options >= 4) {
      padding.writeUInt16BE(12, 0);
      padding.writeUInt16BE(options - 4, 2);
    }
    return { size, options: padding };
  };
  const cases: {
    name: string; answer: Buffer; limit: number; keepOpt: boolean;
    expect: { length: number; tc: 0 | 1; an: number; ns?: number; ar?: number; opt?: { size: number; options: number } };
  }[] = [
    { name: 'a 4,833-byte answer to a client without EDNS: the records that fit in 512', answer: txtAnswer(q, { answers: 40 }), limit: 512, keepOpt: false,
      expect: { length: 33 + 3 * 120, tc: 1, an: 3 } },
    { name: 'EDNS 1232: the records that fit beside the server\'s OPT, which stays last', answer: txtAnswer(q, { answers: 40, opt: opt(4096) }), limit: 1232, keepOpt: true,
      expect: { length: 33 + 9 * 120 + 11, tc: 1, an: 9, opt: { size: 4096, options: 0 } } },
    { name: 'an EDNS size below 512 counts as 512', answer: txtAnswer(q, { answers: 40, opt: opt(1232) }), limit: 100, keepOpt: true,
      expect: { length: 33 + 3 * 120 + 11, tc: 1, an: 3, opt: { size: 1232, options: 0 } } },
    { name: 'the first record that does not fit ends the answer, section counts fixed', answer: txtAnswer(q, { answers: 2, authority: 3, additional: 2 }), limit: 512, keepOpt: false,
      expect: { length: 33 + 3 * 120, tc: 1, an: 2, ns: 1, ar: 0 } },
    { name: 'an OPT the client did not ask for goes, and alone sets no TC', answer: txtAnswer(q, { answers: 3, opt: opt(1232, 200) }), limit: 512, keepOpt: false,
      expect: { length: 33 + 3 * 120, tc: 0, an: 3 } },
    { name: 'OPT options that do not fit even beside the question (padding) go, the OPT stays', answer: txtAnswer(q, { answers: 40, opt: opt(1232, 600) }), limit: 512, keepOpt: true,
      expect: { length: 33 + 3 * 120 + 11, tc: 1, an: 3, opt: { size: 1232, options: 0 } } },
    { name: 'OPT options that fit are kept', answer: txtAnswer(q, { answers: 40, opt: opt(1232, 100) }), limit: 512, keepOpt: true,
      expect: { length: 33 + 3 * 120 + 111, tc: 1, an: 3, opt: { size: 1232, options: 100 } } },
    { name: 'a record that cannot be read ends what is kept', answer: (() => { const a = txtAnswer(q, { answers: 40 }); a.writeUInt16BE(0xffff, 33 + 2 * 120 + 10); return a; })(), limit: 512, keepOpt: false,
      expect: { length: 33 + 2 * 120, tc: 1, an: 2 } },
    { name: 'an answer that fits is returned as it is', answer: txtAnswer(q, { answers: 3, opt: opt(1232) }), limit: 512, keepOpt: true,
      expect: { length: 33 + 3 * 120 + 11, tc: 0, an: 3, opt: { size: 1232, options: 0 } } },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const out = truncateAnswer(c.answer, c.limit, c.keepOpt);
      assert.equal(out.length, c.expect.length);
      assert.ok(out.length <= Math.max(512, c.limit));
      const p = parse(out);
      assert.equal(p.tc, c.expect.tc, 'TC');
      assert.equal(p.id, q.readUInt16BE(0));
      assert.deepEqual(p.questions, [{ name: 'big.example.org', type: TYPE.TXT }]);
      assert.deepEqual(texts([...p.answers, ...p.authorities, ...p.additionals]), texts([...parse(c.answer).answers, ...parse(c.answer).authorities, ...parse(c.answer).additionals].slice(0, c.expect.an + (c.expect.ns ?? 0) + (c.expect.ar ?? 0))), 'whole records, in order, from the first');
      assert.deepEqual([p.answers.length, p.authorities.length], [c.expect.an, c.expect.ns ?? 0]);
      const opts = p.additionals.filter((r) => r.type === TYPE.OPT);
      assert.equal(p.additionals.length - opts.length, c.expect.ar ?? 0);
      if (c.expect.opt) {
        assert.equal(opts.length, 1);
        assert.equal(out.readUInt16BE(out.length - 11 - c.expect.opt.options + 3), c.expect.opt.size, 'the server\'s payload size');
        assert.equal(out.readUInt16BE(out.length - c.expect.opt.options - 2), c.expect.opt.options, 'RDLENGTH');
        assert.equal(out[out.length - 11 - c.expect.opt.options], 0, 'owned by the root');
      } else {
        assert.equal(opts.length, 0);
      }
      // Bytes: the original's prefix, then the OPT.
      const kept = out.length - (c.expect.opt ? 11 + c.expect.opt.options : 0);
      assert.deepEqual(out.subarray(12, kept), c.answer.subarray(12, kept));
    });
  }

  it('always fits, never cuts a record, and sets TC, over sizes and section mixes', () => {
    for (let limit = 400; limit <= 5000; limit += 37) {
      for (const [answers, authority, additional] of [[40, 0, 0], [1, 30, 10], [0, 0, 45], [5, 5, 5]] as const) {
        for (const withOpt of [false, true]) {
          const answer = txtAnswer(q, { answers, authority, additional, ...(withOpt ? { opt: opt(4096, 12) } : {}) });
          const out = truncateAnswer(answer, limit, withOpt);
          const size = Math.max(512, limit);
          if (answer.length <= size) {
            assert.deepEqual(out, answer);
            continue;
          }
          assert.ok(out.length <= size, `${out.length} > ${size}`);
          assert.ok(out.length > size - 120 - (withOpt ? 23 : 0), 'as many records as fit');
          const p = parse(out);
          assert.equal(p.tc, 1);
          const all = texts([...p.answers, ...p.authorities, ...p.additionals]);
          assert.deepEqual(all, all.map((_, n) => `record-${n}-`.padEnd(107, 'x')));
          assert.equal(p.additionals.some((r) => r.type === TYPE.OPT), withOpt);
        }
      }
    }
  });
});
