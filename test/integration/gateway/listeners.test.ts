// `pilot-agent proxy router` as a real process: a Gateway server's `bind` (the listener's address),
// the mesh config's drainDuration (the connections of a listener a change closes get that long),
// its serviceCluster (the node's cluster), and the warnings for mesh config keys it does not honour.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGatewayPod, type Answer, type GatewayPod } from '../../helpers/gateway.js';

const APP_PORT = 9080;

const gateway = (port: number, bind?: string): string => `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: gw, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${port}, name: http, protocol: HTTP}
    hosts: ["*"]${bind === undefined ? '' : `\n    bind: ${bind}`}
`;

const ROUTES = `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: app, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http: [{route: [{destination: {host: 127.0.0.1, port: {number: ${APP_PORT}}}}]}]
`;

const MESH = `defaultConfig:
  drainDuration: 300ms
  serviceCluster: shop-gateway
h2UpgradePolicy: UPGRADE
`;

/** A GET of the app's /slow (answered after 1.5 s) from inside the pod: its status, or the error, and how long it took. */
const SLOW_CLIENT = `const t = Date.now();
const done = (r) => { console.log(JSON.stringify({ ...r, ms: Date.now() - t })); };
require('http').get({ host: '127.0.0.1', port: 8080, path: '/slow', agent: false }, (res) => {
  let body = '';
  res.on('data', (d) => { body += d; });
  res.on('end', () => done({ status: res.statusCode, body }));
  res.on('error', (e) => done({ error: e.message }));
}).on('error', (e) => done({ error: e.message }));`;

describe('pilot-agent proxy router: bind, drainDuration, serviceCluster, mesh config warnings', () => {
  let pod: GatewayPod;
  const get = (url: string): Answer => pod.send([{ url }])[0]!;
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'gateway.yaml': gateway(8080, '127.0.0.1'), 'routes.yaml': ROUTES },
      apps: { [APP_PORT]: 'app' },
      env: { FILE_DEBOUNCE_DURATION: '50ms' },
      prepare: (p) => {
        mkdirSync(join(p.dir, 'etc', 'mesh', 'config'), { recursive: true });
        writeFileSync(join(p.dir, 'etc', 'mesh', 'config', 'mesh'), MESH);
      },
    });
  });
  after(() => pod?.close());

  it('a server\'s bind: the port listens on that address only', async () => {
    assert.equal(get('http://127.0.0.1:8080/').status, 200, pod.output());
    // 127.0.0.2 is loopback too: a listener on every address would answer there.
    const other = get('http://127.0.0.2:8080/');
    assert.equal(other.status, 0, JSON.stringify(other));
    assert.match(other.error ?? '', /ECONNREFUSED/);
    const listeners = await pod.ns.runCli(['request', 'GET', '/listeners']);
    assert.match(listeners.stdout, /^gateway_8080::127\.0\.0\.1:8080$/m);
  });

  it('the mesh config\'s serviceCluster is the node\'s cluster; keys it does not honour are named at start', async () => {
    const info = await pod.ns.runCli(['request', 'GET', '/server_info']);
    const parsed = JSON.parse(info.stdout) as { node: { cluster: string }; command_line_options: { drain_time: string } };
    assert.equal(parsed.node.cluster, 'shop-gateway');
    assert.equal(parsed.command_line_options.drain_time, '0.3s');
    assert.match(pod.output(), /meshConfig\.h2UpgradePolicy: not honoured by this agent: .*never upgraded/);
  });

  it('a listener a change closes: the new configuration applies at once, its connections get drainDuration, then are closed', async () => {
    const slow = pod.exec(process.execPath, ['-e', SLOW_CLIENT]);
    await sleep(200); // the request is with the app
    writeFileSync(join(pod.resources, 'gateway.yaml'), gateway(8081));
    let moved = get('http://127.0.0.1:8081/');
    for (let i = 0; i < 30 && moved.status !== 200; i++) {
      await sleep(50);
      moved = get('http://127.0.0.1:8081/');
    }
    assert.equal(moved.status, 200, `the new port, while a request on the old one is in flight: ${JSON.stringify(moved)}\n${pod.output()}`);
    const answer = JSON.parse((await slow).stdout) as { status?: number; error?: string; ms: number };
    // The app answers /slow after 1.5 s: the drain (300 ms after the change) ended the connection first.
    assert.equal(answer.status, undefined, `the request outlived the drain: ${JSON.stringify(answer)}`);
    assert.ok(answer.ms < 1400, JSON.stringify(answer));
    assert.match(pod.output(), /gateway: closing port 8080; its connections get 300ms \(drainDuration\) to finish/);
    assert.match(pod.output(), /gateway: port 8080: drain over after 300ms, closing its 1 remaining connection\(s\)/);
    assert.equal(get('http://127.0.0.1:8080/').status, 0, 'the old port no longer accepts');
  });
});
