// The completion scripts in the real shells. bash is always there: its completion function is run
// with COMP_WORDS split the way bash splits them (at COMP_WORDBREAKS such as '=' and ':'). zsh and
// fish run when installed: zsh completes typed lines on a pseudo-terminal, fish through `complete -C`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { renderCompletion, type Shell } from '../../../src/cli/completion/index.js';
import { fixtureModel } from './fixture-model.js';

let dir = '';
const scripts = new Map<string, string>();

/** The script of `shell` written to the temp dir, once. */
function scriptFile(shell: Shell, descriptions: boolean): string {
  const name = `${shell}-${descriptions}`;
  let file = scripts.get(name);
  if (!file) {
    file = join(dir, name);
    writeFileSync(file, renderCompletion(shell, fixtureModel, { descriptions }));
    scripts.set(name, file);
  }
  return file;
}

function run(
  cmd: string, args: readonly string[], cwd = dir, extraEnv: Record<string, string> = {},
): { stdout: string; stderr: string; status: number | null } {
  // Own config and data dirs so no shell reads or writes the user's.
  const env = {
    ...process.env, HOME: dir, XDG_CONFIG_HOME: join(dir, 'config'), XDG_DATA_HOME: join(dir, 'data'), ...extraEnv,
  };
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 30_000 });
  if (r.error) throw r.error;
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

const installed = (shell: string): boolean => spawnSync(shell, ['-c', 'exit 0']).status === 0;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'pilot-agent-completion-'));
  mkdirSync(join(dir, 'files'));
  for (const f of ['bootstrap.tmpl', 'bootstrap.yaml', 'other.json']) writeFileSync(join(dir, 'files', f), '');
  mkdirSync(join(dir, 'files', 'boot.d'));
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface BashCase {
  /** COMP_WORDS, as bash splits the line: the last one is the word at the cursor. */
  readonly words: readonly string[];
  /** COMP_LINE (cursor at its end); default: the words joined by spaces. */
  readonly line?: string;
  readonly wordbreaks?: string;
  readonly descriptions?: boolean;
  readonly cwd?: string;
  /** Terminal width, which bounds the descriptions (default 200). */
  readonly columns?: number;
}

/** Runs the bash completion function as `complete -F` would, returning COMPREPLY. */
function bashComplete(c: BashCase): string[] {
  const line = c.line ?? c.words.join(' ');
  const setBreaks = c.wordbreaks === undefined ? '' : 'COMP_WORDBREAKS=$1; ';
  const program = `source "$1"; shift; ${setBreaks}shift; COMP_LINE=$1; COMP_POINT=\${#COMP_LINE}; shift; `
    + 'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _pilot_agent; '
    + '((${#COMPREPLY[@]} == 0)) || printf "%s\\n" "${COMPREPLY[@]}"';
  const r = run('bash', [
    '--norc', '--noprofile', '-c', program, 'bash',
    scriptFile('bash', c.descriptions ?? false), c.wordbreaks ?? '', line, ...c.words,
  ], c.cwd, { COLUMNS: String(c.columns ?? 200) });
  assert.equal(r.stderr, '');
  assert.equal(r.status, 0);
  return r.stdout === '' ? [] : r.stdout.replace(/\n$/, '').split('\n');
}

const sorted = (words: readonly string[]): string[] => [...words].sort();

