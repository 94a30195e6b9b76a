// Every command and flag of spec 4.2–4.6 is in --help, with its short form and default.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runCli } from '../../helpers/run-cli.js';

/** [flag, short, default as help shows it] */
type Flag = [string, string?, string?];

const COMMON: Flag[] = [
  ['--log_as_json'], ['--log_caller', undefined, '""'], ['--log_output_level', undefined, '""'],
  ['--log_stacktrace_level', undefined, '"default:none"'], ['--log_target', undefined, '["stdout"]'], ['--vklog', undefined, '0'],
];
const CLEAN: Flag[] = [
  ['--capture-all-dns'], ['--dry-run', '-n'], ['--mesh-inbound-interception-mode', '-m'], ['--mesh-inbound-tproxy-mark', '-t'],
  ['--proxy-gid', '-g'], ['--proxy-uid', '-u'], ['--redirect-dns'],
];
const IPTABLES: Flag[] = [
  ['--capture-all-dns'], ['--cleanup-only'], ['--cni-mode'], ['--drop-invalid'], ['--dry-run', '-n'], ['--dual-stack'],
  ['--block-inbound-ipv6'], ['--proxy-port', '-p', '"15001"'], ['--inbound-capture-port', '-z', '"15006"'], ['--inbound-tunnel-port', '-e', '"15008"'],
  ['--iptables-probe-port', undefined, '15002'], ['--iptables-trace-logging'], ['--mesh-exclude-interfaces', '-c'],
  ['--mesh-inbound-interception-mode', '-m'], ['--mesh-inbound-ports', '-b'], ['--mesh-inbound-tproxy-mark', '-t', '"1337"'],
  ['--mesh-inbound-tproxy-route-table', '-r', '"133"'], ['--mesh-local-exclude-ports', '-d'],
  ['--mesh-local-outbound-ports-exclude', '-o'], ['--mesh-outbound-ports', '-q'], ['--mesh-service-cidr', '-i'],
  ['--mesh-service-exclude-cidr', '-x'], ['--virt-interfaces', '-k'], ['--network-namespace'],
  ['--probe-timeout', undefined, '5s'], ['--proxy-gid', '-g'], ['--proxy-uid', '-u'], ['--force-apply'], ['--reconcile'],
  ['--redirect-dns'], ['--run-validation'], ['--skip-rule-apply'],
];
const PROXY: Flag[] = [
  ['--concurrency', undefined, '0'], ['--domain'], ['--meshConfig', undefined, '"./etc/mesh/config/mesh"'], ['--outlierLogPath'],
  ['--profiling'], ['--proxyComponentLogLevel'], ['--proxyLogLevel', undefined, '"warning,misc:error"'],
  ['--serviceCluster', undefined, '"mesh-proxy"'], ['--stsPort', undefined, '0'], ['--templateFile'], ['--tokenManagerPlugin'],
];
const WAIT: Flag[] = [
  ['--periodMillis', undefined, '500'], ['--requestTimeoutMillis', undefined, '500'], ['--timeoutSeconds', undefined, '60'],
  ['--url', undefined, '"https://:15021/healthz/ready"'],
];
const REQUEST: Flag[] = [['--debug-port', undefined, '15000']];
const VERSION: Flag[] = [['--output', '-o', '""'], ['--short', '-s', 'true']];
const COMPLETION: Flag[] = [['--no-descriptions']];

function assertFlags(help: string, flags: Flag[]): void {
  for (const [long, short, def] of flags) {
    const line = help.split('\n').find((l) => new RegExp(`^\\s+${short ? `${short}, ` : ''}${long}[ ,]|^\\s+${short ? `${short}, ` : ''}${long}$`).test(l));
    assert.ok(line, `help lists ${short ? `${short}, ` : ''}${long}:\n${help}`);
    if (def) {
      const start = help.indexOf(line);
      const entry = help.slice(start, help.indexOf('\n  -', start + 1) >>> 0);
      assert.ok(entry.replace(/\s+/g, ' ').includes(`(default: ${def})`), `${long} shows default ${def}: ${entry}`);
    }
  }
}

describe('--help', () => {
  it('lists every command at the top level, also with no arguments at all', async () => {
    for (const args of [['--help'], [], ['help']]) {
      const r = await runCli(args);
      assert.equal(r.code, 0);
      for (const c of ['completion', 'mesh-clean-iptables', 'mesh-iptables', 'proxy', 'request', 'version', 'wait']) {
        assert.match(r.stdout, new RegExp(`^  ${c}\\b`, 'm'), `${c} in ${args.join(' ')}`);
      }
      assertFlags(r.stdout, COMMON);
    }
  });

  const commands: [string[], Flag[]][] = [
    [['mesh-iptables'], IPTABLES], [['mesh-clean-iptables'], CLEAN], [['proxy'], PROXY], [['wait'], WAIT],
    [['request'], REQUEST], [['version'], VERSION], [['completion', 'bash'], COMPLETION], [['completion', 'zsh'], COMPLETION],
    [['completion', 'fish'], COMPLETION], [['completion', 'powershell'], COMPLETION],
  ];
  for (const [command, flags] of commands) {
    it(`${command.join(' ')} --help lists its flags and the common ones`, async () => {
      const r = await runCli([...command, '--help']);
      assert.equal(r.code, 0, r.stderr);
      assertFlags(r.stdout, flags);
      assertFlags(r.stdout, COMMON);
      const viaHelp = await runCli(['help', ...command]);
      assert.equal(viaHelp.stdout, r.stdout);
    });
  }

  it('completion lists the four shells', async () => {
    const r = await runCli(['completion']);
    assert.equal(r.code, 0);
    for (const shell of ['bash', 'fish', 'powershell', 'zsh']) assert.match(r.stdout, new RegExp(`^  ${shell}\\b`, 'm'));
  });

  it('proxy --help says where files are read', async () => {
    const r = await runCli(['proxy', '--help']);
    assert.match(r.stdout, /\.\/etc\/mesh\/resources/);
    assert.match(r.stdout, /\.\/etc\/mesh\/pod\/labels/);
  });
});
