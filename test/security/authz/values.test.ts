import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { matchValue } from '../../../src/security/authz/values.js';

describe('matchValue', () => {
  const cases: [pattern: string, value: string | undefined, want: boolean][] = [
    ['GET', 'GET', true],
    ['GET', 'get', false],
    ['/api/*', '/api/x', true],
    ['/api/*', '/api', false],
    ['*.js', '/x/app.js', true],
    ['*.js', '/x/app.css', false],
    ['*', 'anything', true],
    ['*', '', false],
    ['*', undefined, false],
    ['x', undefined, false],
    ['*', '*', true],
  ];
  for (const [p, v, want] of cases) it(`${p} vs ${JSON.stringify(v)} → ${want}`, () => assert.equal(matchValue(p, v), want));
});