describe('bash completion', () => {
  const expect = (c: BashCase, expected: readonly string[]): void => {
    assert.deepEqual(sorted(bashComplete(c)), sorted(expected));
  };

  it('is registered for the program', () => {
    const r = run('bash', ['--norc', '--noprofile', '-c', 'source "$1" && complete -p pilot-agent', 'bash', scriptFile('bash', true)]);
    assert.equal(r.stderr, '');
    assert.equal(r.stdout, 'complete -F _pilot_agent pilot-agent\n');
  });

  it('loads from a process substitution', () => {
    const r = run('bash', [
      '--norc', '--noprofile', '-c', 'source <(cat "$1") && complete -p pilot-agent', 'bash', scriptFile('bash', false),
    ]);
    assert.equal(r.stdout, 'complete -F _pilot_agent pilot-agent\n');
  });

  it('completes the top-level subcommands', () => {
    expect({ words: ['pilot-agent', ''] }, ['completion', 'mesh-iptables', 'proxy', 'request', 'version', 'wait']);
  });

  it('completes nested subcommands', () => {
    expect({ words: ['pilot-agent', 'completion', ''] }, ['bash', 'fish', 'powershell', 'zsh']);
    expect({ words: ['pilot-agent', 'completion', 'z'] }, ['zsh']);
  });

  it('offers nothing after a leaf command or a positional argument', () => {
    expect({ words: ['pilot-agent', 'completion', 'bash', ''] }, []);
    expect({ words: ['pilot-agent', 'proxy', 'sidecar', ''] }, []);
    expect({ words: ['pilot-agent', 'nonsense', ''] }, []);
  });

  it('completes the flags of a command and the global ones', () => {
    expect({ words: ['pilot-agent', 'mesh-iptables', '-'] }, [
      '--mesh-inbound-interception-mode', '-m', '--envoy-port', '-p', '--dry-run', '-n', '--help', '-h',
      '--log_output_level', '--log_as_json', '--log_target',
    ]);
    expect({ words: ['pilot-agent', 'version', '--'] }, [
      '--output', '--short', '--help', '--log_output_level', '--log_as_json', '--log_target',
    ]);
    expect({ words: ['pilot-agent', '--'] }, ['--log_output_level', '--log_as_json', '--log_target', '--help']);
  });

  it('filters by the typed prefix', () => {
    expect({ words: ['pilot-agent', 'w'] }, ['wait']);
    expect({ words: ['pilot-agent', 'mesh-iptables', '--log_'] }, ['--log_output_level', '--log_as_json', '--log_target']);
    expect({ words: ['pilot-agent', 'request', 'P'] }, ['POST', 'PUT']);
    expect({ words: ['pilot-agent', 'x'] }, []);
  });

  it('completes enumerated values after a flag', () => {
    expect({ words: ['pilot-agent', 'mesh-iptables', '-m', ''] }, ['REDIRECT', 'TPROXY']);
    expect({ words: ['pilot-agent', 'mesh-iptables', '--mesh-inbound-interception-mode', 'R'] }, ['REDIRECT']);
    expect({ words: ['pilot-agent', 'version', '-o', ''] }, ['json', 'yaml']);
    // A flag without enumerated values: nothing to offer, not the subcommands.
    expect({ words: ['pilot-agent', 'wait', '--timeoutSeconds', ''] }, []);
  });

  it('completes --flag=value, replacing only what follows the "="', () => {
    // bash splits "--mesh-inbound-interception-mode=T" at the '=' (it is in COMP_WORDBREAKS).
    expect({
      words: ['pilot-agent', 'mesh-iptables', '--mesh-inbound-interception-mode', '=', 'T'],
      line: 'pilot-agent mesh-iptables --mesh-inbound-interception-mode=T',
    }, ['TPROXY']);
    expect({
      words: ['pilot-agent', 'mesh-iptables', '--mesh-inbound-interception-mode', '='],
      line: 'pilot-agent mesh-iptables --mesh-inbound-interception-mode=',
    }, ['REDIRECT', 'TPROXY']);
  });

  it('completes values containing ":" whatever COMP_WORDBREAKS says', () => {
    // With the default COMP_WORDBREAKS, bash splits "default:d" and replaces only the "d".
    expect({
      words: ['pilot-agent', 'proxy', '--log_output_level', 'default', ':', 'd'],
      line: 'pilot-agent proxy --log_output_level default:d',
    }, ['debug']);
    expect({
      words: ['pilot-agent', 'proxy', '--log_output_level', 'default', ':'],
      line: 'pilot-agent proxy --log_output_level default:',
    }, ['debug', 'info', 'warn', 'error', 'none']);
    expect({
      words: ['pilot-agent', 'proxy', '--log_output_level', '=', 'default', ':', 'e'],
      line: 'pilot-agent proxy --log_output_level=default:e',
    }, ['error']);
    // Without ':' and '=' in COMP_WORDBREAKS the words stay whole, and so do the candidates.
    expect({
      words: ['pilot-agent', 'proxy', '--log_output_level=default:e'],
      wordbreaks: ' \t\n"\'><;|&(',
    }, ['--log_output_level=default:error']);
    expect({
      words: ['pilot-agent', 'proxy', '--log_output_level', 'default:w'],
      wordbreaks: ' \t\n"\'><;|&(',
    }, ['default:warn']);
  });

  it('skips global flags and their values before a subcommand', () => {
    expect({ words: ['pilot-agent', '--log_target', 'x', '--log_as_json', 'completion', 'f'] }, ['fish']);
    // "completion" is the value of --log_target here, not the subcommand.
    expect({ words: ['pilot-agent', '--log_target', 'completion', 'v'] }, ['version']);
  });

  it('completes enumerated positional arguments, once', () => {
    expect({ words: ['pilot-agent', 'proxy', ''] }, ['router', 'sidecar']);
    expect({ words: ['pilot-agent', 'proxy', '--proxyLogLevel', 'debug', 's'] }, ['sidecar']);
    expect({ words: ['pilot-agent', 'request', 'GET', ''] }, []);
  });

  it('completes file names for a file flag, in both forms', () => {
    const cwd = join(dir, 'files');
    const files = ['boot.d', 'bootstrap.tmpl', 'bootstrap.yaml'];
    expect({ words: ['pilot-agent', 'proxy', '--templateFile', 'boot'], cwd }, files);
    expect({
      words: ['pilot-agent', 'proxy', '--templateFile', '=', 'boot'],
      line: 'pilot-agent proxy --templateFile=boot', cwd,
    }, files);
    expect({ words: ['pilot-agent', 'proxy', '--templateFile', 'o'], cwd }, ['other.json']);
  });

  it('shows descriptions only when more than one candidate matches', () => {
    expect({ words: ['pilot-agent', 'completion', ''], descriptions: true }, [
      'bash  (Generate the autocompletion script for bash.)',
      'fish  (Generate the autocompletion script for fish.)',
      'powershell  (Generate the autocompletion script for powershell.)',
      'zsh  (Generate the autocompletion script for zsh.)',
    ]);
    expect({ words: ['pilot-agent', 'completion', 'p'], descriptions: true }, ['powershell']);
    expect({ words: ['pilot-agent', 'version', '--o'], descriptions: true }, ['--output']);
    // Values have no descriptions.
    expect({ words: ['pilot-agent', 'version', '-o', ''], descriptions: true }, ['json', 'yaml']);
  });

  it('keeps descriptions with quotes, $ and backticks literal', () => {
    expect({ words: ['pilot-agent', ''], descriptions: true }, [
      'completion  (Generate the autocompletion script for the specified shell)',
      'mesh-iptables  (Set up iptables rules: `redirect` traffic [to the sidecar] for $POD_NAME)',
      'proxy  (XDS proxy agent)',
      'request  (Makes an HTTP request to the Envoy admin API: \'quoted\' & "double" | <redirect> ; # \u2019smart\u2019)',
      'version  (Prints out build version information)',
      'wait  (Waits until the Envoy proxy is ready)',
    ]);
  });

  it('cuts descriptions to the terminal width', () => {
    expect({ words: ['pilot-agent', 'm'], descriptions: true, columns: 40 }, ['mesh-iptables']);
    const lines = bashComplete({ words: ['pilot-agent', 'mesh-iptables', '--log'], descriptions: true, columns: 50 });
    assert.deepEqual(sorted(lines), [
      '--log_as_json  (Whether to format output as J...)',
      '--log_output_level  (Comma-separated minimum ...)',
      '--log_target  (The set of paths where to outp...)',
    ]);
    for (const line of lines) assert.ok(line.length <= 50, line);
  });
});

