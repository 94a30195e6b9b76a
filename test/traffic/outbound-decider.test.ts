// The outbound decider's answer for destinations no service covers: the original destination under
// ALLOW_ANY, the BlackHoleCluster under REGISTRY_ONLY (502 NR for a request; a connection refused and,
// on a port no service takes requests on by Host, carried as TCP so that it is closed at once).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { it } from 'node:test';
import { ResourceStore } from '../../src/config/resources/store.js';
import { BLACK_HOLE_CONNECTION, BLACK_HOLE_REPLY, type LocalReply, type RequestDecider } from '../../src/proxy/decider.js';
import type { ClusterManager } from '../../src/traffic/cluster-manager.js';
import { buildClusters, clusterName } from '../../src/traffic/clusters.js';
import { outboundTrafficDecider, type MeshTraffic } from '../../src/traffic/outbound-decider.js';
import { ServiceIndex } from '../../src/traffic/service-index.js';
import { DecisionLog } from '../../src/gateway/decisions.js';

const SE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: known, namespace: default}
spec:
  hosts: [known.example.com]
  addresses: [240.0.0.1]
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
`;

const ORIGINAL: LocalReply = { kind: 'reply', status: 299, body: 'original destination' };
const base: RequestDecider = { decide: () => ORIGINAL, connectionUpstream: () => undefined };

function traffic(registryOnly: boolean): MeshTraffic {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('r.yaml', SE);
  const set = buildClusters(store.snapshot(), { workload: { namespace: 'default', labels: {} }, clusterDomain: 'cluster.local', connectTimeoutMs: 1000 });
  // No cluster is ever in force here: a covered destination falls back to the base decider, which is enough to tell it from the black hole.
  const clusters = { get: () => undefined } as unknown as ClusterManager;
  return { set, clusters, index: ServiceIndex.build(set, { namespace: 'default' }), registryOnly };
}

const request = (host: string): IncomingMessage => ({ headers: { host }, method: 'GET', url: '/' }) as unknown as IncomingMessage;
const facts = (address: string, port: number) => ({ source: '10.9.9.9', destination: { address, port }, kind: 'tcp' as const });

it('ALLOW_ANY: what no service covers keeps its original destination, request and connection alike', () => {
  const t = traffic(false);
  const d = outboundTrafficDecider({ base, traffic: () => t, tlsFor: () => undefined });
  assert.equal(d.decide(request('elsewhere.example.com'), { address: '192.0.2.9', port: 80 }), ORIGINAL);
  assert.equal(d.connectionUpstream!(facts('192.0.2.9', 9000)), undefined);
  assert.equal(d.connectionProtocol!({ address: '192.0.2.9', port: 8080 }), undefined, 'sniffed, as before');
});

it('REGISTRY_ONLY: 502 NR for a request, a refusal for a connection; what a service covers is not touched', () => {
  const t = traffic(true);
  const d = outboundTrafficDecider({ base, traffic: () => t, tlsFor: () => undefined });
  assert.equal(d.decide(request('elsewhere.example.com'), { address: '192.0.2.9', port: 80 }), BLACK_HOLE_REPLY);
  assert.deepEqual([BLACK_HOLE_REPLY.status, BLACK_HOLE_REPLY.flag], [502, 'NR']);
  // By Host, at any address; by address, whatever the Host.
  assert.equal(d.decide(request('known.example.com'), { address: '192.0.2.9', port: 80 }), ORIGINAL);
  assert.equal(d.decide(request('elsewhere.example.com'), { address: '240.0.0.1', port: 80 }), ORIGINAL);
  assert.equal(d.connectionUpstream!(facts('192.0.2.9', 9000)), BLACK_HOLE_CONNECTION);
  assert.equal(d.connectionUpstream!(facts('240.0.0.1', 9000)), undefined);
  // A port where services take requests by Host is sniffed (a request may name one); another is carried as TCP, to be closed at once.
  assert.equal(d.connectionProtocol!({ address: '192.0.2.9', port: 80 }), undefined);
  assert.equal(d.connectionProtocol!({ address: '192.0.2.9', port: 9000 }), 'tcp');
  assert.equal(d.connectionProtocol!({ address: '192.0.2.9', port: 8080 }), 'tcp');
  assert.equal(d.connectionProtocol!({ address: '240.0.0.1', port: 9000 }), 'tcp', 'the service\'s own TCP port, as declared');
});

it('each routed request\'s /debug/decisions record is its own (the record is filled in place and copied by the ring)', () => {
  const decisions = new DecisionLog(8);
  const d = outboundTrafficDecider({ base, traffic: () => traffic(false), tlsFor: () => undefined, decisions });
  const routed = (i: number, trail?: readonly string[]): IncomingMessage => ({
    headers: {}, method: i % 2 ? 'POST' : 'GET', url: `/r/${i}`, authority: `svc-${i}.example:80`,
    routedCluster: `outbound|80|v${i}|svc`, routedRoute: `route-${i}`, endpoint: `10.0.0.${i}:8080`, trail,
  }) as unknown as IncomingMessage;
  const started = performance.now();
  d.completed!(routed(1, ['attempt 1 10.0.0.1:8080: 503, retried (5xx)', 'attempt 2 10.0.0.1:8080: 200']), undefined, 200, 1.5, started);
  d.completed!(routed(2), { kind: 'reply', status: 503, body: 'no healthy upstream\n', flag: 'UH', details: 'no_healthy_upstream' }, 503, 0.25, started + 5);
  // A request no cluster took (passthrough) is not recorded.
  d.completed!(request('other.example'), undefined, 200, 1, started);
  const [first, second] = decisions.recent();
  assert.equal(decisions.recent().length, 2);
  assert.deepEqual({ ...first, time: undefined }, {
    time: undefined, listener: 'outbound', method: 'POST', authority: 'svc-1.example:80', path: '/r/1', jwt: '-', authz: '-',
    route: 'route-1', routeName: 'route-1', upstream: '10.0.0.1:8080', cluster: 'outbound|80|v1|svc',
    attempts: ['attempt 1 10.0.0.1:8080: 503, retried (5xx)', 'attempt 2 10.0.0.1:8080: 200'], status: 200, durationMs: 1.5,
  });
  assert.deepEqual({ ...second, time: undefined }, {
    time: undefined, listener: 'outbound', method: 'GET', authority: 'svc-2.example:80', path: '/r/2', jwt: '-', authz: '-',
    route: 'route-2', routeName: 'route-2', flag: 'UH', details: 'no_healthy_upstream', upstream: '10.0.0.2:8080', cluster: 'outbound|80|v2|svc',
    status: 503, durationMs: 0.25,
  });
  // The start passed in is the record's time (this thread's clock, as epoch ms).
  assert.equal(Date.parse(second!.time) - Date.parse(first!.time), 5);
});

it('a request\'s default cluster is the one of the configuration in force: a new one, or clusters closed at shutdown, are seen at once', () => {
  const name = clusterName(80, undefined, 'known.example.com');
  const runtime = (tag: string) => ({ name, tag, passthrough: false, isClosed: false, hashKey: undefined, spec: { discovery: 'STATIC' } });
  // The same service objects in every version, new clusters: the decider must not count on new services.
  const services = traffic(false);
  const version = (r: ReturnType<typeof runtime>): MeshTraffic => {
    const runtimes = new Map<string, ReturnType<typeof runtime>>([[name, r]]);
    // As ClusterManager.close() does: a closed cluster is gone from the manager too.
    const clusters = { get: (n: string) => (r.isClosed ? undefined : runtimes.get(n)) } as unknown as ClusterManager;
    return { ...services, clusters };
  };
  const first = runtime('first');
  const second = runtime('second');
  let inForce = version(first);
  const d = outboundTrafficDecider({ base, traffic: () => inForce, tlsFor: () => undefined });
  const clusterOf = (): string | undefined => {
    const v = d.decide(request('known.example.com'), { address: '240.0.0.1', port: 80 });
    if (v === ORIGINAL) return 'original';
    assert.ok(!(v instanceof Promise) && v.kind === 'forward');
    return (v.cluster?.cluster as unknown as { tag: string } | undefined)?.tag;
  };
  assert.equal(clusterOf(), 'first');
  assert.equal(clusterOf(), 'first', 'the same again (the decider keeps its last answer)');
  inForce = version(second);
  assert.equal(clusterOf(), 'second', 'a new configuration\'s cluster, not the last answer');
  second.isClosed = true;
  assert.equal(clusterOf(), 'original', 'a closed cluster takes no request: the original destination, as with no cluster');
});
