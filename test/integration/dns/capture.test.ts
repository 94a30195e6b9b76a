// DNS capture end to end, as in a pod: a pod namespace and a peer joined by a veth; the pod's
// resolv.conf names a resolver in the peer (a small dns2 server, IPv4 and IPv6); the pod's rules are
// applied by `pilot-agent mesh-iptables --redirect-dns`; the agent (`pilot-agent proxy`,
// MESH_META_DNS_CAPTURE=true) runs as uid 1337 with a ServiceEntry in ./etc/mesh/resources. Then an
// application's query (uid 0) to the resolv.conf servers, over UDP and TCP, IPv4 and IPv6, is
// answered through the agent (the metrics count it, the resolver sees the agent's query), names of
// the ServiceEntry are answered by the agent alone, and with the agent stopped the captured query
// fails while the resolver itself still answers.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createPod, netnsSkip, PEER_V4, PEER_V6, type Namespace, type Pod } from '../../helpers/pod-netns.js';
import { binPath, repoRoot } from '../../helpers/repo.js';
import { cleanEnv, runCli } from '../../helpers/run-cli.js';

const FIXTURES = join(repoRoot, 'test', 'integration', 'dns', 'fixtures');
const SERVERS = [['IPv4', PEER_V4], ['IPv6', PEER_V6]] as const;
const TRANSPORTS = ['udp', 'tcp'] as const;

interface Answer {
  rcode?: number;
  aa?: number;
  answers?: string[];
  error?: string;
}

/** One query from inside a namespace (root, or another uid with `asUid`). */
function ask(ns: Namespace, server: string, name: string, type: string, transport: string, o: { asUid?: number; timeoutMs?: number } = {}): Answer {
  const node = [process.execPath, join(FIXTURES, 'query.mjs'), server, name, type, transport, String(o.timeoutMs ?? 2000)];
  const cmd = o.asUid === undefined ? node : ['setpriv', `--reuid=${o.asUid}`, `--regid=${o.asUid}`, '--clear-groups', ...node];
  const r = ns.exec(cmd[0]!, cmd.slice(1), { allowFailure: true });
  try {
    return JSON.parse(r.stdout) as Answer;
  } catch {
    return { error: `no result: ${r.stdout} ${r.stderr}` };
  }
}

/** The value of a counter in Prometheus text, 0 when absent. */
function counter(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

function lines(child: ChildProcess): { all: () => string[]; ready: Promise<void> } {
  const out: string[] = [];
  let buf = '';
  let resolveReady!: () => void;
  let rejectReady!: (e: Error) => void;
  const ready = new Promise<void>((resolve, reject) => { resolveReady = resolve; rejectReady = reject; });
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line === 'listening') resolveReady();
      else out.push(line);
    }
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  child.once('exit', (code) => rejectReady(new Error(`exited with ${code}: ${err}`)));
  return { all: () => out, ready };
}

