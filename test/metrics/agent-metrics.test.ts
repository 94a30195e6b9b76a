import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { configureLogging, defaultLogOptions } from '../../src/log/logger.js';
import { SCOPE_NAMES } from '../../src/log/levels.js';
import { AGENT_METRIC_NAMES, createAgentMetrics, earliestNotAfter, scrapeMetrics } from '../../src/metrics/agent-metrics.js';
import promClient from 'prom-client';
import { repoRoot } from '../helpers/repo.js';
import { assertValidPrometheusText } from './prom-text-validator.js';

/** Spec 2.4, in its order. */
const SPEC_METRICS = [
  'cert_expiry_seconds', 'dns_requests_total', 'dns_upstream_failures_total', 'dns_upstream_request_duration_seconds',
  'dns_upstream_requests_total', 'proxy_connection_terminations', 'mesh_build', 'meshd_connection_failures',
  'meshd_connection_terminations', 'num_failed_outgoing_requests', 'num_file_secret_failures_total',
  'num_file_watcher_failures_total', 'num_outgoing_requests', 'num_outgoing_retries', 'outgoing_latency',
  'pilot_total_xds_internal_errors', 'pilot_total_xds_rejects', 'pilot_worker_queue_depth', 'pilot_worker_queue_duration',
  'pilot_worker_queue_latency', 'pilot_xds_cds_reject', 'pilot_xds_eds_reject', 'pilot_xds_expired_nonce',
  'pilot_xds_lds_reject', 'pilot_xds_rds_reject', 'pilot_xds_send_time', 'pilot_xds_write_timeout', 'scrape_failures_total',
  'scrapes_total', 'startup_duration_seconds', 'wasm_cache_entries', 'wasm_cache_lookup_count', 'wasm_config_conversion_count',
  'wasm_config_conversion_duration', 'wasm_remote_fetch_count', 'xds_proxy_requests', 'xds_proxy_responses',
];

const chainPath = join(repoRoot, 'test', 'metrics', 'testdata', 'cert-chain.pem');
/** The chain holds a certificate valid until 2126, then one valid until 2036: the earliest is the second. */
const leafNotAfter = (): number => {
  const pem = readFileSync(chainPath, 'utf8');
  const second = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)![1]!;
  return Date.parse(new X509Certificate(second).validTo);
};

