// `--block-inbound-ipv6` in a pod namespace (IPv4 address only, plus the link-local fe80:: address
// the veth gets when it comes up), run as the init container runs it (the binary inside the pod):
// without it, TCP from the peer to the pod's link-local address reaches the app past the capture
// (the hole istio-iptables leaves); with it, that TCP is reset while IPv4 is still captured, ICMPv6
// and the pod's own IPv6 connections work, excluded ports stay open; then the machinery (second run,
// drift, --reconcile, --dry-run, roll-back, clean-up with and without the flag) for these rules.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { AgentError } from '../../../src/errors/agent-error.js';
import { applyRuleSet } from '../../../src/iptables/apply.js';
import { buildRuleSet } from '../../../src/iptables/builder.js';
import type { RuleSet } from '../../../src/iptables/rules.js';
import { optionsFromArgs } from '../../helpers/iptables-options.js';
import {
  connectFrom, createPod, linkLocalAddress, netnsSkip, PEER_V4, ping6From, POD_V4, PYTHON, startListener, type Pod,
} from '../../helpers/pod-netns.js';
import { cleanEnv, runCli, type CliResult } from '../../helpers/run-cli.js';

const python = spawnSync(PYTHON, ['--version']).status === 0;
const skip = netnsSkip || (!python && 'python3 is needed for the listeners');
const FLAGS = ['-b', '*', '-d', '15020,15021,15090', '-u', '1337', '-g', '1337'];
const APP_PORT = 8080;

/** The pod's ip6tables rules, without the comment lines (they carry a time). */
const save6 = (pod: Pod): string => pod.exec('ip6tables-save', []).stdout.split('\n').filter((l) => !l.startsWith('#')).join('\n');
const ours = (text: string): string[] => text.split('\n').filter((l) => l.includes('MESH_'));

function inPod(pod: Pod, env: Record<string, string> = {}): (...args: string[]) => Promise<CliResult> {
  return (...args) => runCli(args, { prefix: ['ip', 'netns', 'exec', pod.name], env: cleanEnv(env) });
}

describe('--block-inbound-ipv6: TCP over the pod\'s link-local IPv6 address', { skip }, () => {
  let pod: Pod;
  let podLL = '';
  let peerLL = '';
  let app: Awaited<ReturnType<typeof startListener>>;
  let capture: Awaited<ReturnType<typeof startListener>>;
  before(async () => {
    pod = createPod();
    podLL = await linkLocalAddress(pod, 'pod0');
    peerLL = await linkLocalAddress(pod.peer, 'peer0');
    // The app listens on every address of both families, as most do; 15006 stands in for the proxy.
    app = await startListener(pod, APP_PORT, { ipv6: true });
    capture = await startListener(pod, 15006);
  });
  after(() => pod?.close());

  /** Connects from the peer to the pod's link-local address (the scope names the peer's interface). */
  const overIpv6 = (port: number): ReturnType<typeof connectFrom> => connectFrom(pod.peer, `${podLL}%peer0`, port, 1);

  it('without the opt-in (Istio\'s rules): IPv4 is captured, IPv6 reaches the app directly', async () => {
    const r = await inPod(pod)('mesh-iptables', ...FLAGS);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(ours(save6(pod)), [], 'no ip6tables rule, as istio-iptables');

    const v4 = connectFrom(pod.peer, POD_V4, APP_PORT);
    assert.equal(v4.exitCode, 0, v4.stderr);
    assert.equal(v4.stdout, `ok ${POD_V4}:15006\n`, 'the stand-in proxy answers, not the app');
    const seen = await capture.next();
    assert.equal(seen.origdst, `${POD_V4}:${APP_PORT}`);
    assert.match(seen.peer, new RegExp(`^${PEER_V4.replaceAll('.', '\\.')}:\\d+$`));

    const v6 = overIpv6(APP_PORT);
    assert.equal(v6.exitCode, 0, `the hole: ${v6.stderr}`);
    const direct = await app.next();
    assert.equal(direct.local, `[${podLL}%pod0]:${APP_PORT}`, 'the app itself accepted it');
    assert.match(direct.peer, new RegExp(`^\\[${peerLL}%pod0\\]:\\d+$`));

    const clean = await inPod(pod)('mesh-clean-iptables');
    assert.equal(clean.code, 0, clean.stderr);
  });

  it('with it: IPv6 TCP is reset, IPv4 still captured, ICMPv6 and the pod\'s own IPv6 connections work, -d ports open', async () => {
    const r = await inPod(pod)('mesh-iptables', ...FLAGS, '--block-inbound-ipv6');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /mesh rules applied \(IPv4 and IPv6/);
    assert.match(save6(pod), /^-A INPUT -p tcp -j MESH_INBOUND_BLOCK$/m);

    const v6 = overIpv6(APP_PORT);
    assert.notEqual(v6.exitCode, 0, 'the app must not be reached over IPv6');
    assert.match(v6.stderr, /refused/i, 'a TCP reset, at once (not a time-out)');

    const v4 = connectFrom(pod.peer, POD_V4, APP_PORT);
    assert.equal(v4.exitCode, 0, v4.stderr);
    assert.equal(v4.stdout, `ok ${POD_V4}:15006\n`);
    assert.equal((await capture.next()).origdst, `${POD_V4}:${APP_PORT}`, 'IPv4 still captured');

    // Neighbour discovery and echo: ICMPv6 never enters the chain.
    const ping = ping6From(pod.peer, `${podLL}%peer0`);
    assert.equal(ping.exitCode, 0, ping.stderr);
    assert.equal(ping.stdout, `reply from ${podLL}%peer0\n`);

    // An excluded port (-d) is left to the app, as over IPv4.
    const metrics = await startListener(pod, 15090, { ipv6: true });
    const excluded = overIpv6(15090);
    assert.equal(excluded.exitCode, 0, excluded.stderr);
    assert.equal((await metrics.next()).local, `[${podLL}%pod0]:15090`);

    // The pod's own connection out over IPv6: the peer's answers are ESTABLISHED, not reset.
    const peerApp = await startListener(pod.peer, 9000, { ipv6: true });
    const out = connectFrom(pod, `${peerLL}%pod0`, 9000);
    assert.equal(out.exitCode, 0, out.stderr);
    assert.equal(out.stdout, `ok [${peerLL}%peer0]:9000\n`);
    assert.match((await peerApp.next()).peer, new RegExp(`^\\[${podLL}%peer0\\]:\\d+$`));
  });

  it('clean-up without the flag removes the chain and the INPUT jump: the hole is back', async () => {
    const r = await inPod(pod)('mesh-clean-iptables');
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(ours(save6(pod)), []);
    assert.doesNotMatch(save6(pod), /REJECT/);
    assert.equal(overIpv6(APP_PORT).exitCode, 0);
    await app.next();
  });
});

