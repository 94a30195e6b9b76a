#!/usr/bin/env node
// Benchmark of the DNS proxy on loopback: queries per second (and latency) of UDP queries sent
// straight to a resolver, forwarded to it through the proxy, and answered by the proxy itself from a
// ServiceEntry. Needs a build (dist/); no root.
//
//   node scripts/bench-dns.mjs [--seconds N] [--rounds R] [--window W]
//
// Three processes, as in a pod: this one is the application (W queries outstanding at all times, a
// new one sent per answer), the resolver is a minimal node:dgram responder (a canned A record, so the
// resolver is never what limits the figure), the proxy is src/dns/server.js as the agent starts it.
// Rounds alternate direct / forwarded / local; each case reports its median round, with p50/p99
// latency; the proxy's CPU time per query and its RSS (after warm-up, after the run) close the report.
import { spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => join(root, 'dist', 'src', p);
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const HOST = '127.0.0.1';

// ---- the resolver child: echo the question, one A record, as fast as node:dgram goes.
if (args[0] === '--resolver') {
  const s = createSocket('udp4');
  const rr = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
  s.on('message', (q, rinfo) => {
    const a = Buffer.concat([q, rr]);
    a[2] = 0x80 | (q[2] & 0x79);
    a[3] = 0x80;
    a.writeUInt16BE(1, 6);
    s.send(a, rinfo.port, rinfo.address);
  });
  s.bind(0, HOST, () => console.log(s.address().port));
  await new Promise(() => {});
}

// ---- the proxy child: the DNS proxy forwarding to the resolver, with one ServiceEntry.
if (args[0] === '--proxy') {
  const { setScopeLevel } = await import(dist('log/logger.js'));
  setScopeLevel('dns', 'warn');
  const { startDnsProxy } = await import(dist('dns/server.js'));
  const { DEFAULT_RESOLVER_CONFIG } = await import(dist('dns/resolv-conf.js'));
  const proxy = await startDnsProxy({
    address: `${HOST}:0`, domain: 'bench.svc.cluster.local', parallel: false, upstreamPort: Number(args[1]),
    resolver: { ...DEFAULT_RESOLVER_CONFIG, nameservers: [HOST] },
  });
  proxy.setServiceEntries([{
    meta: { kind: 'ServiceEntry', apiVersion: 'networking.mesh.io/v1', name: 'local', namespace: 'bench', origin: { file: '-', index: 0 } },
    hosts: ['local.bench.test'], addresses: ['10.0.0.1'], ports: [],
  }]);
  process.on('SIGINT', () => process.exit(0)); // a normal exit, so that --cpu-prof can write its profile
  console.log(proxy.port);
  await new Promise(() => {});
}

// ---- the application: measure.
if (!existsSync(dist('dns/server.js'))) {
  console.error('bench-dns: build first (make build)');
  process.exit(1);
}
const seconds = opt('--seconds', Number(process.env.BENCH_DNS_SECONDS) || 3);
const rounds = opt('--rounds', 3);
const window = opt('--window', 32);

function child(...childArgs) {
  const c = spawn(process.execPath, [fileURLToPath(import.meta.url), ...childArgs], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    c.once('exit', (code) => reject(new Error(`${childArgs[0]} exited with ${code}`)));
    c.stdout.setEncoding('utf8').once('data', (line) => resolve({ child: c, port: Number(line.trim()) }));
  });
}

function queryFor(name) {
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  return Buffer.concat([Buffer.from([0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]), ...labels, Buffer.from([0, 0, 1, 0, 1])]);
}

/** `window` queries in flight for `seconds`; answers counted per second, latency per query. */
function load(port, name) {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    const template = queryFor(name);
    const sentAt = new Float64Array(65536);
    const latencies = [];
    let id = 0;
    let answered = 0;
    let lost = 0;
    let running = true;
    const send = () => {
      id = (id + 1) & 0xffff;
      const q = Buffer.from(template);
      q.writeUInt16BE(id, 0);
      sentAt[id] = performance.now();
      s.send(q, port, HOST);
    };
    s.on('message', (a) => {
      const at = sentAt[a.readUInt16BE(0)];
      if (!at) return;
      sentAt[a.readUInt16BE(0)] = 0;
      answered++;
      if (latencies.length < 200_000) latencies.push(performance.now() - at);
      if (running) send();
    });
    // A lost datagram would shrink the window for good: refill what has waited over a second.
    const refill = setInterval(() => {
      const now = performance.now();
      for (let i = 0; i < sentAt.length; i++) {
        if (sentAt[i] && now - sentAt[i] > 1000) { sentAt[i] = 0; lost++; if (running) send(); }
      }
    }, 500);
    const started = performance.now();
    s.bind(0, HOST, () => { for (let i = 0; i < window; i++) send(); });
    setTimeout(() => {
      running = false;
      const elapsed = (performance.now() - started) / 1000;
      clearInterval(refill);
      setTimeout(() => {
        s.close();
        latencies.sort((x, y) => x - y);
        const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? NaN;
        resolve({ qps: answered / elapsed, p50: pct(0.5), p99: pct(0.99), lost });
      }, 100);
    }, seconds * 1000);
  });
}

function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 1/100 s
}

function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

const resolver = await child('--resolver');
const proxy = await child('--proxy', String(resolver.port));
try {
  const cases = [
    ['direct to the resolver', resolver.port, 'bench.example.org'],
    ['through the proxy (forwarded)', proxy.port, 'bench.example.org'],
    ['through the proxy (local answer)', proxy.port, 'local.bench.test'],
  ];
  const results = new Map(cases.map(([label]) => [label, []]));
  let proxyCpu = 0;
  let proxyQueries = 0;
  await load(proxy.port, 'warm.example.org'); // JIT warm-up, not reported
  const rssWarm = rssMiB(proxy.child.pid);
  for (let r = 0; r < rounds; r++) {
    for (const [label, port, name] of cases) {
      const cpu = port === proxy.port ? cpuSeconds(proxy.child.pid) : 0;
      const res = await load(port, name);
      if (port === proxy.port) {
        proxyCpu += cpuSeconds(proxy.child.pid) - cpu;
        proxyQueries += res.qps * seconds;
      }
      results.get(label).push(res);
    }
  }
  console.log(`== DNS proxy, UDP on loopback (${window} queries in flight, ${rounds} rounds of ${seconds}s, median round)`);
  const median = (list) => [...list].sort((a, b) => a.qps - b.qps)[Math.floor(list.length / 2)];
  const direct = median(results.get(cases[0][0])).qps;
  for (const [label] of cases) {
    const m = median(results.get(label));
    const lost = results.get(label).reduce((n, x) => n + x.lost, 0);
    console.log(`${label.padEnd(36)} ${m.qps.toFixed(0).padStart(7)} q/s  ${(m.qps / direct).toFixed(2)}x direct  p50 ${m.p50.toFixed(3)} ms  p99 ${m.p99.toFixed(3)} ms${lost ? `  (${lost} lost)` : ''}`);
  }
  console.log(`proxy CPU ${(proxyCpu / proxyQueries * 1e6).toFixed(1)} µs/query; RSS ${rssWarm.toFixed(1)} MiB after warm-up, ${rssMiB(proxy.child.pid).toFixed(1)} MiB after the run`);
} finally {
  resolver.child.removeAllListeners('exit');
  proxy.child.removeAllListeners('exit');
  resolver.child.kill('SIGKILL');
  proxy.child.kill('SIGKILL');
}
process.exit(0);
