// Real connections through applied rules, in a pod namespace joined to a peer namespace by veth:
// outbound REDIRECT to 15001, inbound REDIRECT to 15006 from the peer, inbound TPROXY to a
// transparent listener on 15006, and --run-validation passing with rules and failing without.
// Listeners are Python (test/fixtures/tcp-probe.py: IP_TRANSPARENT, SO_ORIGINAL_DST), ended by PID.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { AgentError } from '../../../src/errors/agent-error.js';
import { applyRuleSet, cleanMeshRules } from '../../../src/iptables/apply.js';
import type { RuleSet } from '../../../src/iptables/rules.js';
import { validateRedirect, validationTarget } from '../../../src/iptables/validation.js';
import { fixtureCases, fixtureRuleSet, haveFixtures } from '../../helpers/iptables-fixtures.js';
import {
  connectFrom, createPod, listenerScript, netnsSkip, PEER_V4, POD_V4, PYTHON, startListener,
} from '../../helpers/pod-netns.js';

const python = spawnSync(PYTHON, ['--version']).status === 0;
const skip = netnsSkip || (!haveFixtures && 'no ../shared/fixtures') || (!python && 'python3 is needed for the listeners');
const caseSet = (name: string): RuleSet => fixtureRuleSet(fixtureCases().find((c) => c.name === name)!);

/** The `empty` case with outbound capture of everything, as `-i '*'` adds it. */
function outboundCapture(): RuleSet {
  const set = caseSet('empty');
  return { ...set, ipv4: [...set.ipv4, { table: 'nat', chain: 'MESH_OUTPUT', args: ['-j', 'MESH_REDIRECT'] }] };
}

const OUTSIDE = '192.0.2.77'; // a documentation address, routed to the peer (which drops it)

describe('traffic through the applied rules', { skip }, () => {
  it('outbound REDIRECT: the app\'s connection reaches 15001; the proxy\'s own (uid 1337) is not captured', async () => {
    const pod = createPod();
    try {
      assert.equal(await applyRuleSet(pod.runner, outboundCapture()), 'applied');
      const proxy = await startListener(pod, 15001);
      const r = connectFrom(pod, OUTSIDE, 8080);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.stdout, 'ok 127.0.0.1:15001\n');
      const seen = await proxy.next();
      assert.equal(seen.origdst, `${OUTSIDE}:8080`);
      assert.match(seen.peer, new RegExp(`^${POD_V4.replaceAll('.', '\\.')}:\\d+$`));
      // The proxy's uid is exempt: its connection goes out (and, here, nowhere).
      const own = pod.exec('setpriv', ['--reuid=1337', '--regid=1337', '--clear-groups', PYTHON,
        listenerScript, 'connect', OUTSIDE, '8080', '0.5'], { allowFailure: true });
      assert.notEqual(own.exitCode, 0, 'uid 1337 must not be redirected');
      assert.match(own.stderr, /timed out/);
    } finally {
      pod.close();
    }
  });

  it('inbound REDIRECT: a connection from the peer to a captured port reaches 15006, others do not', async () => {
    const pod = createPod();
    try {
      assert.equal(await applyRuleSet(pod.runner, caseSet('inbound-ports-include')), 'applied');
      const inbound = await startListener(pod, 15006);
      const r = connectFrom(pod.peer, POD_V4, 32000);
      assert.equal(r.exitCode, 0, r.stderr);
      const seen = await inbound.next();
      assert.equal(seen.origdst, `${POD_V4}:32000`);
      assert.match(seen.peer, new RegExp(`^${PEER_V4.replaceAll('.', '\\.')}:\\d+$`));
      const other = connectFrom(pod.peer, POD_V4, 33000);
      assert.notEqual(other.exitCode, 0, 'port 33000 is not captured');
      assert.match(other.stderr, /refused/i);
    } finally {
      pod.close();
    }
  });

  it('inbound TPROXY: a connection from the peer reaches the transparent listener on 15006, destination kept', async () => {
    const pod = createPod();
    try {
      assert.equal(await applyRuleSet(pod.runner, caseSet('inbound-ports-wildcard-tproxy')), 'applied');
      const inbound = await startListener(pod, 15006, { transparent: true });
      const r = connectFrom(pod.peer, POD_V4, 8080);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.stdout, `ok ${POD_V4}:8080\n`, 'the listener\'s socket has the original destination');
      const seen = await inbound.next();
      assert.equal(seen.local, `${POD_V4}:8080`);
      assert.match(seen.peer, new RegExp(`^${PEER_V4.replaceAll('.', '\\.')}:\\d+$`));
      // Without the policy route the marked packet is not delivered locally: the route matters.
      await cleanMeshRules(pod.runner, { ipv6: false, routes: { mark: 1337, table: 133 } });
      const after = connectFrom(pod.peer, POD_V4, 8080, 0.5);
      assert.notEqual(after.exitCode, 0, 'no capture once cleaned');
    } finally {
      pod.close();
    }
  });
});

