#!/usr/bin/env node
// Benchmark of applying and cleaning a full mesh rule set, in a network namespace of its own (never
// the host's rules). Needs root and a build (dist/).
//
//   node scripts/bench-iptables.mjs [--runs N] [--fixture]
//
// The rule set: the builder's output for a large configuration (TPROXY, all inbound ports, DNS
// capture, two uids and two gids, CIDR include and exclude lists, port lists, both families, policy
// routes); with --fixture, or when the builder cannot be loaded, one made from the shared fixtures
// (dns-uid-gid + the TPROXY mangle rules + generated CIDR rules). Each run: apply on a clean
// namespace, apply again (the no-op path: read and compare only), clean. Reported: median, p90 and
// min of each, and the commands one apply runs. The process measuring runs inside the namespace
// (`ip netns exec`), as the init container does, so no namespace hop is counted.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => join(root, 'dist', 'src', p);
const args = process.argv.slice(2);
const runs = Number(args[args.indexOf('--runs') + 1] ?? 0) || Number(process.env.BENCH_RUNS) || 20;

if (!args.includes('--inside')) {
  // The parent: make the namespace, run the measuring child in it, always delete it.
  if (process.getuid?.() !== 0) {
    console.log('bench-iptables: skipped (needs root for a network namespace)');
    process.exit(0);
  }
  if (!existsSync(dist('iptables/apply.js'))) {
    console.error('bench-iptables: build first (make build)');
    process.exit(1);
  }
  const ns = `pa-bench-${randomBytes(3).toString('hex')}`;
  const del = () => spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { del(); process.exit(130); });
  let status = 1;
  try {
    if (spawnSync('ip', ['netns', 'add', ns], { stdio: 'inherit' }).status !== 0) process.exit(1);
    spawnSync('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    status = spawnSync('ip', ['netns', 'exec', ns, process.execPath, fileURLToPath(import.meta.url), '--inside', ...args],
      { stdio: 'inherit', env: { ...process.env, BENCH_RUNS: String(runs) } }).status ?? 1;
  } finally {
    del();
  }
  process.exit(status);
}

// ---- inside the namespace
const { ExecaRunner } = await import(dist('exec/execa-runner.js'));
const { applyRuleSet, checkRuleSet, cleanMeshRules } = await import(dist('iptables/apply.js'));
const { parseRestore } = await import(dist('iptables/save-parse.js'));
const { toRestore } = await import(dist('iptables/rules.js'));
const { setScopeLevel } = await import(dist('log/logger.js'));
setScopeLevel('iptables', 'warn'); // one info line per apply would be measured too

async function builderSet() {
  const { validateIptablesOptions } = await import(dist('iptables/options.js'));
  const { buildRuleSet } = await import(dist('iptables/builder.js'));
  const o = validateIptablesOptions({
    proxyPort: '15001', inboundCapturePort: '15006', inboundTunnelPort: '15008', proxyUids: '1337,3', proxyGids: '1337,4',
    interceptionMode: 'TPROXY', tproxyMark: '1337', tproxyRouteTable: '133', inboundPorts: '*', localExcludePorts: '15090,15021,15020',
    outboundPortsExclude: '3306,5432', outboundPortsInclude: '', serviceCidrs: '10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fd00::/8',
    serviceExcludeCidrs: '', excludeInterfaces: 'eth1', virtInterfaces: '', ownerGroupsInclude: '*', ownerGroupsExclude: '',
    outboundIpv4LoopbackCidr: '127.0.0.1/32', redirectDns: true, captureAllDns: false, dropInvalid: true, dualStack: true,
    dryRun: false, dryRunFilePath: '', cleanupOnly: false, cniMode: false, forceApply: false, reconcile: false,
    runValidation: false, skipRuleApply: false, traceLogging: false, probePort: 15002, probeTimeoutMs: 5000, networkNamespace: '',
  });
  const set = buildRuleSet(o, { ipv6: true, dnsServersV4: ['10.96.0.10'], dnsServersV6: ['fd00:10:96::a'] });
  return { set, source: 'builder: -m TPROXY -b * -d 15090,15021,15020 -u 1337,3 -g 1337,4 -i 10/8,172.16/12,192.168/16,fd00::/8 -o 3306,5432 -c eth1 --redirect-dns --drop-invalid --dual-stack' };
}

