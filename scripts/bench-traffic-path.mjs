#!/usr/bin/env node
// Micro-benchmark of what traffic management decides per request, in-process, without sockets: the
// outbound decider (service, route, cluster), the attempts (the balancer's pick with its shared
// counters, the retry decision on a 200, the attempt's end) and the /debug/decisions record, for
// `make bench`'s sidecar-traffic setup (a ServiceEntry with 3 endpoints, a DestinationRule with
// LEAST_REQUEST, Istio's default retries); beside it a request no service covers (passthrough: the
// same decider, the original destination). Needs a build (dist/); no root, no network.
//
//   node scripts/bench-traffic-path.mjs [--ms N] [--rounds R]
//   PILOT_AGENT_BASELINE=/tmp/base node scripts/bench-traffic-path.mjs   (another built checkout)
//
// What it leaves out, and `make bench` (bench-proxy's sidecar-traffic) does not: the sockets, the
// HTTP/1.1 exchange around the decisions, the upstream pool, and the caches the kernel's work in
// between evicts (there, the same code costs about twice what it costs here). The figure to read is
// the difference, traffic minus passthrough: what the decisions add, in ns per request. With a
// baseline, both builds run in this one process, their rounds alternated, each the median of R.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median, nsPerCall } from './microbench.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const windowMs = opt('--ms', 300);
const rounds = opt('--rounds', 7);

/** bench-proxy's sidecar-traffic resources (the same file). */
const RESOURCES = readFileSync(join(root, 'scripts', 'bench-traffic-resources.yaml'), 'utf8');

/** The fields the engine's request view has, in its order (the decider reads and writes these). */
class View {
  constructor(host) {
    this.headers = { host };
    this.method = 'GET';
    this.url = '/1k.html';
    this.authority = host;
    this.trail = undefined;
    this.endpoint = undefined;
    this.routedCluster = undefined;
    this.routedRoute = undefined;
    this.faultDelayed = false;
  }
}

/** One build's decisions, set up as the sidecar sets them up (data-plane.ts), TLS left out. */
async function load(checkout) {
  const dist = (p) => pathToFileURL(join(checkout, 'dist', 'src', p)).href;
  if (!existsSync(fileURLToPath(dist('traffic/outbound-decider.js')))) {
    console.error(`bench-traffic-path: ${checkout} is not built (make build)`);
    process.exit(1);
  }
  const { ResourceStore } = await import(dist('config/resources/store.js'));
  const { buildClusters } = await import(dist('traffic/clusters.js'));
  const { ClusterManager } = await import(dist('traffic/cluster-manager.js'));
  const { ServiceIndex } = await import(dist('traffic/service-index.js'));
  const { TrafficStore, createTrafficMemory } = await import(dist('traffic/shared-state.js'));
  const { MeshEndpointSource } = await import(dist('traffic/endpoint-sources/mesh-source.js'));
  const { outboundTrafficDecider } = await import(dist('traffic/outbound-decider.js'));
  const { DecisionLog } = await import(dist('gateway/decisions.js'));
  const { Attempts } = await import(dist('proxy/attempts.js'));
  const { DirectionStats } = await import(dist('proxy/stats.js'));

  const resources = new ResourceStore({ defaultNamespace: 'default' });
  resources.update('bench.yaml', RESOURCES);
  const workload = { namespace: 'default', labels: {} };
  const set = buildClusters(resources.snapshot(), { workload, clusterDomain: 'cluster.local', connectTimeoutMs: 10_000 });
  const store = new TrafficStore({ memory: createTrafficMemory({ workers: 1, endpointSlots: 64, clusterSlots: 64 }), worker: 0 });
  const clusters = new ClusterManager({ store, source: new MeshEndpointSource({ dns: { resolve: async () => [] } }) });
  clusters.update(set, []);
  const traffic = { set, clusters, retry503: false, registryOnly: false, index: ServiceIndex.build(set, { namespace: 'default' }) };
  const base = { decide: (req, dst) => ({ kind: 'forward', address: dst.address, port: dst.port }) };
  const decider = outboundTrafficDecider({ base, traffic: () => traffic, tlsFor: () => undefined, decisions: new DecisionLog() });
  const stats = new DirectionStats();
  const sender = { send() {}, drop() {}, answer() {}, replayable: true };
  const service = { address: '198.19.12.1', port: 8080 };
  const elsewhere = { address: '198.19.2.1', port: 8080 };
  return {
    /** n requests to the service: decided, one attempt answered 200, recorded. */
    traffic(n) {
      let sink = 0;
      for (let i = 0; i < n; i++) {
        const req = new View('198.19.12.1:8080');
        const v = decider.decide(req, service);
        const a = new Attempts(v.cluster, sender, stats, true);
        a.start();
        a.head(200);
        a.ended(false);
        req.trail = a.trail;
        req.endpoint = a.endpoint?.hostPort;
        decider.completed(req, v, 200, 0.5, 1000 + i);
        sink += a.retries + 1;
      }
      return sink;
    },
    /** n requests no service covers: the same decider, the original destination. */
    passthrough(n) {
      let sink = 0;
      for (let i = 0; i < n; i++) {
        const req = new View('198.19.2.1:8080');
        const v = decider.decide(req, elsewhere);
        decider.completed(req, v, 200, 0.5, 1000 + i);
        sink += v.port > 0 ? 1 : 0;
      }
      return sink;
    },
  };
}

/** ns per request of `run` (run(n): n requests) over `ms` milliseconds. */
function measure(run, ms) {
  return nsPerCall(run, ms, (sink, n) => {
    if (sink !== n) throw new Error(`${sink} of ${n} requests were decided`);
  });
}

const baseline = process.env.PILOT_AGENT_BASELINE ? resolve(process.env.PILOT_AGENT_BASELINE) : undefined;
const builds = [['new', await load(root)], ...(baseline ? [['base', await load(baseline)]] : [])];
for (const [, b] of builds) for (let w = 0; w < 3; w++) { measure((n) => b.traffic(n), 200); measure((n) => b.passthrough(n), 200); }
const per = new Map(builds.map(([name]) => [name, { traffic: [], passthrough: [], added: [] }]));
for (let r = 0; r < rounds; r++) {
  for (const [name, b] of r % 2 === 0 ? builds : [...builds].reverse()) {
    const t = measure((n) => b.traffic(n), windowMs);
    const p = measure((n) => b.passthrough(n), windowMs);
    const m = per.get(name);
    m.traffic.push(t);
    m.passthrough.push(p);
    m.added.push(t - p);
  }
}
console.log(`== bench-traffic-path: ns per request of the decisions, median of ${rounds} rounds of ${windowMs} ms per setup; node ${process.version}`);
for (const [name] of builds) {
  const m = per.get(name);
  console.log(`${name.padEnd(4)} traffic ${median(m.traffic).toFixed(0)} ns, passthrough ${median(m.passthrough).toFixed(0)} ns, added by traffic management ${median(m.added).toFixed(0)} ns`
    + `   rounds (added): ${m.added.map((x) => x.toFixed(0)).join(' ')}`);
}