/**
 * Drives an interactive zsh on a pseudo-terminal (zsh's own zpty module): TAB runs a widget that
 * completes the line, appends "--" to the output file and clears the line, while a `compadd`
 * wrapper appends every match zsh's completion functions add. Args: SCRIPT OUT DUMP LINE...
 */
const ZSH_DRIVER = `zmodload zsh/zpty || exit 2
local script=$1 out=$2 dump=$3 line i junk
shift 3
zpty z zsh -f -i
zpty -w z "PS1=''; autoload -U compinit; compinit -u -d \${(q)dump}; source \${(q)script}"
zpty -w z "compadd() { local -a m; builtin compadd -O m \\"\\$@\\"; (( \\$#m )) && print -rl -- \\$m >> \${(q)out}; builtin compadd \\"\\$@\\"; }"
zpty -w z "capture() { zle complete-word; print -r -- -- >> \${(q)out}; BUFFER=''; }; zle -N capture; bindkey '^I' capture"
for line in "$@"; do zpty -w -n z "$line"$'\\t'; done
zpty -w z "print -r -- END >> \${(q)out}"
for i in {1..400}; do
  [[ -f $out && $(tail -n 1 $out) == END ]] && break
  zpty -r -t z junk 2>/dev/null
  sleep 0.05
done
zpty -d z
`;