describe('DNS capture through the agent, in a pod', { skip: netnsSkip }, () => {
  let pod: Pod;
  let agent: ChildProcess | undefined;
  let agentOutput = '';
  let resolverLog: () => string[];
  const dir = mkdtempSync(join(tmpdir(), 'pa-dns-'));
  let netnsEtc = '';

  before(async () => {
    pod = createPod({ ipv6: true });
    // What `ip netns exec` shows the pod as /etc/resolv.conf (and what mesh-iptables reads).
    netnsEtc = join('/etc/netns', pod.name);
    mkdirSync(netnsEtc, { recursive: true });
    writeFileSync(join(netnsEtc, 'resolv.conf'),
      `search ns1.svc.cluster.local svc.cluster.local cluster.local\nnameserver ${PEER_V4}\nnameserver ${PEER_V6}\noptions ndots:5 timeout:2\n`);

    const resolver = pod.peer.start(process.execPath, [join(FIXTURES, 'resolver.mjs'), PEER_V4, PEER_V6]);
    const log = lines(resolver);
    resolverLog = log.all;
    await log.ready;

    const init = await runCli(['mesh-iptables', '--redirect-dns', '--dual-stack', '-u', '1337', '-g', '1337'],
      { prefix: ['ip', 'netns', 'exec', pod.name], env: cleanEnv() });
    assert.equal(init.code, 0, init.stderr);

    // The agent's working directory, readable by uid 1337, with a ServiceEntry for the name table.
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, 'etc', 'mesh', 'resources'), { recursive: true });
    writeFileSync(join(dir, 'etc', 'mesh', 'resources', 'service-entries.yaml'), [
      'apiVersion: networking.mesh.io/v1',
      'kind: ServiceEntry',
      'metadata: { name: reviews, namespace: ns1 }',
      'spec:',
      '  hosts: [reviews.ns1.svc.cluster.local, api.example.com]',
      '  addresses: [10.20.0.1, "2001:db8:20::1"]',
      '  ports: [{ number: 80, name: http, protocol: HTTP }]',
      '  resolution: STATIC',
      '',
    ].join('\n'));
    for (const d of ['etc', 'etc/mesh', 'etc/mesh/resources']) chmodSync(join(dir, d), 0o755);
    await startAgent();
  });

  const startAgent = async (): Promise<void> => {
    agentOutput = '';
    agent = pod.start('env', ['-i', '-C', dir, `PATH=${process.env['PATH'] ?? '/usr/bin:/bin'}`, 'HOME=/tmp',
      'POD_NAMESPACE=ns1', 'MESH_META_DNS_CAPTURE=true',
      'setpriv', '--reuid=1337', '--regid=1337', '--clear-groups', '--',
      process.execPath, binPath, 'proxy', '--log_target', 'stderr']);
    agent.stderr!.setEncoding('utf8').on('data', (d: string) => { agentOutput += d; });
    agent.stdout!.resume();
    const r = await runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '10'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.equal(r.code, 0, `${r.stderr}\n${agentOutput}`);
  };

  after(() => {
    pod?.close();
    rmSync(dir, { recursive: true, force: true });
    if (netnsEtc) rmSync(netnsEtc, { recursive: true, force: true });
  });

  /** Lets the resolver's output of earlier (synchronous) queries arrive. */
  const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 100));

  /** The resolver's lines after the first `seen`, once some arrived (queries run synchronously block the loop). */
  const logged = async (seen: number): Promise<string[]> => {
    for (let i = 0; i < 50 && resolverLog().length === seen; i++) await new Promise((r) => setTimeout(r, 20));
    return resolverLog().slice(seen);
  };

  /** The Prometheus text of 15020 (merged) or 15090 (proxy), fetched from inside the pod. */
  const scrape = async (port: number): Promise<string> => {
    const script = `fetch('http://127.0.0.1:${port}/stats/prometheus').then(async (r) => process.stdout.write(r.status + '\\n' + await r.text()))`;
    const r = pod.exec(process.execPath, ['-e', script]);
    assert.match(r.stdout, /^200\n/, r.stderr);
    return r.stdout;
  };

  for (const [family, server] of SERVERS) {
    for (const transport of TRANSPORTS) {
      it(`answers the app's ${transport.toUpperCase()} query to the ${family} resolv.conf server through the agent`, async () => {
        const before = await scrape(15020);
        await settle();
        const seen = resolverLog().length;
        const name = `app-${family}-${transport}.peer.test`.toLowerCase();
        const a = ask(pod, server, name, 'A', transport);
        assert.deepEqual(a, { rcode: 0, aa: 0, answers: ['A 203.0.113.7 123'] }, agentOutput);
        const after = await scrape(15020);
        assert.equal(counter(after, 'dns_requests_total'), counter(before, 'dns_requests_total') + 1);
        assert.equal(counter(after, 'dns_upstream_requests_total'), counter(before, 'dns_upstream_requests_total') + 1);
        // The resolver was asked by the agent over the same transport (the agent forwards UDP as UDP).
        const asked = (await logged(seen)).map((l) => JSON.parse(l) as { name: string; transport: string });
        assert.deepEqual(asked.map((q) => `${q.name} ${q.transport}`), [`${name} ${transport}`]);
      });
    }
  }

  it('answers an AAAA query through the agent', () => {
    assert.deepEqual(ask(pod, PEER_V6, 'six.peer.test', 'AAAA', 'udp'), { rcode: 0, aa: 0, answers: ['AAAA 2001:db8:99::7 123'] });
  });

  it('passes an upstream NXDOMAIN on', () => {
    assert.equal(ask(pod, PEER_V4, 'nothing.example.invalid', 'A', 'udp').rcode, 3);
  });

  for (const [family, server] of SERVERS) {
    for (const transport of TRANSPORTS) {
      it(`answers ServiceEntry names locally (${transport.toUpperCase()}, ${family}): FQDN, short name, AAAA, no record of the type`, async () => {
        await settle();
        const seen = resolverLog().length;
        assert.deepEqual(ask(pod, server, 'reviews.ns1.svc.cluster.local', 'A', transport), { rcode: 0, aa: 1, answers: ['A 10.20.0.1 30'] }, agentOutput);
        assert.deepEqual(ask(pod, server, 'reviews', 'A', transport), { rcode: 0, aa: 1, answers: ['A 10.20.0.1 30'] });
        assert.deepEqual(ask(pod, server, 'API.example.com', 'AAAA', transport), { rcode: 0, aa: 1, answers: ['AAAA 2001:db8:20::1 30'] });
        assert.deepEqual(ask(pod, server, 'api.example.com', 'MX', transport), { rcode: 0, aa: 1, answers: [] });
        await settle();
        assert.deepEqual(resolverLog().slice(seen), [], 'the resolver was not asked');
      });
    }
  }

  it('answers the first search-domain expansion with a CNAME and the rest of the walk NXDOMAIN', () => {
    assert.deepEqual(ask(pod, PEER_V4, 'api.example.com.ns1.svc.cluster.local', 'A', 'udp'),
      { rcode: 0, aa: 1, answers: ['CNAME api.example.com 30', 'A 10.20.0.1 30'] });
    assert.equal(ask(pod, PEER_V4, 'api.example.com.svc.cluster.local', 'A', 'udp').rcode, 3);
  });

  it('serves the system resolver (glibc: search list, ndots:5, A and AAAA at once) through the agent', { skip: !existsSync('/usr/bin/getent') && 'no getent' }, () => {
    const getent = (db: string, name: string): string => pod.exec('getent', [db, name], { allowFailure: true }).stdout;
    assert.match(getent('ahostsv4', 'reviews'), /^10\.20\.0\.1\s+STREAM reviews/m);
    assert.match(getent('ahostsv6', 'api.example.com'), /^2001:db8:20::1\s+STREAM/m);
    assert.match(getent('ahostsv4', 'app.peer.test'), /^203\.0\.113\.7\s+STREAM app\.peer\.test/m);
    assert.equal(getent('ahostsv4', 'nothing.example.invalid'), '');
  });

  it('exports the DNS metrics on 15020 and 15090', async () => {
    for (const port of [15020, 15090]) {
      const text = await scrape(port);
      assert.ok(counter(text, 'dns_requests_total') >= 10, `${port}: dns_requests_total`);
      assert.ok(counter(text, 'dns_upstream_requests_total') >= 4, `${port}: dns_upstream_requests_total`);
      assert.match(text, /^dns_upstream_failures_total 0$/m);
      assert.match(text, /^dns_upstream_request_duration_seconds_count [1-9]/m);
    }
  });

  it('fails the captured query with the agent stopped, while the resolver itself still answers', async () => {
    agent!.kill('SIGKILL');
    await new Promise((resolve) => agent!.once('exit', resolve));
    for (const [, server] of SERVERS) {
      for (const transport of TRANSPORTS) {
        const a = ask(pod, server, 'gone.peer.test', 'A', transport, { timeoutMs: 1000 });
        assert.ok(a.error, `${transport} ${server}: ${JSON.stringify(a)}`);
        // uid 1337 is not captured: it reaches the resolver directly.
        assert.deepEqual(ask(pod, server, 'direct.peer.test', 'A', transport, { asUid: 1337 }).answers, ['A 203.0.113.7 123']);
      }
    }
  });
});