describe('--run-validation (validateRedirect) inside the pod', { skip }, () => {
  const ports = { probePort: 15002, proxyPort: 15001, inboundCapturePort: 15006 };

  it('passes with outbound capture, fails with exit 126 without it', async () => {
    const pod = createPod();
    try {
      await applyRuleSet(pod.runner, outboundCapture());
      const target = validationTarget({ serviceCidrs: { all: true } });
      assert.deepEqual(target, { address: '192.0.2.1', loopback: false });
      const ok = await validateRedirect({ ...ports, timeoutMs: 3000, runner: pod.runner, target: target.address });
      assert.equal(ok.reachedPort, 15001);
      assert.equal(ok.target, '192.0.2.1');

      await cleanMeshRules(pod.runner, { ipv6: false });
      const err = await validateRedirect({ ...ports, timeoutMs: 800, runner: pod.runner, target: target.address })
        .then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AgentError, String(err));
      assert.equal(err.code, 'ERR_IPTABLES_VALIDATION');
      assert.equal(err.exitCode, 126);
      assert.match(err.message, /a connection to 192\.0\.2\.1:15002 did not reach the proxy port 15001 or the inbound capture port 15006 within 800 ms/);
      assert.match(err.message, /Likely causes: the rules were not applied/);
    } finally {
      pod.close();
    }
  });

  it('no route to the target: says so (the kernel routes before nat OUTPUT)', async () => {
    const pod = createPod();
    try {
      await applyRuleSet(pod.runner, outboundCapture());
      pod.exec('ip', ['route', 'del', 'default']);
      const err = await validateRedirect({ ...ports, timeoutMs: 2000, runner: pod.runner })
        .then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AgentError && err.exitCode === 126, String(err));
      assert.match(err.message, /no route to 192\.0\.2\.1:15002 \(ENETUNREACH\)/);
    } finally {
      pod.close();
    }
  });

  it('no outbound capture: the 127.0.0.6 path, connecting as the proxy uid, reaches 15006; as root it cannot', async () => {
    const pod = createPod();
    try {
      await applyRuleSet(pod.runner, caseSet('empty'));
      const target = validationTarget({ serviceCidrs: { all: false, items: [] } });
      assert.deepEqual(target, { address: '127.0.0.6', loopback: true });
      const ok = await validateRedirect({ ...ports, timeoutMs: 3000, runner: pod.runner, target: target.address,
        connectAs: { uid: 1337, gid: 1337 } });
      assert.equal(ok.reachedPort, 15006);
      const err = await validateRedirect({ ...ports, timeoutMs: 1000, runner: pod.runner, target: target.address })
        .then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AgentError && err.exitCode === 126, String(err));
      assert.match(err.message, /reached the probe port itself/);
    } finally {
      pod.close();
    }
  });
});
