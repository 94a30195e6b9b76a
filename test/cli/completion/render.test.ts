// The completion script generators on a fixed model: what each script mentions, that
// --no-descriptions leaves every description out, and exact golden outputs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bashQuote, renderBash } from '../../../src/cli/completion/bash.js';
import { fishQuote, renderFish } from '../../../src/cli/completion/fish.js';
import { renderCompletion, SHELLS, type Shell } from '../../../src/cli/completion/index.js';
import { psQuote, renderPowershell } from '../../../src/cli/completion/powershell.js';
import { commandsOf, identifier, oneLine } from '../../../src/cli/completion/walk.js';
import { renderZsh } from '../../../src/cli/completion/zsh.js';
import { assertGolden } from '../../helpers/golden.js';
import { fixtureModel } from './fixture-model.js';

const render = (shell: Shell, descriptions: boolean): string =>
  renderCompletion(shell, fixtureModel, { descriptions });

const all = commandsOf(fixtureModel);
const subcommandNames = all.flatMap((c) => c.command.subcommands.map((s) => s.name));
const flags = all.flatMap((c) => c.command.flags);
const enumValues = flags.flatMap((f) => f.values ?? []).concat(all.flatMap((c) => c.command.args ?? []));
const descriptions = [
  ...all.flatMap((c) => c.command.subcommands.map((s) => oneLine(s.description))),
  ...flags.map((f) => oneLine(f.description)),
];

describe('completion helpers', () => {
  it('makes shell identifiers of command names', () => {
    assert.equal(identifier('pilot-agent'), 'pilot_agent');
    assert.equal(identifier('pilot-agent', 'mesh-iptables'), 'pilot_agent_mesh_iptables');
    assert.equal(identifier('9lives.x'), '_9lives_x');
  });

  it('keeps the first line of a description, up to its first sentence', () => {
    assert.equal(oneLine('XDS proxy agent\nsecond line'), 'XDS proxy agent');
    assert.equal(oneLine('Generate it. Load it with:\n  source <(x)'), 'Generate it.');
    assert.equal(oneLine("One of 'yaml' or 'json'."), "One of 'yaml' or 'json'.");
    assert.equal(oneLine('tabs\tand\u001b[1m escapes  collapse'), 'tabs and [1m escapes collapse');
  });

  it('quotes for each shell', () => {
    assert.equal(bashQuote("it's $x"), "'it'\\''s $x'");
    assert.equal(fishQuote("it's a \\ b"), "'it\\'s a \\\\ b'");
    assert.equal(psQuote('it\u2019s \'x\' $y'), "'it\u2019\u2019s ''x'' $y'");
  });

  it('dispatches to the renderer of each shell', () => {
    const renderers = { bash: renderBash, zsh: renderZsh, fish: renderFish, powershell: renderPowershell };
    for (const shell of SHELLS) {
      for (const descriptions of [true, false]) {
        assert.equal(render(shell, descriptions), renderers[shell](fixtureModel, { descriptions }), shell);
      }
    }
  });
});

describe('completion scripts', () => {
  const loadHints: Record<Shell, RegExp> = {
    bash: /^# bash completion for pilot-agent\.\n# Load it into the current shell: +source <\(pilot-agent completion bash\)\n/,
    zsh: /^#compdef pilot-agent\n# zsh completion for pilot-agent\.\n.*\n# +source <\(pilot-agent completion zsh\)\n/,
    fish: /^# fish completion for pilot-agent\.\n# Load it into the current shell: +pilot-agent completion fish \| source\n/,
    powershell: /^# powershell completion for pilot-agent\.\n# Load it .*pilot-agent completion powershell \| Out-String \| Invoke-Expression\n/,
  };
  const registrations: Record<Shell, string> = {
    bash: "complete -F _pilot_agent 'pilot-agent'\n",
    zsh: "compdef _pilot_agent 'pilot-agent'\n",
    fish: 'complete -c pilot-agent -f\n',
    powershell: "Register-ArgumentCompleter -Native -CommandName 'pilot-agent' -ScriptBlock {\n",
  };

  for (const shell of SHELLS) {
    describe(shell, () => {
      it('starts with how to load it and registers itself', () => {
        for (const descriptions of [true, false]) {
          const script = render(shell, descriptions);
          assert.match(script, loadHints[shell]);
          assert.ok(script.includes(registrations[shell]), `${shell} registration missing`);
        }
      });

      it('names every subcommand, flag and value', () => {
        const script = render(shell, false);
        for (const name of subcommandNames) assert.ok(script.includes(name), `subcommand ${name}`);
        for (const flag of flags) {
          // fish spells flags without dashes (`-l mesh-…`, `-s m`).
          const [long, short] = shell === 'fish'
            ? [`-l ${flag.long.slice(2)}`, flag.short && `-s ${flag.short.slice(1)}`]
            : [flag.long, flag.short];
          assert.ok(script.includes(long), `flag ${long}`);
          if (short) assert.ok(script.includes(short), `flag ${short}`);
        }
        for (const value of enumValues) {
          // zsh's `(a b)` actions escape the colon of `default:debug`.
          const spelled = shell === 'zsh' ? value.replace(/:/g, '\\:') : value;
          assert.ok(script.includes(spelled), `value ${spelled}`);
        }
      });

      it('has the descriptions, and none of them with descriptions off', () => {
        const withThem = render(shell, true);
        const without = render(shell, false);
        assert.ok(withThem.length > without.length);
        // Every description is there in some quoted form: check a quote-free piece of each.
        for (const text of descriptions) {
          const piece = /[A-Za-z][A-Za-z -]{6,}/.exec(text)?.[0] ?? text;
          assert.ok(withThem.includes(piece), `description piece ${JSON.stringify(piece)}`);
          assert.ok(!without.includes(piece), `description ${JSON.stringify(piece)} with descriptions off`);
        }
      });

      it('never lets a newline of a description through', () => {
        assert.ok(!render(shell, true).includes('second line that must not reach'));
      });

      for (const descriptions of [true, false]) {
        const name = descriptions ? shell : `${shell}-no-descriptions`;
        it(`matches testdata/${name}.golden`, () => {
          assertGolden(`cli/completion/testdata/${name}.golden`, render(shell, descriptions));
        });
      }
    });
  }

  it('names its functions after the program', () => {
    const model = { ...fixtureModel, name: 'my.agent' };
    assert.match(renderBash(model, { descriptions: true }), /\n_my_agent\(\) \{\n[\s\S]*\ncomplete -F _my_agent 'my\.agent'\n$/);
    assert.match(renderZsh(model, { descriptions: true }), /\n_my_agent\(\) \{\n[\s\S]*compdef _my_agent 'my\.agent'\n/);
    assert.match(renderFish(model, { descriptions: true }), /\nfunction __my_agent_state\n[\s\S]*complete -c my\.agent -f\n/);
  });
});
