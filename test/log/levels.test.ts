import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentError } from '../../src/errors/agent-error.js';
import { SCOPE_NAMES, parseScopedLevels, passes } from '../../src/log/levels.js';

describe('parseScopedLevels (--log_output_level syntax)', () => {
  const entries = (text: string): [string, string][] => [...parseScopedLevels('--log_output_level', text)];

  it('reads scope:level pairs', () => {
    assert.deepEqual(entries('ads:debug,dns:error'), [['ads', 'debug'], ['dns', 'error']]);
  });
  it('gives a bare level to the default scope', () => {
    assert.deepEqual(entries('warn'), [['default', 'warn']]);
    assert.deepEqual(entries('debug,dns:none'), [['default', 'debug'], ['dns', 'none']]);
  });
  it('lets all:<level> set every scope and override the other entries, as Istio does', () => {
    const all = parseScopedLevels('--log_output_level', 'dns:error,all:debug,ads:fatal');
    assert.equal(all.size, SCOPE_NAMES.length);
    for (const s of SCOPE_NAMES) assert.equal(all.get(s), 'debug');
  });
  it('accepts empty text and stray commas', () => {
    assert.deepEqual(entries(''), []);
    assert.deepEqual(entries('ads:info,'), [['ads', 'info']]);
  });
  it('names the flag and the bad part', () => {
    const cases: [string, RegExp][] = [
      ['ads:verbose', /--log_stacktrace_level: unknown level "verbose" in "ads:verbose"/],
      ['nosuch:info', /unknown scope "nosuch"/],
      ['a:b:c', /"a:b:c" is not <scope>:<level>/],
      ['warning', /unknown level "warning"/],
    ];
    for (const [text, message] of cases) {
      assert.throws(() => parseScopedLevels('--log_stacktrace_level', text),
        (err: unknown) => err instanceof AgentError && err.code === 'ERR_USAGE' && message.test(err.message));
    }
  });
});

describe('passes', () => {
  it('orders levels and lets none silence', () => {
    assert.equal(passes('info', 'info'), true);
    assert.equal(passes('debug', 'info'), false);
    assert.equal(passes('fatal', 'error'), true);
    assert.equal(passes('fatal', 'none'), false);
  });
});
