import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { headerLines, requestHeaderLines } from '../../src/security/header-lines.js';

describe('headerLines', () => {
  const cases: [name: string, raw: string[], want: Record<string, string | string[]>][] = [
    ['none', [], {}],
    ['one line each, names lower-cased', ['Host', 'a', 'X-Id', '1'], { host: 'a', 'x-id': '1' }],
    ['every line of a repeated name (node:http keeps the first Authorization)', ['Authorization', 'Basic x', 'authorization', 'Bearer y', 'AUTHORIZATION', 'Bearer z'],
      { authorization: ['Basic x', 'Bearer y', 'Bearer z'] }],
    ['a value with commas stays one line', ['x-role', 'user, admin'], { 'x-role': 'user, admin' }],
  ];
  for (const [name, raw, want] of cases) {
    it(name, () => assert.deepEqual({ ...headerLines(raw) }, { ...want }));
  }

  it('takes __proto__ as just a header', () => {
    const lines = headerLines(['__proto__', 'x', 'constructor', 'y', '__Proto__', 'z']);
    assert.equal(Object.getPrototypeOf(lines), Object.prototype);
    assert.deepEqual(Object.entries(lines), [['__proto__', ['x', 'z']], ['constructor', 'y']]);
  });
});

describe('requestHeaderLines', () => {
  it('returns node:http\'s object as is when every name came once', () => {
    const headers = { host: 'a', authorization: 'Bearer a' };
    assert.equal(requestHeaderLines({ rawHeaders: ['Host', 'a', 'Authorization', 'Bearer a'], headers }), headers);
  });

  it('builds the lines when a name came twice (node:http kept the first Authorization only)', () => {
    const rawHeaders = ['Authorization', 'Bearer a', 'authorization', 'Bearer b'];
    assert.deepEqual({ ...requestHeaderLines({ rawHeaders, headers: { authorization: 'Bearer a' } }) }, { authorization: ['Bearer a', 'Bearer b'] });
  });

  it('falls back to the headers object when there are no raw lines', () => {
    const headers = { authorization: 'Bearer a' };
    assert.equal(requestHeaderLines({ headers }), headers);
  });
});
