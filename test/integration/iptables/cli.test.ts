// The commands end to end, as the init container runs them: `pilot-agent mesh-iptables` in a pod
// namespace (the binary run inside it), then again (no-op), drift, --reconcile, --run-validation,
// and `mesh-clean-iptables`, read back with iptables-save.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { createPod, netnsSkip, POD_V4, type Pod } from '../../helpers/pod-netns.js';
import { cleanEnv, runCli, type CliResult } from '../../helpers/run-cli.js';

describe('mesh-iptables and mesh-clean-iptables (binary, in a pod namespace)', { skip: netnsSkip }, () => {
  let pod: Pod;
  before(() => { pod = createPod(); });
  after(() => pod?.close());

  const agent = (...args: string[]): Promise<CliResult> =>
    runCli(args, { prefix: ['ip', 'netns', 'exec', pod.name], env: cleanEnv() });
  const save = (): string => pod.exec('iptables-save', []).stdout;
  const meshLines = (text: string): string[] => text.split('\n').filter((l) => l.includes('MESH_'));

  it('applies, then a second run changes nothing', async () => {
    pod.exec('iptables', ['-t', 'filter', '-A', 'OUTPUT', '-p', 'udp', '--dport', '9999', '-j', 'ACCEPT']);
    const first = await agent('mesh-iptables', '-i', '*', '-b', '*', '-d', '15020,15021', '-u', '1337', '-g', '1337');
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /mesh rules applied \(IPv4/);
    const applied = save();
    assert.match(applied, /^-A MESH_OUTPUT -j MESH_REDIRECT$/m);
    assert.match(applied, /^-A MESH_INBOUND -p tcp -m tcp --dport 15020 -j RETURN$/m);
    const second = await agent('mesh-iptables', '-i', '*', '-b', '*', '-d', '15020,15021', '-u', '1337', '-g', '1337');
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /already in place: nothing to do/);
    assert.deepEqual(meshLines(save()), meshLines(applied));
  });

  it('fails on drift naming the rule, and --reconcile repairs it', async () => {
    pod.exec('iptables', ['-t', 'nat', '-R', 'MESH_OUTPUT', '1', '-o', 'lo', '-s', '127.0.0.7/32', '-j', 'RETURN']);
    const drift = await agent('mesh-iptables', '-i', '*', '-b', '*', '-d', '15020,15021', '-u', '1337', '-g', '1337');
    assert.equal(drift.code, 1);
    assert.match(drift.stderr, /127\.0\.0\.7/);
    assert.match(drift.stderr, /127\.0\.0\.6/);
    const fixed = await agent('mesh-iptables', '-i', '*', '-b', '*', '-d', '15020,15021', '-u', '1337', '-g', '1337', '--reconcile');
    assert.equal(fixed.code, 0, fixed.stderr);
    assert.doesNotMatch(save(), /127\.0\.0\.7/);
    assert.match(save(), /^-A MESH_OUTPUT -s 127\.0\.0\.6\/32 -o lo -j RETURN$/m);
  });

  it('--run-validation passes with the rules, and exits 126 without them', async () => {
    const ok = await agent('mesh-iptables', '-i', '*', '-b', '*', '-d', '15020,15021', '-u', '1337', '-g', '1337', '--run-validation', '--probe-timeout', '2s');
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /validation passed/);
    const clean = await agent('mesh-clean-iptables');
    assert.equal(clean.code, 0, clean.stderr);
    const without = await agent('mesh-iptables', '--skip-rule-apply', '-i', '*', '--run-validation', '--probe-timeout', '1s');
    assert.equal(without.code, 126, without.stderr);
  });

  it('mesh-clean-iptables removes every mesh rule and leaves the others; twice is fine', async () => {
    const apply = await agent('mesh-iptables', '-i', '*', '-b', '*', '-m', 'TPROXY', '-u', '1337', '-g', '1337');
    assert.equal(apply.code, 0, apply.stderr);
    assert.match(pod.exec('ip', ['rule']).stdout, /fwmark 0x539 lookup 133/);
    for (let i = 0; i < 2; i++) {
      const r = await agent('mesh-clean-iptables', '-m', 'TPROXY');
      assert.equal(r.code, 0, r.stderr);
    }
    const after = save();
    assert.deepEqual(meshLines(after), []);
    assert.match(after, /^-A OUTPUT -p udp -m udp --dport 9999 -j ACCEPT$/m);
    assert.doesNotMatch(after, /CONNMARK|TPROXY|MARK --set/);
    assert.doesNotMatch(pod.exec('ip', ['rule']).stdout, /lookup 133/);
  });

  it('exits 1 naming the problem when iptables is not there', async () => {
    const ip = spawnSync('sh', ['-c', 'command -v ip'], { encoding: 'utf8' }).stdout.trim();
    const r = await runCli(['mesh-iptables', '-i', '*'], { prefix: [ip, 'netns', 'exec', pod.name], env: cleanEnv({ PATH: '/nonexistent' }) });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /iptables-save not found .*: install iptables/);
    assert.deepEqual(meshLines(save()), []);
  });

  it('exits 1 saying so without CAP_NET_ADMIN, and applies nothing', async () => {
    const r = await runCli(['mesh-iptables', '-i', '*'], {
      prefix: ['ip', 'netns', 'exec', pod.name, 'setpriv', '--reuid=1337', '--regid=1337', '--clear-groups', '--inh-caps=-all'],
      env: cleanEnv(),
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /permission|CAP_NET_ADMIN|root/i);
    assert.deepEqual(meshLines(save()), []);
  });
});

