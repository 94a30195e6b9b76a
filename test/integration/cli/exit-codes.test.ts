// Exit codes and error messages of the real binary (README "Exit codes").
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cleanEnv, runCli } from '../../helpers/run-cli.js';

describe('usage errors exit 2 and say what is wrong', () => {
  const cases: [string, string[], RegExp][] = [
    ['an unknown command', ['bogus'], /unknown command 'bogus'/],
    ['an unknown flag', ['version', '--bogus'], /unknown option '--bogus'/],
    ['a non-integer --timeoutSeconds', ['wait', '--timeoutSeconds', 'abc'], /--timeoutSeconds <s>' argument 'abc' is invalid/],
    ['a bad interception mode', ['mesh-iptables', '-m', 'FOO'], /--mesh-inbound-interception-mode: "FOO" is not an interception mode \(REDIRECT or TPROXY\)/],
    ['a bad interception mode in clean-up', ['mesh-clean-iptables', '-m', 'FOO'], /--mesh-inbound-interception-mode: "FOO"/],
    ['a bad port', ['mesh-iptables', '-p', '99999'], /--proxy-port: "99999" is not a port/],
    ['a bad CIDR', ['mesh-iptables', '-i', '10.0.0.0/40'], /--mesh-service-cidr: "10.0.0.0\/40"/],
    ['a bad probe timeout', ['mesh-iptables', '--probe-timeout', '5'], /--probe-timeout <duration>' argument '5' is invalid/],
    ['a bad version format', ['version', '-o', 'xml'], /--output must be 'yaml' or 'json'/],
    ['a bad bool assignment', ['version', '--short=maybe'], /--short: "maybe" is not a bool/],
    ['a bad proxy type', ['proxy', 'waypoint'], /value 'waypoint' is invalid for argument 'type'. Allowed choices are sidecar, router/],
    ['a bad proxy log level', ['proxy', '--proxyLogLevel', 'loud'], /--proxyLogLevel: "loud"/],
    ['a bad log level', ['version', '--log_output_level', 'default:loud'], /--log_output_level: unknown level "loud"/],
    ['a bad log scope', ['version', '--log_output_level', 'nosuch:debug'], /unknown scope "nosuch"/],
    ['a bad --vklog', ['version', '--vklog', '-1'], /--vklog <level>' argument '-1' is invalid/],
    ['a missing request argument', ['request', 'GET'], /missing required argument 'path'/],
    ['a request port outside the allowed list', ['request', 'GET', '/stats', '--debug-port', '8080'],
      /port 8080 is not allowed; allowed ports are 15000, 15004, 15020, 15021/],
    ['a malformed wait URL', ['wait', '--url', 'not a url'], /--url: "not a url" is not a URL/],
  ];
  for (const [name, args, message] of cases) {
    it(name, async () => {
      const r = await runCli(args);
      assert.equal(r.code, 2, `exit code of ${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.equal(r.stdout, '');
    });
  }
});

describe('environment variables that do not parse', () => {
  it('are reported by every command, which goes on with the default', async () => {
    const r = await runCli(['version'], { env: cleanEnv({ MESH_CPU_LIMIT: 'four', FILE_DEBOUNCE_DURATION: '100' }) });
    assert.equal(r.code, 0);
    assert.equal(r.stdout.trim().length > 0, true);
    assert.match(r.stderr, /MESH_CPU_LIMIT: "four" is not an integer .*\(type int\); using the default 0/);
    assert.match(r.stderr, /FILE_DEBOUNCE_DURATION: "100" is not a duration .*\(type duration\); using the default 100ms/);
  });

  it('stop proxy from starting', async () => {
    const r = await runCli(['proxy'], { env: cleanEnv({ INBOUND_INTERCEPTION_MODE: 'tproxy' }) });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /INBOUND_INTERCEPTION_MODE: "tproxy" is not one of \(empty\), REDIRECT, TPROXY/);
    assert.match(r.stderr, /refusing to start: 1 environment variable\(s\) with invalid values \(INBOUND_INTERCEPTION_MODE\)/);
  });

  it('feed flag defaults: INBOUND_INTERCEPTION_MODE is validated as -m', async () => {
    const r = await runCli(['mesh-iptables', '-p', 'x'], { env: cleanEnv({ INBOUND_INTERCEPTION_MODE: 'TPROXY' }) });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--proxy-port: "x"/);
  });
});
