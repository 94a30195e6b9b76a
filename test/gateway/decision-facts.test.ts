import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RequestFacts } from '../../src/gateway/decision-facts.js';

const fact = (path: string, authority = 'svc.example.com', method = 'GET') => ({ method, authority, path, time: 1_795_000_000_123.25, durationMs: 1.75 });

describe('RequestFacts (the decision ring\'s per-request texts and times, outside the heap)', () => {
  it('gives back what each place was given, places independent of each other', () => {
    const f = new RequestFacts(3);
    f.set(0, fact('/a?x=1'));
    f.set(1, { method: 'POST', authority: '[::1]:8080', path: '/', time: '2026-11-27T00:00:00.000Z', durationMs: 0 });
    f.set(2, fact(''));
    assert.deepEqual(f.texts(0), { method: 'GET', authority: 'svc.example.com', path: '/a?x=1' });
    assert.deepEqual(f.texts(1), { method: 'POST', authority: '[::1]:8080', path: '/' });
    assert.deepEqual(f.texts(2), { method: 'GET', authority: 'svc.example.com', path: '' });
    assert.equal(f.timeMs(0), 1_795_000_000_123.25);
    assert.equal(f.durationMs(0), 1.75);
    assert.ok(Number.isNaN(f.timeMs(1)), 'a time given as text is the ring\'s to keep');
  });

  it('a place written again holds only the new request', () => {
    const f = new RequestFacts(1);
    f.set(0, fact(`/${'x'.repeat(120)}`, 'a-long-authority.example.com', 'OPTIONS'));
    f.set(0, fact('/b', 'b', 'GET'));
    assert.deepEqual(f.texts(0), { method: 'GET', authority: 'b', path: '/b' });
  });

  it('cuts what does not fit, and says so with an ellipsis; characters beyond latin-1 and latin-1 bytes come back whole', () => {
    const f = new RequestFacts(2);
    const long = `/${'p'.repeat(1000)}`;
    f.set(0, fact(long, `${'h'.repeat(300)}.example`, 'M'.repeat(40)));
    const t = f.texts(0);
    assert.ok(t.path.endsWith('…') && long.startsWith(t.path.slice(0, -1)) && t.path.length > 100, t.path);
    assert.ok(t.authority.endsWith('…') && t.authority.length <= 96, t.authority);
    assert.equal(t.method, `${'M'.repeat(16)}…`);
    f.set(1, fact('/é/ü\u00ff/😀', 'xn--bcher-kva.example'));
    assert.deepEqual(f.texts(1), { method: 'GET', authority: 'xn--bcher-kva.example', path: '/é/ü\u00ff/😀' });
  });

  it('methods and authorities that repeat are kept once, by number; past the table\'s room they are copied, every place still exact', () => {
    const f = new RequestFacts(600);
    // 600 different authorities (more than the table holds), each twice, mixed with a repeating one.
    for (let i = 0; i < 600; i++) {
      f.set(i, fact(`/${i}`, i % 3 === 0 ? 'svc.example.com' : `host-${i}.example:80${i % 10}`, i % 2 ? 'GET' : 'POST'));
    }
    for (let i = 0; i < 600; i++) {
      assert.deepEqual(f.texts(i), { method: i % 2 ? 'GET' : 'POST', authority: i % 3 === 0 ? 'svc.example.com' : `host-${i}.example:80${i % 10}`, path: `/${i}` }, `place ${i}`);
    }
    // Written over: a known text in a place that held a copied one, and the other way round.
    f.set(599, fact('/again', 'svc.example.com', 'GET'));
    f.set(0, fact('/new', 'never-seen-before.example', 'PATCH'));
    assert.deepEqual(f.texts(599), { method: 'GET', authority: 'svc.example.com', path: '/again' });
    assert.deepEqual(f.texts(0), { method: 'PATCH', authority: 'never-seen-before.example', path: '/new' });
    // A long or non-latin-1 authority is never a known text, and comes back as before (cut, or whole).
    f.set(1, fact('/', `${'h'.repeat(300)}.example`));
    f.set(2, fact('/', 'bücher.example'));
    assert.ok(f.texts(1).authority.endsWith('…'));
    assert.equal(f.texts(2).authority, 'bücher.example');
  });

  it('a multi-byte character is never split where a text is cut', () => {
    const f = new RequestFacts(1);
    f.set(0, fact(`/${'é'.repeat(400)}`));
    const { path } = f.texts(0);
    assert.match(path, /^\/é+…$/u);
  });
});
