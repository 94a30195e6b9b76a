// Reading queries from raw bytes, error answers, and matching answers to queries.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { answersQuery, errorResponse, readQuery, withId, RCODE } from '../../src/dns/wire.js';
import { answerTo, parse, query, TYPE } from './dns-test-kit.js';

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
