import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Command, Option } from 'commander';
import { addOptions, boolOption, rewriteBoolAssignments } from '../../src/cli/bool-flags.js';
import { AgentError } from '../../src/errors/agent-error.js';

function tree(): Command {
  const root = new Command('x');
  addOptions(root, boolOption('--log_as_json', 'json'));
  const version = root.command('version');
  addOptions(version, [new Option('-o, --output <f>'), ...boolOption('-s, --short', 'short', true)]);
  root.command('bash').addOption(new Option('--no-descriptions', 'off'));
  return root;
}

describe('rewriteBoolAssignments (pflag\'s --flag=false)', () => {
  const cases: [string[], string[]][] = [
    [['version', '--short=false'], ['version', '--no-short']],
    [['version', '--short=true'], ['version', '--short']],
    [['version', '-s=0'], ['version', '--no-short']],
    [['version', '--short'], ['version', '--short']],
    [['--log_as_json=T', 'version'], ['--log_as_json', 'version']],
    [['bash', '--no-descriptions=true'], ['bash', '--no-descriptions']],
    [['bash', '--no-descriptions=false'], ['bash']],
    [['version', '-o=json'], ['version', '-o=json']],
    [['version', '--', '--short=false'], ['version', '--', '--short=false']],
  ];
  for (const [input, output] of cases) {
    it(`${input.join(' ')} → ${output.join(' ')}`, () => assert.deepEqual(rewriteBoolAssignments(tree(), input), output));
  }

  it('rejects a value that is not a bool, naming the flag', () => {
    assert.throws(() => rewriteBoolAssignments(tree(), ['version', '--short=maybe']),
      (err: unknown) => err instanceof AgentError && err.exitCode === 2 && /--short: "maybe" is not a bool/.test(err.message));
  });

  it('makes --short=false parse to false', () => {
    const root = tree().exitOverride();
    let short: boolean | undefined;
    root.commands[0]!.action((o: { short: boolean }) => { short = o.short; });
    root.parse(rewriteBoolAssignments(root, ['version', '--short=false']), { from: 'user' });
    assert.equal(short, false);
  });
});