describe('--block-inbound-ipv6: the apply machinery holds for the block', { skip: netnsSkip }, () => {
  let pod: Pod;
  before(() => { pod = createPod(); });
  after(() => pod?.close());

  it('from MESH_BLOCK_INBOUND_IPV6: applied, a second run changes nothing, drift is named, --reconcile repairs', async () => {
    const agent = inPod(pod, { MESH_BLOCK_INBOUND_IPV6: 'true' });
    const first = await agent('mesh-iptables', ...FLAGS);
    assert.equal(first.code, 0, first.stderr);
    const applied = ours(save6(pod));
    assert.deepEqual(applied, [
      ':MESH_INBOUND_BLOCK - [0:0]',
      '-A INPUT -p tcp -j MESH_INBOUND_BLOCK',
      '-A MESH_INBOUND_BLOCK -i lo -p tcp -j RETURN',
      '-A MESH_INBOUND_BLOCK -p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN',
      '-A MESH_INBOUND_BLOCK -p tcp -m tcp --dport 15008 -j RETURN',
      '-A MESH_INBOUND_BLOCK -p tcp -m tcp --dport 15020 -j RETURN',
      '-A MESH_INBOUND_BLOCK -p tcp -m tcp --dport 15021 -j RETURN',
      '-A MESH_INBOUND_BLOCK -p tcp -m tcp --dport 15090 -j RETURN',
      '-A MESH_INBOUND_BLOCK -p tcp -j REJECT --reject-with tcp-reset',
    ]);

    const second = await agent('mesh-iptables', ...FLAGS);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /already in place: nothing to do/);
    assert.deepEqual(ours(save6(pod)), applied);

    pod.exec('ip6tables', ['-w', '-R', 'MESH_INBOUND_BLOCK', '4', '-p', 'tcp', '--dport', '15099', '-j', 'RETURN']);
    const drift = await agent('mesh-iptables', ...FLAGS);
    assert.equal(drift.code, 1);
    assert.match(drift.stderr, /^ipv6 table filter:$/m);
    assert.match(drift.stderr, /^ {2}- -A MESH_INBOUND_BLOCK -p tcp -m tcp --dport 15099 -j RETURN$/m);
    assert.match(drift.stderr, /^ {2}\+ -A MESH_INBOUND_BLOCK -p tcp -m tcp --dport 15020 -j RETURN$/m);
    const fixed = await agent('mesh-iptables', ...FLAGS, '--reconcile');
    assert.equal(fixed.code, 0, fixed.stderr);
    assert.deepEqual(ours(save6(pod)), applied);
  });

  it('--cleanup-only, without the flag or the variable, removes the chain and the jump', async () => {
    const r = await inPod(pod)('mesh-iptables', '--cleanup-only');
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(ours(save6(pod)), []);
    assert.deepEqual(ours(pod.exec('iptables-save', []).stdout), []);
  });

  it('--dry-run shows the block in an ip6tables section for this IPv4 pod, and says what it does', async () => {
    const r = await inPod(pod)('mesh-iptables', ...FLAGS, '--block-inbound-ipv6', '--dry-run');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^# Families: IPv4 only/m);
    assert.match(r.stdout, /^# IPv6 inbound \(--block-inbound-ipv6\): the pod gets no IPv6 capture, .*refused with a TCP reset/m);
    const v6 = r.stdout.split('# ip6tables-restore --noflush\n')[1];
    assert.ok(v6, r.stdout);
    assert.match(v6, /^\*filter\n-N MESH_INBOUND_BLOCK\n-I INPUT 1 -p tcp -j MESH_INBOUND_BLOCK\n/);
    assert.deepEqual(ours(save6(pod)), [], 'a dry run applies nothing');
  });

  it('a failure part-way rolls the block back with the IPv4 rules', async () => {
    const o = optionsFromArgs(['mesh-iptables', ...FLAGS, '--block-inbound-ipv6']);
    const good = buildRuleSet(o, { ipv6: false, dnsServersV4: [], dnsServersV6: [] });
    const set: RuleSet = { ...good, ipv4: [...good.ipv4, { table: 'nat', chain: 'MESH_OUTPUT', args: ['-p', 'tcp', '--dport', '99999', '-j', 'RETURN'] }] };
    const err = await applyRuleSet(pod.runner, set).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof AgentError, String(err));
    assert.match(err.message, /applying the IPv4 rules/);
    assert.match(err.message, /rolled back/);
    assert.deepEqual(ours(save6(pod)), []);
    assert.deepEqual(ours(pod.exec('iptables-save', []).stdout), []);
  });
});
