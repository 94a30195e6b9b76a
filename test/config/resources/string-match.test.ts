import assert from 'node:assert/strict';
import { it } from 'node:test';
import { FieldError } from '../../../src/config/resources/fields.js';
import { compileFullMatch, parseStringMatch } from '../../../src/config/resources/string-match.js';

it('compiles regexes as full matches, translating RE2 spellings', () => {
  const cases: [string, string[], string[]][] = [
    ['/api/v[0-9]+', ['/api/v1', '/api/v22'], ['/api/v1/x', 'x/api/v1', '/api/v']],
    ['a|b', ['a', 'b'], ['ab', 'xa']], // the alternation is grouped inside the anchors
    ['(?i)bearer .*', ['Bearer x', 'BEARER y'], ['x Bearer']],
    ['(?s)a.b', ['a\nb'], ['a\n\nb']],
    ['(?P<v>[0-9]+)', ['42'], ['x']],
    ['\\Aabc\\z', ['abc'], ['abcz']],
    ['[[:digit:]]+-[[:alpha:]]', ['12-a'], ['12-1']],
    ['[]a]+', [']a]'], ['b']],
    ['\\p{Lu}+', ['ÄB'], ['ab']],
  ];
  for (const [pattern, yes, no] of cases) {
    const re = compileFullMatch(pattern);
    for (const v of yes) assert.ok(re.test(v), `${pattern} matches ${JSON.stringify(v)}`);
    for (const v of no) assert.ok(!re.test(v), `${pattern} does not match ${JSON.stringify(v)}`);
  }
});

it('refuses what RE2 refuses, and what does not compile', () => {
  const cases: [string, RegExp][] = [
    ['a(', /unterminated group/],
    ['(?=a)a', /lookaround/],
    ['(?<!a)b', /lookaround/],
    ['(a)\\1', /backreferences/],
    ['(?m)^a$', /flag \(\?m\)/],
    ['[[:nope:]]', /class/],
    ['a\\', /trailing backslash/],
  ];
  for (const [pattern, message] of cases) assert.throws(() => compileFullMatch(pattern), message, pattern);
});

it('parses StringMatch forms', () => {
  assert.deepEqual(parseStringMatch({ exact: 'a' }, 'f'), { kind: 'exact', value: 'a' });
  assert.deepEqual(parseStringMatch({ prefix: '' }, 'f'), { kind: 'prefix', value: '' });
  assert.deepEqual(parseStringMatch({}, 'f', { allowPresent: true }), { kind: 'present' });
  const r = parseStringMatch({ regex: 'a.c' }, 'f');
  assert.ok(r.kind === 'regex' && r.value === 'a.c' && r.regex.test('abc'));
  const bad: [unknown, string, RegExp][] = [
    [{ regex: '' }, 'f.regex', /empty regex/],
    [{ regex: 'a(' }, 'f.regex', /^"a\(" is not a valid regular expression: unterminated group$/],
    [{ suffix: 'a' }, 'f.suffix', /unknown field "suffix"/],
    [{}, 'f', /expected one of exact, prefix or regex/],
    ['a', 'f', /expected a mapping/],
    [{ exact: ['a'] }, 'f.exact', /expected a string/],
  ];
  for (const [raw, field, message] of bad) {
    assert.throws(() => parseStringMatch(raw, 'f'), (e: unknown) => e instanceof FieldError && e.field === field && message.test(e.message), JSON.stringify(raw));
  }
});