describe('zsh completion', () => {
  for (const descriptions of [true, false]) {
    it(`loads and registers${descriptions ? '' : ' without descriptions'}`, (t) => {
      if (!installed('zsh')) {
        t.skip('zsh not installed');
        return;
      }
      const r = run('zsh', [
        '-f', '-c', 'autoload -U compinit && compinit -u -d "$2" && source "$1" && print -r -- $_comps[pilot-agent]',
        'zsh', scriptFile('zsh', descriptions), join(dir, 'zcompdump'),
      ]);
      assert.equal(r.stderr, '');
      assert.equal(r.status, 0);
      assert.equal(r.stdout, '_pilot_agent\n');
    });
  }

  const cases: readonly [string, readonly string[]][] = [
    ['pilot-agent ', ['completion', 'mesh-iptables', 'proxy', 'request', 'version', 'wait']],
    ['pilot-agent completion ', ['bash', 'fish', 'powershell', 'zsh']],
    ['pilot-agent mesh-iptables -m ', ['REDIRECT', 'TPROXY']],
    ['pilot-agent mesh-iptables --mesh-inbound-interception-mode=T', ['TPROXY']],
    ['pilot-agent proxy --log_output_level default:d', ['default:debug']],
    ['pilot-agent version -o ', ['json', 'yaml']],
    ['pilot-agent --log_target completion v', ['version']],
    ['pilot-agent proxy ', ['router', 'sidecar']],
    ['pilot-agent request P', ['POST', 'PUT']],
    ['pilot-agent version --', ['--help', '--log_as_json', '--log_output_level', '--log_target', '--output', '--short']],
    ['pilot-agent completion bash --', ['--help', '--log_as_json', '--log_output_level', '--log_target', '--no-descriptions']],
  ];
  // One zsh session completes every line; each test checks its own.
  const results = new Map<boolean, string[][]>();
  const zshComplete = (descriptions: boolean, index: number): string[] => {
    let groups = results.get(descriptions);
    if (!groups) {
      const driver = join(dir, 'zsh-driver');
      const out = join(dir, `zsh-out-${descriptions}`);
      writeFileSync(driver, ZSH_DRIVER);
      const r = run('zsh', [
        '-f', driver, scriptFile('zsh', descriptions), out, join(dir, `zdump-${descriptions}`), ...cases.map(([l]) => l),
      ]);
      assert.equal(r.status, 0, r.stderr);
      const lines = readFileSync(out, 'utf8').split('\n');
      assert.equal(lines.at(-2), 'END', 'the zsh session did not finish');
      groups = lines.slice(0, -2).join('\n').split(/^--$/m).map((g) => [...new Set(g.split('\n').filter(Boolean))]);
      results.set(descriptions, groups);
    }
    return groups[index] ?? [];
  };

  for (const descriptions of [true, false]) {
    cases.forEach(([line, expected], index) => {
      it(`completes ${JSON.stringify(line)}${descriptions ? '' : ' without descriptions'}`, (t) => {
        if (!installed('zsh')) {
          t.skip('zsh not installed');
          return;
        }
        assert.deepEqual(sorted(zshComplete(descriptions, index)), sorted(expected));
      });
    });
  }
});

describe('fish completion', () => {
  const fishComplete = (line: string, descriptions = false): string[] => {
    const r = run('fish', ['--no-config', '-c', 'source $argv[1]; complete -C $argv[2]', scriptFile('fish', descriptions), line]);
    assert.equal(r.stderr, '');
    assert.equal(r.status, 0);
    return r.stdout === '' ? [] : r.stdout.replace(/\n$/, '').split('\n');
  };
  const cases: readonly [string, readonly string[]][] = [
    ['pilot-agent mesh-iptables -m ', ['REDIRECT', 'TPROXY']],
    ['pilot-agent ', ['completion', 'mesh-iptables', 'proxy', 'request', 'version', 'wait']],
    ['pilot-agent completion ', ['bash', 'fish', 'powershell', 'zsh']],
    ['pilot-agent completion bash ', []],
    ['pilot-agent mesh-iptables --mesh-inbound-interception-mode=T', ['--mesh-inbound-interception-mode=TPROXY']],
    ['pilot-agent proxy --log_output_level default:d', ['default:debug']],
    ['pilot-agent version -o ', ['json', 'yaml']],
    ['pilot-agent proxy ', ['router', 'sidecar']],
    ['pilot-agent proxy sidecar ', []],
    ['pilot-agent --log_target completion v', ['version']],
    ['pilot-agent version --', ['--help', '--log_as_json', '--log_output_level', '--log_target', '--output', '--short']],
  ];
  for (const [line, expected] of cases) {
    it(`completes ${JSON.stringify(line)}`, (t) => {
      if (!installed('fish')) {
        t.skip('fish not installed');
        return;
      }
      const words = fishComplete(line).map((l) => l.split('\t')[0] ?? '');
      assert.deepEqual(sorted(words), sorted(expected));
    });
  }

  it('shows descriptions only when asked', (t) => {
    if (!installed('fish')) {
      t.skip('fish not installed');
      return;
    }
    assert.deepEqual(fishComplete('pilot-agent completion z', true), ['zsh\tGenerate the autocompletion script for zsh.']);
    assert.deepEqual(fishComplete('pilot-agent completion z', false), ['zsh']);
  });
});
