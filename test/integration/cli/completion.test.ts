// The completion scripts the real binary prints, loaded in real shells the way users load them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { binPath } from '../../helpers/repo.js';

const agent = `${process.execPath} ${binPath}`;

/**
 * Loads the script with `source <(pilot-agent completion bash)` and completes `line`, split into
 * COMP_WORDS as bash splits it (also at the `:` and `=` of COMP_WORDBREAKS).
 */
function bashComplete(line: string): string[] {
  const words = line.split(/(?<=[:=])|(?=[:=])| /);
  const program = `source <(${agent} completion bash --no-descriptions) || exit 9
    COMP_LINE=$1; shift; COMP_POINT=\${#COMP_LINE}; COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1))
    _pilot_agent; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = spawnSync('bash', ['--norc', '--noprofile', '-c', program, 'bash', line, ...words], { encoding: 'utf8' });
  assert.equal(r.stderr, '');
  assert.equal(r.status, 0);
  return r.stdout.split('\n').filter((l) => l !== '').sort();
}

describe('completion scripts of the real command tree', () => {
  it('bash: source <(pilot-agent completion bash) registers the completer', () => {
    const r = spawnSync('bash', ['--norc', '--noprofile', '-c', `source <(${agent} completion bash) && complete -p pilot-agent`], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^complete .*-F _pilot_agent pilot-agent$/m);
  });

  const cases: [string, string, string[]][] = [
    ['commands', 'pilot-agent ', ['completion', 'mesh-clean-iptables', 'mesh-iptables', 'proxy', 'request', 'version', 'wait']],
    ['shells', 'pilot-agent completion ', ['bash', 'fish', 'powershell', 'zsh']],
    ['-m values', 'pilot-agent mesh-iptables -m ', ['REDIRECT', 'TPROXY']],
    ['--flag=value', 'pilot-agent mesh-iptables --mesh-inbound-interception-mode=T', ['TPROXY']],
    ['-o values', 'pilot-agent version -o ', ['json', 'yaml']],
    ['proxy types', 'pilot-agent proxy ', ['router', 'sidecar']],
    ['--proxyLogLevel values', 'pilot-agent proxy --proxyLogLevel w', ['warn', 'warning']],
    // bash replaces only the part after the ':' it split at.
    ['log levels of a scope', 'pilot-agent wait --log_output_level dns:', ['debug', 'error', 'fatal', 'info', 'none', 'warn']],
    ['flags by prefix, with the global ones', 'pilot-agent wait --', [
      '--log_as_json', '--log_caller', '--log_output_level', '--log_stacktrace_level', '--log_target',
      '--periodMillis', '--requestTimeoutMillis', '--timeoutSeconds', '--url', '--vklog']],
    ['long flags by prefix', 'pilot-agent mesh-iptables --mesh-inbound-p', ['--mesh-inbound-ports']],
    ['boolean flags by prefix', 'pilot-agent mesh-iptables --bl', ['--block-inbound-ipv6']],
  ];
  for (const [name, line, expected] of cases) {
    it(`bash completes ${name}`, () => assert.deepEqual(bashComplete(line), expected.sort()));
  }

  it('zsh loads it after compinit', (t) => {
    if (spawnSync('zsh', ['-c', 'exit 0']).status !== 0) return t.skip('zsh not installed (make deps installs it)');
    const r = spawnSync('zsh', ['-f', '-c', `autoload -U compinit && compinit -u && source <(${agent} completion zsh) && print -r -- $_comps[pilot-agent]`],
      { encoding: 'utf8', env: { ...process.env, HOME: '/tmp' } });
    assert.equal(r.stderr, '');
    assert.equal(r.status, 0);
    assert.match(r.stdout, /_pilot_agent/);
  });

  it('fish loads it and completes -m', (t) => {
    if (spawnSync('fish', ['-c', 'exit 0']).status !== 0) return t.skip('fish not installed (make deps installs it)');
    const r = spawnSync('fish', ['--no-config', '-c', `${agent} completion fish | source; complete -C "pilot-agent mesh-iptables -m "`],
      { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.split('\n').filter(Boolean).map((l) => l.split('\t')[0]).sort(), ['REDIRECT', 'TPROXY']);
  });

  it('powershell: registers a native argument completer for pilot-agent', () => {
    const r = spawnSync(process.execPath, [binPath, 'completion', 'powershell'], { encoding: 'utf8' });
    assert.equal(r.status, 0);
    assert.match(r.stdout, /Register-ArgumentCompleter -Native -CommandName '?pilot-agent'?/);
    assert.ok(r.stdout.includes("'REDIRECT'") && r.stdout.includes("'TPROXY'"));
  });
});
