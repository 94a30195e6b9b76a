// Local answers: encoded by dns2 once, then reused with the query's id, RD bit and question bytes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeLocalAnswer, LocalAnswerCache } from '../../src/dns/local-answer.js';
import type { LocalAnswer } from '../../src/dns/name-table.js';
import { readQuery, type Query } from '../../src/dns/wire.js';
import { parse, query, TYPE } from './dns-test-kit.js';

const A: LocalAnswer = { rcode: 'NOERROR', records: [{ type: 'A', address: '10.0.0.1' }, { type: 'AAAA', address: '2001:db8::1' }] };

function read(msg: Buffer): Query {
  const r = readQuery(msg);
  assert.ok(r.ok);
  return r.query;
}

describe('LocalAnswerCache', () => {
  it('gives each query its own id, RD bit and question spelling, identical to a fresh encoding', () => {
    const cache = new LocalAnswerCache();
    const first = query('api.example.com', TYPE.ANY, { id: 1 });
    cache.answer(first, read(first), A, true);
    for (const q of [query('API.example.COM', TYPE.ANY, { id: 2, rd: false }), query('api.EXAMPLE.com', TYPE.ANY, { id: 3 })]) {
      const got = cache.answer(q, read(q), A, true);
      assert.deepEqual(got, encodeLocalAnswer(read(q), A, true));
      const p = parse(got);
      assert.equal(p.id, q.readUInt16BE(0));
      assert.equal(p.rd, read(q).rd ? 1 : 0);
      assert.equal(p.questions[0]!.name, read(q).rawName);
    }
    assert.equal(cache.size, 1);
  });

  it('keeps answers with and without OPT apart, and truncates per the client\'s UDP size', () => {
    const many: LocalAnswer = { rcode: 'NOERROR', records: Array.from({ length: 40 }, (_, i) => ({ type: 'A' as const, address: `10.0.1.${i}` })) };
    const cache = new LocalAnswerCache();
    const plain = query('big.example.com', TYPE.A);
    const edns = query('big.example.com', TYPE.A, { edns: 4096 });
    assert.equal(parse(cache.answer(plain, read(plain), many, true)).tc, 1);
    assert.equal(parse(cache.answer(plain, read(plain), many, false)).answers.length, 40, 'TCP: whole');
    const e = parse(cache.answer(edns, read(edns), many, true));
    assert.deepEqual([e.tc, e.answers.length, e.additionals.length], [0, 40, 1]);
    assert.equal(cache.size, 2);
  });

  it('is emptied when full, and by clear()', () => {
    const cache = new LocalAnswerCache(2);
    for (const name of ['a.example', 'b.example', 'c.example']) {
      const q = query(name, TYPE.A);
      cache.answer(q, read(q), A, true);
    }
    assert.equal(cache.size, 1);
    cache.clear();
    assert.equal(cache.size, 0);
  });
});
