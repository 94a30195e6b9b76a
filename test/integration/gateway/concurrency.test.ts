// `--concurrency`: several workers share the gateway's port (SO_REUSEPORT); what an operator reads
// (/stats, /debug/decisions, the Prometheus series) is the sum over every worker, exactly.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { httpGateway, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';

const REQUESTS = 40;

const RESOURCES = `${httpGateway('gw', 8080)}---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: app, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /app}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
`;

describe('pilot-agent proxy router --concurrency 3', () => {
  let pod: GatewayPod;

  before(async () => {
    pod = await startGatewayPod({ resources: { 'gw.yaml': RESOURCES }, apps: { 9080: 'app' }, args: ['--concurrency', '3'] });
  });
  after(() => pod?.close());

  it('says how many workers run', async () => {
    assert.match(pod.output(), /in 3 worker\(s\)/);
    const info = await pod.ns.runCli(['request', 'GET', '/server_info']);
    assert.equal((JSON.parse(info.stdout) as { command_line_options: { concurrency: number } }).command_line_options.concurrency, 3);
  });

  it('every request, on its own connection, is answered and counted once in the totals', async () => {
    // Each request on a new connection: the kernel spreads them over the workers' sockets.
    const specs = Array.from({ length: REQUESTS }, (_, i) => ({ url: `http://127.0.0.1:8080/app/${i}` }));
    const answers = pod.send(specs);
    assert.deepEqual(answers.map((a) => a.status), specs.map(() => 200));
    const stats = await pod.ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, new RegExp(`^http\\.inbound\\.downstream_rq_total: ${REQUESTS}$`, 'm'));
    assert.match(stats.stdout, new RegExp(`^http\\.gateway\\.decisions\\.route\\.routed: ${REQUESTS}$`, 'm'));
    const decisions = await pod.ns.runCli(['request', 'GET', '/debug/decisions']);
    const paths = (JSON.parse(decisions.stdout) as { decisions: { path: string }[] }).decisions.map((d) => d.path).sort();
    assert.deepEqual(paths, specs.map((_, i) => `/app/${i}`).sort());
    const body = pod.send([{ url: 'http://127.0.0.1:15090/stats/prometheus' }])[0]!.body;
    assert.match(body, new RegExp(`^mesh_request_decisions_total\\{stage="route",outcome="routed"\\} ${REQUESTS}$`, 'm'));
  });
});