describe('agent metrics', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-metrics-'));
    configureLogging({ ...defaultLogOptions, outputLevels: new Map(SCOPE_NAMES.map((s) => [s, 'none'])) });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const build = { version: '1.2.3', revision: 'abc123' };
  const absent = join('/nonexistent', 'cert-chain.pem');

  it('exports mesh_build = 1 with component, tag and revision', async () => {
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: absent });
    const text = await m.registry.metrics();
    assert.match(text, /^# HELP mesh_build \S/m);
    assert.match(text, /^# TYPE mesh_build gauge$/m);
    assert.match(text, /^mesh_build\{component="pilot-agent",tag="1\.2\.3",revision="abc123"\} 1$/m);
    assertValidPrometheusText(text);
  });

  it('takes mesh_build from the build stamp by default', async () => {
    const text = await createAgentMetrics({ defaultMetrics: false, certChainPath: absent }).registry.metrics();
    assert.match(text, /^mesh_build\{component="pilot-agent",tag="[^"]+",revision="[^"]+"\} 1$/m);
  });

  it('leaves startup_duration_seconds out until the agent is ready', async () => {
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: absent });
    assert.doesNotMatch(await m.registry.metrics(), /startup_duration_seconds/);
    m.setStartupDuration(2.25);
    const text = await m.registry.metrics();
    assert.match(text, /^# TYPE startup_duration_seconds gauge$/m);
    assert.match(text, /^startup_duration_seconds 2\.25$/m);
    m.setStartupDuration(3);
    assert.match(await m.registry.metrics(), /^startup_duration_seconds 3$/m);
  });

  it('counts file watcher failures and outgoing requests by type', async () => {
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: absent });
    assert.match(await m.registry.metrics(), /^num_file_watcher_failures_total 0$/m);
    m.incFileWatcherFailures();
    m.incFileWatcherFailures();
    m.incOutgoingRequests('jwks');
    m.incOutgoingRequests('jwks');
    m.incFailedOutgoingRequests('jwks');
    m.incOutgoingRetries('jwks');
    m.addOutgoingLatency('jwks', 12.5);
    const text = await m.registry.metrics();
    assert.match(text, /^num_file_watcher_failures_total 2$/m);
    assert.match(text, /^num_outgoing_requests\{request_type="jwks"\} 2$/m);
    assert.match(text, /^num_failed_outgoing_requests\{request_type="jwks"\} 1$/m);
    assert.match(text, /^num_outgoing_retries\{request_type="jwks"\} 1$/m);
    assert.match(text, /^outgoing_latency\{request_type="jwks"\} 12\.5$/m);
    assertValidPrometheusText(text);
  });

  it('reports cert_expiry_seconds from the earliest notAfter of the chain', async () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: chainPath, now: () => now });
    const text = await m.registry.metrics();
    assert.match(text, /^# TYPE cert_expiry_seconds gauge$/m);
    const line = /^cert_expiry_seconds\{resource_name="default"\} (\S+)$/m.exec(text);
    assert.ok(line, text);
    assert.equal(Number(line[1]), (leafNotAfter() - now) / 1000);
    assert.ok(Number(line[1]) < 7 * 365 * 86400, 'the 2036 certificate, not the 2126 one');
  });

  it('reports a negative cert_expiry_seconds once the chain has expired', async () => {
    const now = leafNotAfter() + 60_000;
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: chainPath, now: () => now });
    assert.match(await m.registry.metrics(), /^cert_expiry_seconds\{resource_name="default"\} -60$/m);
  });

  it('leaves cert_expiry_seconds out while no chain is mounted, and follows the file', async () => {
    const path = join(dir, 'cert-chain.pem');
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: path });
    assert.doesNotMatch(await m.registry.metrics(), /cert_expiry_seconds/);
    copyFileSync(chainPath, path);
    assert.match(await m.registry.metrics(), /^cert_expiry_seconds\{resource_name="default"\} \d/m);
    writeFileSync(path, 'not a certificate\n');
    assert.doesNotMatch(await m.registry.metrics(), /cert_expiry_seconds/);
    rmSync(path);
    assert.doesNotMatch(await m.registry.metrics(), /cert_expiry_seconds/);
  });

  it('earliestNotAfter refuses text without certificates or with a broken one', () => {
    assert.throws(() => earliestNotAfter('hello'), /no PEM certificate/);
    assert.throws(() => earliestNotAfter('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'));
    assert.equal(earliestNotAfter(readFileSync(chainPath, 'utf8')), leafNotAfter());
  });

  it('keeps scrapes_total and scrape_failures_total by part, registered once per registry', async () => {
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: absent });
    const a = scrapeMetrics(m.registry);
    const b = scrapeMetrics(m.registry);
    a.initialise(['agent', 'proxy']);
    a.countScrape('agent');
    b.countScrape('agent');
    b.countFailure('proxy');
    const text = await m.registry.metrics();
    assert.match(text, /^scrapes_total\{type="agent"\} 2$/m);
    assert.match(text, /^scrapes_total\{type="proxy"\} 0$/m);
    assert.match(text, /^scrape_failures_total\{type="agent"\} 0$/m);
    assert.match(text, /^scrape_failures_total\{type="proxy"\} 1$/m);
    assert.equal(text.match(/^# TYPE scrapes_total counter$/gm)?.length, 1);
  });

  it('has no DNS metrics of its own: the DNS proxy registers them when it runs (src/dns/metrics.ts)', async () => {
    const m = createAgentMetrics({ build, defaultMetrics: false, certChainPath: absent });
    assert.doesNotMatch(await m.registry.metrics(), /dns_/);
  });

  it('adds Node process metrics with the mesh_agent_ prefix only', async () => {
    const m = createAgentMetrics({ build, certChainPath: absent });
    const text = await m.registry.metrics();
    assert.match(text, /^mesh_agent_process_cpu_user_seconds_total \d/m);
    assert.match(text, /^mesh_agent_nodejs_heap_size_used_bytes \d/m);
    assert.doesNotMatch(text, /^process_/m);
    assertValidPrometheusText(text);
  });

  it('has every one of prom-client\'s default families but the GC histogram (its perf_hooks observer costs the data path)', async () => {
    const theirs = new promClient.Registry();
    promClient.collectDefaultMetrics({ register: theirs, prefix: 'mesh_agent_' });
    const want = (await theirs.getMetricsAsJSON()).map((f) => f.name).filter((n) => n !== 'mesh_agent_nodejs_gc_duration_seconds').sort();
    theirs.clear();
    const ours = (await createAgentMetrics({ build, certChainPath: absent }).registry.getMetricsAsJSON()).map((f) => f.name).filter((n) => n.startsWith('mesh_agent_')).sort();
    assert.ok(want.length >= 10, `prom-client lists ${want.length} default families`);
    assert.deepEqual(ours, want);
  });

  it('is documented: every agent metric, and one row for every metric of spec 2.4', () => {
    const doc = readFileSync(join(repoRoot, 'docs', 'METRICS.md'), 'utf8');
    for (const name of Object.values(AGENT_METRIC_NAMES)) assert.match(doc, new RegExp(`\`${name}[\`{]`), `docs/METRICS.md lacks ${name}`);
    for (const name of SPEC_METRICS) {
      assert.equal(doc.split('\n').filter((l) => l.startsWith(`| ${name} |`)).length, 1, `one row for ${name}`);
    }
  });
});