function fixtureSet() {
  const dir = join(root, '..', 'shared', 'fixtures', 'iptables');
  const read = (f) => readFileSync(join(dir, f), 'utf8');
  const tproxyMangle = read('inbound-ports-wildcard-tproxy.v4.rules').split('COMMIT')[0] + 'COMMIT\n';
  const extra = (v6) => Array.from({ length: 8 }, (_, i) => v6
    ? `-I MESH_OUTPUT 2 -d fd00:${i + 1}::/32 -j MESH_REDIRECT\n-I MESH_OUTPUT 2 -d fd10:${i + 1}::/64 -j RETURN\n`
    : `-I MESH_OUTPUT 2 -d 10.${i + 1}.0.0/16 -j MESH_REDIRECT\n-I MESH_OUTPUT 2 -d 172.16.${i + 1}.0/24 -j RETURN\n`).join('');
  const withExtra = (text, v6) => text.replace(/COMMIT\n\*raw/, `${extra(v6)}COMMIT\n*raw`);
  const ipv4 = parseRestore(tproxyMangle + withExtra(read('dns-uid-gid.v4.rules'), false));
  const v6Mangle = tproxyMangle.replaceAll('127.0.0.1/32', '::1/128').replaceAll('127.0.0.6/32', '::6/128');
  const ipv6 = parseRestore(v6Mangle + withExtra(read('dns-uid-gid.v6.rules'), true));
  const routes = ['inet', 'inet6'].flatMap((f) => [
    { family: f === 'inet' ? 'ipv4' : 'ipv6', args: ['-f', f, 'rule', 'add', 'fwmark', '1337', 'lookup', '133'] },
    { family: f === 'inet' ? 'ipv4' : 'ipv6', args: ['-f', f, 'route', 'add', 'local', 'default', 'dev', 'lo', 'table', '133'] },
  ]);
  return { set: { ipv4, ipv6, routes }, source: 'fixtures: dns-uid-gid + TPROXY mangle + 16 CIDR rules per family' };
}

let chosen;
if (!args.includes('--fixture')) {
  try { chosen = await builderSet(); } catch (err) { console.log(`(builder not usable: ${err.message}; using the fixtures)`); }
}
chosen ??= fixtureSet();
const { set, source } = chosen;

/** Counts the commands one apply runs. */
class Counting {
  constructor(inner) { this.inner = inner; this.calls = []; }
  run(command, a, o) { this.calls.push(command); return this.inner.run(command, a, o); }
}

const runner = new ExecaRunner();
const count = (rules) => rules.length;
const cleanOpts = { ipv6: true, routes: { mark: 1337, table: 133 }, expected: set };
await cleanMeshRules(runner, cleanOpts);

const times = { apply: [], again: [], clean: [] };
let commands = [];
for (let i = 0; i < runs; i++) {
  const c = new Counting(runner);
  let t = process.hrtime.bigint();
  const outcome = await applyRuleSet(c, set);
  times.apply.push(Number(process.hrtime.bigint() - t) / 1e6);
  if (outcome !== 'applied') throw new Error(`apply #${i}: ${outcome}`);
  if (i === 0) {
    commands = c.calls;
    const check = await checkRuleSet(runner, set);
    for (const [f, r] of Object.entries(check.families)) if (r.state !== 'same') throw new Error(`${f}: ${r.state}`);
  }
  t = process.hrtime.bigint();
  const again = await applyRuleSet(runner, set);
  times.again.push(Number(process.hrtime.bigint() - t) / 1e6);
  if (again !== 'unchanged') throw new Error(`re-apply #${i}: ${again}`);
  t = process.hrtime.bigint();
  await cleanMeshRules(runner, cleanOpts);
  times.clean.push(Number(process.hrtime.bigint() - t) / 1e6);
}

const stat = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return `median ${q(0.5).toFixed(1)} ms  p90 ${q(0.9).toFixed(1)} ms  min ${s[0].toFixed(1)} ms`;
};
const restoreBytes = toRestore(set.ipv4).length + (set.ipv6 ? toRestore(set.ipv6).length : 0);
console.log(`== iptables apply (${runs} runs, in a network namespace)`);
console.log(`rule set: ${source}`);
console.log(`          ${count(set.ipv4)} IPv4 + ${set.ipv6 ? count(set.ipv6) : 0} IPv6 rules, ${set.routes.length} policy route commands, ${restoreBytes} bytes of restore input`);
console.log(`one apply runs: ${commands.join(', ')}`);
console.log(`apply (clean namespace)        ${stat(times.apply)}`);
console.log(`apply again (unchanged: check) ${stat(times.again)}`);
console.log(`clean                          ${stat(times.clean)}`);
