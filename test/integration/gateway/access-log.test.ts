// The gateway's access log, as a real `pilot-agent proxy router`: Istio's default TEXT line on
// stdout (with this agent's decision fields), a custom `accessLogFormat` into a file written by two
// workers at once, JSON with Istio's default keys and with an object of one's own, a Telemetry
// turning the log on at run time where the mesh config turns it off, and a format the config
// refuses at start.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { httpGateway, routeTo, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';
import { createNetns } from '../../helpers/netns.js';
import { netnsSkip } from '../../helpers/pod-netns.js';

const PORT = 8080;
const APP = 9080;
const RESOURCES = {
  'gateway.yaml': httpGateway('gw', PORT),
  'routes.yaml': routeTo('shop', ['shop.example'], 'gw', APP).replace('http: [{route:', 'http: [{name: to-app, route:'),
};

/** Writes the mesh config into a pod's working directory (before the gateway starts). */
const meshConfig = (text: string) => (pod: GatewayPod): void => {
  mkdirSync(join(pod.dir, 'etc', 'mesh', 'config'), { recursive: true });
  writeFileSync(join(pod.dir, 'etc', 'mesh', 'config', 'mesh'), text);
};

/** Waits (at most 5 s) until `read()` has `n` lines matching `re`; answers every line. */
async function linesOf(read: () => string, re: RegExp, n = 1): Promise<string[]> {
  for (let i = 0; i < 100; i++) {
    const lines = read().split('\n');
    if (lines.filter((l) => re.test(l)).length >= n) return lines;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return read().split('\n');
}

describe('the gateway\'s access log', { skip: netnsSkip }, () => {
  describe('default: Istio\'s TEXT line on stdout, the decision fields after it', () => {
    let pod: GatewayPod;
    before(async () => { pod = await startGatewayPod({ resources: RESOURCES, apps: { [APP]: 'app' } }); });
    after(() => pod?.close());

    it('a routed request: every field of Istio\'s line this proxy knows', async () => {
      const [answer] = pod.send([{ url: `http://127.0.0.1:${PORT}/orders?id=7`, headers: { host: 'shop.example', 'user-agent': 'test/1', 'x-request-id': 'req-1' } }]);
      assert.equal(answer!.status, 200);
      const lines = await linesOf(() => pod.output(), /"GET \/orders\?id=7 /);
      const line = lines.find((l) => l.includes('"GET /orders?id=7 '));
      assert.match(line ?? '', new RegExp('^\\[\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z\\] "GET /orders\\?id=7 HTTP/1\\.1" 200 - via_upstream - "-" 0 \\d+ \\d+ \\d+ '
        + '"127\\.0\\.0\\.1" "test/1" "req-1" "shop\\.example" "127\\.0\\.0\\.1:9080" outbound\\|9080\\|\\|127\\.0\\.0\\.1 127\\.0\\.0\\.1:\\d+ 127\\.0\\.0\\.1:8080 127\\.0\\.0\\.1:\\d+ - to-app '
        + 'jwt="absent" principal=- authz="allowed: no policies" route="vs mesh-system/shop rule 0 \\\\"to-app\\\\""$'), line);
    });

    it('no route: 404 NR route_not_found, nothing upstream', async () => {
      const [answer] = pod.send([{ url: `http://127.0.0.1:${PORT}/x`, headers: { host: 'other.example' } }]);
      assert.equal(answer!.status, 404);
      const lines = await linesOf(() => pod.output(), /"GET \/x HTTP\/1\.1" 404/);
      assert.match(lines.find((l) => l.includes('"GET /x HTTP/1.1" 404')) ?? '',
        /"GET \/x HTTP\/1\.1" 404 NR route_not_found - "-" 0 0 \d+ - "-" "[^"]*" "-" "other\.example" "-" - - 127\.0\.0\.1:8080 127\.0\.0\.1:\d+ - - jwt="absent" .*route="no route/);
    });
  });

  describe('a custom TEXT format into a file, two workers appending', () => {
    let pod: GatewayPod;
    const FORMAT = '%REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% %UPSTREAM_CLUSTER% %ROUTE_NAME% %REQ(USER-AGENT):6% %MESH_DECISION(AUTHZ)%';
    before(async () => {
      pod = await startGatewayPod({
        resources: RESOURCES, apps: { [APP]: 'app' }, args: ['--concurrency', '2'],
        prepare: meshConfig(`accessLogFile: ./access.log\naccessLogFormat: '${FORMAT}'\n`),
      });
    });
    after(() => pod?.close());

    it('every request one whole line, in the format asked (a newline added), nothing on stdout', async () => {
      const specs = Array.from({ length: 60 }, (_, i) => ({ url: `http://127.0.0.1:${PORT}/n/${i}`, headers: { host: 'shop.example', 'user-agent': 'client/xyz' } }));
      assert.ok(pod.send(specs).every((a) => a.status === 200));
      const file = (): string => readFileSync(join(pod.dir, 'access.log'), 'utf8');
      const lines = (await linesOf(file, /^GET \/n\//, 60)).filter((l) => l !== '');
      assert.equal(lines.length, 60);
      for (const line of lines) assert.match(line, /^GET \/n\/\d+ 200 - outbound\|9080\|\|127\.0\.0\.1 to-app client allowed: no policies$/);
      assert.deepEqual(lines.map((l) => Number(l.split(' ')[1]!.slice(3))).sort((a, b) => a - b), Array.from({ length: 60 }, (_, i) => i));
      assert.doesNotMatch(pod.output(), /GET \/n\//);
    });
  });

  describe('JSON', () => {
    let defaults: GatewayPod;
    let custom: GatewayPod;
    before(async () => {
      defaults = await startGatewayPod({ resources: RESOURCES, apps: { [APP]: 'app' }, prepare: meshConfig('accessLogFile: /dev/stdout\naccessLogEncoding: JSON\n') });
      custom = await startGatewayPod({
        resources: RESOURCES, apps: { [APP]: 'app' },
        prepare: meshConfig('accessLogEncoding: JSON\naccessLogFormat: |\n  {"code": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%", "req": {"line": "%REQ(:METHOD)% %REQ(:PATH)%", "ua": "%REQ(USER-AGENT)%"}, "team": "shop"}\n'),
      });
    });
    after(() => {
      defaults?.close();
      custom?.close();
    });

    const jsonLines = (text: string): Record<string, unknown>[] =>
      text.split('\n').filter((l) => l.startsWith('{"')).map((l) => JSON.parse(l) as Record<string, unknown>);

    it('the default keys: Istio\'s and the decision\'s, typed', async () => {
      defaults.send([{ url: `http://127.0.0.1:${PORT}/j`, headers: { host: 'shop.example' } }]);
      await linesOf(() => defaults.output(), /"path":"\/j"/);
      const o = jsonLines(defaults.output()).find((x) => x['path'] === '/j');
      assert.ok(o, defaults.output());
      assert.deepEqual([o['method'], o['response_code'], o['response_flags'], o['response_code_details'], o['upstream_cluster'], o['authority'], o['jwt'], o['authz'], o['route_name']],
        ['GET', 200, null, 'via_upstream', 'outbound|9080||127.0.0.1', 'shop.example', 'absent', 'allowed: no policies', 'to-app']);
      assert.equal(typeof o['duration'], 'number');
      assert.ok(Object.keys(o).includes('upstream_transport_failure_reason') && o['upstream_transport_failure_reason'] === null);
    });

    it('an object of one\'s own (the gateway logs to stdout when accessLogFile is unset)', async () => {
      custom.send([{ url: `http://127.0.0.1:${PORT}/c`, headers: { host: 'nowhere.example', 'user-agent': 'ua/2' } }]);
      await linesOf(() => custom.output(), /"line":"GET \/c"/);
      assert.deepEqual(jsonLines(custom.output()).find((x) => (x['req'] as { line?: string } | undefined)?.line === 'GET /c'),
        { code: 404, flags: 'NR', req: { line: 'GET /c', ua: 'ua/2' }, team: 'shop' });
    });
  });

  describe('a Telemetry turning the log on where the mesh config turns it off (accessLogFile: "")', () => {
    let pod: GatewayPod;
    const telemetry = (mode: string): string => 'apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: mesh-system}\n'
      + `spec: {accessLogging: [{providers: [{name: envoy}], match: {mode: ${mode}}}]}\n`;
    before(async () => {
      pod = await startGatewayPod({ resources: { ...RESOURCES, 'telemetry.yaml': telemetry('SERVER') }, apps: { [APP]: 'app' }, prepare: meshConfig('accessLogFile: ""\n') });
    });
    after(() => pod?.close());

    it('SERVER does not reach a gateway (Istio reads it as a client); CLIENT, written at run time, turns its lines on (stdout)', async () => {
      pod.send([{ url: `http://127.0.0.1:${PORT}/server-only`, headers: { host: 'shop.example' } }]);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.doesNotMatch(pod.output(), /"GET \/server-only /);
      writeFileSync(join(pod.dir, 'etc', 'mesh', 'resources', 'telemetry.yaml'), telemetry('CLIENT'));
      // Sent until the new configuration is in force (the file is read again on its own).
      for (let i = 0; i < 100 && !/"GET \/client-on /.test(pod.output()); i++) {
        pod.send([{ url: `http://127.0.0.1:${PORT}/client-on`, headers: { host: 'shop.example' } }]);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.match(pod.output(), /"GET \/client-on HTTP\/1\.1" 200 - via_upstream /);
    });
  });

  it('a format with an operator Envoy does not have stops the start, naming the field and the operator', async () => {
    const ns = createNetns()!; // should it start after all, its ports are the namespace's
    const dir = mkdtempSync(join(tmpdir(), 'pa-gateway-format-'));
    try {
      writeFileSync(join(dir, 'mesh'), 'accessLogFormat: "%START_TIME% %RESPONSE_CODEZ%"\n');
      const r = await ns.runCli(['proxy', 'router', '--meshConfig', join(dir, 'mesh')], { timeoutMs: 10_000 });
      assert.equal(r.code, 1, r.stderr + r.stdout);
      assert.match(r.stderr + r.stdout, /mesh: accessLogFormat: unknown command operator %RESPONSE_CODEZ% at character 14/);
    } finally {
      ns.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
