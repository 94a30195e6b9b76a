import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RecordingRunner } from '../../src/exec/recording-runner.js';
import { AgentError } from '../../src/errors/agent-error.js';
import { validateRedirect, validationTarget } from '../../src/iptables/validation.js';

describe('validationTarget', () => {
  const all = { all: true } as const;
  const list = (...items: string[]) => ({ all: false, items }) as const;
  const cases: [string, Parameters<typeof validationTarget>[0], { address: string; loopback: boolean }][] = [
    ['-i * : a documentation address', { serviceCidrs: all }, { address: '192.0.2.1', loopback: false }],
    ['-i * with -x covering the first', { serviceCidrs: all, serviceExcludeCidrs: ['192.0.2.0/24'] }, { address: '198.51.100.1', loopback: false }],
    ['-i * with -x covering all candidates', { serviceCidrs: all, serviceExcludeCidrs: ['192.0.0.0/2'] }, { address: '127.0.0.6', loopback: true }],
    ['-i * on an IPv6-only pod', { serviceCidrs: all, ipv6Only: true }, { address: '2001:db8::1', loopback: false }],
    ['-i CIDRs: inside the first IPv4 one', { serviceCidrs: list('fd00::/8', '10.96.0.0/12', '10.0.0.0/8') }, { address: '10.96.0.1', loopback: false }],
    ['-i a /32', { serviceCidrs: list('10.1.2.3/32') }, { address: '10.1.2.3', loopback: false }],
    ['-i a bare address', { serviceCidrs: list('10.1.2.3') }, { address: '10.1.2.3', loopback: false }],
    ['-i IPv6 CIDR on an IPv6-only pod', { serviceCidrs: list('10.0.0.0/8', 'fd00:10::/64'), ipv6Only: true }, { address: 'fd00:10::1', loopback: false }],
    ['-i empty: the loopback path', { serviceCidrs: list() }, { address: '127.0.0.6', loopback: true }],
    ['-i empty, IPv6-only', { serviceCidrs: list(), ipv6Only: true }, { address: '::6', loopback: true }],
  ];
  for (const [name, input, want] of cases) it(name, () => assert.deepEqual(validationTarget(input), want));
});

describe('validateRedirect through a runner', () => {
  it('runs the check as a child process (node validation-child.js validate {...}) and reads its answer', async () => {
    const r = new RecordingRunner(() => ({ stdout: `${JSON.stringify({ ok: true, result: { target: '192.0.2.1', port: 15002, reachedPort: 15001, elapsedMs: 3 } })}\n` }));
    const res = await validateRedirect({ probePort: 15002, proxyPort: 15001, inboundCapturePort: 15006, timeoutMs: 100, runner: r });
    assert.equal(res.reachedPort, 15001);
    assert.equal(r.calls[0]!.command, process.execPath);
    assert.match(r.calls[0]!.args[0]!, /validation-child\.js$/);
    assert.equal(r.calls[0]!.args[1], 'validate');
    assert.deepEqual(JSON.parse(r.calls[0]!.args[2]!), { probePort: 15002, proxyPort: 15001, inboundCapturePort: 15006, timeoutMs: 100 });
  });

  it('passes Istio\'s loopback check (the fallback) to the child, and its answer says which check passed', async () => {
    const result = { check: 'loopback', target: '127.0.0.6', port: 15002, reachedPort: 15006, elapsedMs: 3,
      fallbackReason: 'the outbound check could not run: no route to 192.0.2.1:15002 (ENETUNREACH)' };
    const r = new RecordingRunner(() => ({ stdout: `${JSON.stringify({ ok: true, result })}\n` }));
    const loopback = { family: 'ipv4', connectAs: { uid: 1337, gid: 1337 } } as const;
    const res = await validateRedirect({ probePort: 15002, proxyPort: 15001, inboundCapturePort: 15006, timeoutMs: 100,
      target: '192.0.2.1', loopback, runner: r });
    assert.deepEqual(res, result);
    assert.deepEqual(JSON.parse(r.calls[0]!.args[2]!).loopback, loopback);
  });

  it('a failure in the child is the same error (exit 126)', async () => {
    const r = new RecordingRunner(() => ({ exitCode: 126, stdout: `${JSON.stringify({ ok: false, code: 'ERR_IPTABLES_VALIDATION', message: 'iptables validation failed: x' })}\n` }));
    const err = await validateRedirect({ probePort: 15002, proxyPort: 15001, inboundCapturePort: 15006, timeoutMs: 100, runner: r })
      .then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof AgentError);
    assert.equal(err.exitCode, 126);
    assert.equal(err.message, 'iptables validation failed: x');
    const broken = new RecordingRunner(() => ({ exitCode: 1, stderr: 'Cannot open network namespace "x"' }));
    const err2 = await validateRedirect({ probePort: 1, proxyPort: 2, inboundCapturePort: 3, timeoutMs: 1, runner: broken }).then(() => undefined, (e: unknown) => e);
    assert.ok(err2 instanceof AgentError && err2.exitCode === 126);
    assert.match(err2.message, /could not run in the network namespace: Cannot open network namespace/);
  });
});