describe('--run-validation in a pod without a default route (Istio\'s loopback check)', { skip: netnsSkip }, () => {
  const run = (pod: Pod, ...args: string[]): Promise<CliResult> =>
    runCli(args, { prefix: ['ip', 'netns', 'exec', pod.name], env: cleanEnv() });

  it('IPv4: passes with the rules, saying which check ran; exits 126 without them', async () => {
    const pod = createPod();
    try {
      pod.exec('ip', ['route', 'del', 'default']);
      const ok = await run(pod, 'mesh-iptables', '-i', '*', '-b', '*', '-u', '1337', '-g', '1337', '--run-validation', '--probe-timeout', '2s');
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stdout, /validation passed \(Istio's loopback check \(as uid 1337\), because the outbound check could not run: no route to 192\.0\.2\.1:15002 \(ENETUNREACH\)/);
      assert.match(ok.stdout, /a connection to 127\.0\.0\.6:15002 reached port 15006/);
      assert.equal((await run(pod, 'mesh-clean-iptables')).code, 0);
      const without = await run(pod, 'mesh-iptables', '--skip-rule-apply', '-i', '*', '-u', '1337', '-g', '1337', '--run-validation', '--probe-timeout', '1s');
      assert.equal(without.code, 126, without.stderr);
      assert.match(without.stderr, /reached the probe port itself, not the inbound capture port 15006/);
      assert.match(without.stderr, /Istio's check ran because the outbound check could not run: no route to 192\.0\.2\.1:15002/);
    } finally {
      pod.close();
    }
  });

  it('IPv6-only pod: the rules put ::6 on lo, and the check through it passes; exits 126 without the rules', async () => {
    const pod = createPod({ ipv6: true });
    try {
      pod.exec('ip', ['addr', 'del', `${POD_V4}/24`, 'dev', 'pod0']);
      pod.exec('ip', ['-6', 'route', 'del', 'default']);
      const ok = await run(pod, 'mesh-iptables', '-i', '*', '-b', '*', '-u', '1337', '-g', '1337', '--run-validation', '--probe-timeout', '2s');
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(pod.exec('ip', ['-6', 'addr', 'show', 'dev', 'lo']).stdout, /inet6 ::6\/128 /);
      assert.match(ok.stdout, /because the outbound check could not run: no route to \[2001:db8::1\]:15002 \(ENETUNREACH\).*a connection to \[::6\]:15002 reached port 15006/);
      assert.equal((await run(pod, 'mesh-clean-iptables')).code, 0);
      const without = await run(pod, 'mesh-iptables', '--skip-rule-apply', '-i', '*', '-u', '1337', '-g', '1337', '--run-validation', '--probe-timeout', '1s');
      assert.equal(without.code, 126, without.stderr);
    } finally {
      pod.close();
    }
  });
});
