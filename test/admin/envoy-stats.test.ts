// The pure renderings of the admin API: `/stats` (text, JSON), histogram summaries, `/clusters`,
// `/listeners`, the `/logging` query and the `/stats` query.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  BadRequest, envoyStats, histogramQuantile, histogramSummary, listenerOf, parseLoggingChanges, parseStatsQuery,
  renderClustersJson, renderClustersText, renderListenersJson, renderListenersText, renderLoggers, renderStatsJson,
  renderStatsText, type EnvoyStatsInput,
} from '../../src/admin/server.js';
import { SCOPE_NAMES } from '../../src/log/levels.js';
import { Histogram, ProxyStats } from '../../src/proxy/stats.js';

function input(): EnvoyStatsInput {
  const stats = new ProxyStats();
  const out = stats.outbound;
  out.cxTotal = 10; out.cxActive = 3; out.cxErrors = 2; out.rxBytes = 1000; out.txBytes = 5000; out.tcpCxTotal = 4;
  out.rqTotal = 6; out.rqActive = 1; out.rqProtocolErrors = 1; out.rqBodyBytes = 300; out.rsBodyBytes = 4000;
  out.upstreamCxTotal = 6; out.upstreamCxActive = 2; out.upstreamCxConnectFail = 1; out.upstreamCxConnectTimeout = 1; out.upstreamRqErrors = 1;
  out.recordResponse(200, 3);
  out.recordResponse(204, 3);
  out.recordResponse(404, 20);
  out.recordResponse(503, 30);
  out.recordResponse(101, 1);
  stats.inbound.cxTotal = 1;
  stats.loopsRefused = 2;
  return {
    stats,
    listeners: [{ name: 'virtualOutbound', address: '0.0.0.0', port: 15001 }, { name: 'virtualInbound', address: '::', port: 15006 }],
    state: 'LIVE',
    uptimeSeconds: 42.9,
    memory: { allocated: 1000, heapSize: 2000, physical: 3000 },
  };
}

const noQuery = { usedOnly: false };

describe('/stats', () => {
  it('prints Envoy names with the ProxyStats numbers, sorted', () => {
    const text = renderStatsText(envoyStats(input()), noQuery);
    const lines = text.trimEnd().split('\n');
    const values = lines.filter((l) => !l.includes('downstream_rq_time'));
    assert.deepEqual(values, [...values].sort(), 'counters and gauges sorted by name');
    for (const expected of [
      'cluster.outbound.upstream_cx_active: 2',
      'cluster.outbound.upstream_cx_connect_fail: 1',
      'cluster.outbound.upstream_cx_connect_timeout: 1',
      'cluster.outbound.upstream_cx_total: 6',
      'cluster.outbound.upstream_rq_error: 1',
      'http.outbound.downstream_cx_protocol_error: 1',
      'http.outbound.downstream_rq_1xx: 1',
      'http.outbound.downstream_rq_2xx: 2',
      'http.outbound.downstream_rq_3xx: 0',
      'http.outbound.downstream_rq_4xx: 1',
      'http.outbound.downstream_rq_5xx: 1',
      'http.outbound.downstream_rq_active: 1',
      'http.outbound.downstream_rq_completed: 5',
      'http.outbound.downstream_rq_total: 6',
      'http.outbound.downstream_rq_body_bytes_total: 300',
      'http.outbound.downstream_rs_body_bytes_total: 4000',
      'listener.0.0.0.0_15001.downstream_cx_active: 3',
      'listener.0.0.0.0_15001.downstream_cx_destroy: 7',
      'listener.0.0.0.0_15001.downstream_cx_error: 2',
      'listener.0.0.0.0_15001.downstream_cx_rx_bytes_total: 1000',
      'listener.0.0.0.0_15001.downstream_cx_total: 10',
      'listener.0.0.0.0_15001.downstream_cx_tx_bytes_total: 5000',
      'listener.[__]_15006.downstream_cx_total: 1',
      'server.live: 1',
      'server.loop_connections_refused: 2',
      'server.memory_allocated: 1000',
      'server.memory_heap_size: 2000',
      'server.memory_physical_size: 3000',
      'server.state: 0',
      'server.total_connections: 3',
      'server.uptime: 42',
      'tcp.outbound.downstream_cx_total: 4',
    ]) assert.ok(lines.includes(expected), `missing "${expected}" in\n${text}`);
    // Histograms come last, as Envoy prints them.
    assert.deepEqual(lines.slice(-2).map((l) => l.split(':')[0]), ['http.inbound.downstream_rq_time', 'http.outbound.downstream_rq_time']);
    assert.equal(lines.at(-2), 'http.inbound.downstream_rq_time: No recorded values');
    assert.match(lines.at(-1)!, /^http\.outbound\.downstream_rq_time: P0\(nan,0\.5\) P25\(nan,[\d.]+\) .* P100\(nan,50\)$/);
  });

  it('reports the server state as Envoy numbers it', () => {
    const states = [['LIVE', 0, 1], ['DRAINING', 1, 0], ['PRE_INITIALIZING', 2, 0], ['INITIALIZING', 3, 0]] as const;
    for (const [state, number, live] of states) {
      const text = renderStatsText(envoyStats({ ...input(), state }), { usedOnly: false, filter: /^server\.(state|live)$/ });
      assert.equal(text, `server.live: ${live}\nserver.state: ${number}\n`);
    }
  });

  it('uses the default capture listeners when the agent names none', () => {
    assert.deepEqual(listenerOf([], 'outbound'), { address: '0.0.0.0', port: 15001 });
    assert.deepEqual(listenerOf([], 'inbound'), { address: '0.0.0.0', port: 15006 });
    const text = renderStatsText(envoyStats({ ...input(), listeners: [] }), { usedOnly: false, filter: /downstream_cx_total$/ });
    assert.match(text, /^listener\.0\.0\.0\.0_15006\.downstream_cx_total: 1$/m);
  });

  it('filters with a regex (a search, as Envoy) and with usedonly', () => {
    const all = envoyStats(input());
    assert.equal(renderStatsText(all, { usedOnly: false, filter: /rq_[45]xx/ }),
      'http.inbound.downstream_rq_4xx: 0\nhttp.inbound.downstream_rq_5xx: 0\nhttp.outbound.downstream_rq_4xx: 1\nhttp.outbound.downstream_rq_5xx: 1\n');
    assert.equal(renderStatsText(all, { usedOnly: true, filter: /rq_[45]xx/ }),
      'http.outbound.downstream_rq_4xx: 1\nhttp.outbound.downstream_rq_5xx: 1\n');
    const used = renderStatsText(all, { usedOnly: true });
    assert.doesNotMatch(used, /: 0$/m);
    assert.doesNotMatch(used, /inbound\.downstream_rq_time/, 'an empty histogram is not used');
    assert.equal(renderStatsText(all, { usedOnly: false, filter: /^nothing$/ }), '');
  });

  it('prints Envoy\'s JSON', () => {
    const json = JSON.parse(renderStatsJson(envoyStats(input()), { usedOnly: false, filter: /outbound\.downstream_rq_(2xx|time)/ })) as {
      stats: unknown[];
    };
    assert.deepEqual(json.stats[0], { name: 'http.outbound.downstream_rq_2xx', value: 2 });
    const histograms = (json.stats[1] as { histograms: { supported_quantiles: number[]; computed_quantiles: { name: string; values: { interval: null; cumulative: number }[] }[] } }).histograms;
    assert.deepEqual(histograms.supported_quantiles, [0, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 100]);
    assert.equal(histograms.computed_quantiles[0]!.name, 'http.outbound.downstream_rq_time');
    assert.equal(histograms.computed_quantiles[0]!.values.length, 10);
    assert.deepEqual(histograms.computed_quantiles[0]!.values[0], { interval: null, cumulative: 0.5 });
    assert.equal(json.stats.length, 2);
    const none = JSON.parse(renderStatsJson(envoyStats(input()), { usedOnly: false, filter: /^server\.live$/ })) as { stats: unknown[] };
    assert.deepEqual(none, { stats: [{ name: 'server.live', value: 1 }] });
  });
});

describe('histogram quantiles', () => {
  const h = new Histogram([10, 20, 40]);
  it('are absent without samples', () => {
    assert.equal(histogramQuantile(h, 50), undefined);
    assert.equal(histogramSummary(h), 'No recorded values');
  });
  it('interpolate inside the bucket and stop at the last bound', () => {
    for (const v of [5, 15, 15, 30]) h.observe(v);
    assert.equal(histogramQuantile(h, 0), 0);
    assert.equal(histogramQuantile(h, 25), 10);
    assert.equal(histogramQuantile(h, 50), 15);
    assert.equal(histogramQuantile(h, 100), 40);
    h.observe(1000);
    assert.equal(histogramQuantile(h, 100), 40);
    assert.match(histogramSummary(h), /^P0\(nan,0\) P25\(nan,\d+(\.\d+)?\) P50\(nan,[\d.]+\)/);
  });
});

describe('parseStatsQuery', () => {
  it('reads filter, usedonly and format', () => {
    const q = parseStatsQuery(new URLSearchParams('filter=^server\\.&usedonly&format=json'));
    assert.equal(q.filter?.source, '^server\\.');
    assert.equal(q.usedOnly, true);
    assert.equal(q.format, 'json');
    assert.deepEqual(parseStatsQuery(new URLSearchParams('')), { usedOnly: false, format: 'text' });
  });
  it('refuses a bad regex and a bad format, naming them', () => {
    assert.throws(() => parseStatsQuery(new URLSearchParams('filter=(')), (e: unknown) =>
      e instanceof BadRequest && /filter: invalid regex "\("/.test(e.message));
    assert.throws(() => parseStatsQuery(new URLSearchParams('format=html')), /format: "html" is not one of text, json, prometheus/);
  });
});

describe('/clusters and /listeners', () => {
  const clusters = [
    { name: 'outbound|80||web', address: '10.0.0.5', port: 80, cxActive: 1, cxTotal: 4, rqTotal: 9, connectFail: 2 },
    { name: 'outbound|80||web', address: 'fd00::5', port: 80, cxActive: 0, cxTotal: 1, rqTotal: 1, connectFail: 0 },
  ];
  it('prints Envoy\'s cluster text', () => {
    assert.equal(renderClustersText(clusters), [
      'outbound|80||web::observability_name::outbound|80||web',
      'outbound|80||web::10.0.0.5:80::cx_active::1',
      'outbound|80||web::10.0.0.5:80::cx_connect_fail::2',
      'outbound|80||web::10.0.0.5:80::cx_total::4',
      'outbound|80||web::10.0.0.5:80::rq_total::9',
      'outbound|80||web::10.0.0.5:80::health_flags::healthy',
      'outbound|80||web::[fd00::5]:80::cx_active::0',
      'outbound|80||web::[fd00::5]:80::cx_connect_fail::0',
      'outbound|80||web::[fd00::5]:80::cx_total::1',
      'outbound|80||web::[fd00::5]:80::rq_total::1',
      'outbound|80||web::[fd00::5]:80::health_flags::healthy',
      '',
    ].join('\n'));
    assert.equal(renderClustersText([]), '');
  });
  it('prints Envoy\'s cluster JSON', () => {
    const json = JSON.parse(renderClustersJson(clusters)) as { cluster_statuses: { name: string; host_statuses: { address: unknown; stats: { name: string; value: string }[] }[] }[] };
    assert.equal(json.cluster_statuses.length, 1);
    assert.equal(json.cluster_statuses[0]!.host_statuses.length, 2);
    assert.deepEqual(json.cluster_statuses[0]!.host_statuses[0]!.address, { socket_address: { address: '10.0.0.5', port_value: 80 } });
    assert.deepEqual(json.cluster_statuses[0]!.host_statuses[0]!.stats.find((s) => s.name === 'rq_total'), { name: 'rq_total', value: '9' });
  });
  it('prints listeners as name::address:port and as JSON', () => {
    const listeners = [{ name: 'virtualOutbound', address: '0.0.0.0', port: 15001 }, { name: 'virtualInbound', address: '::', port: 15006 }];
    assert.equal(renderListenersText(listeners), 'virtualOutbound::0.0.0.0:15001\nvirtualInbound::[::]:15006\n');
    assert.deepEqual(JSON.parse(renderListenersJson(listeners)), { listener_statuses: [
      { name: 'virtualOutbound', local_address: { socket_address: { address: '0.0.0.0', port_value: 15001 } } },
      { name: 'virtualInbound', local_address: { socket_address: { address: '::', port_value: 15006 } } },
    ] });
  });
});

describe('/logging', () => {
  const changes = (query: string): [string, string][] => [...parseLoggingChanges(new URLSearchParams(query))];
  it('reads ?<scope>=<level> and ?level=<level> (every scope; named scopes win)', () => {
    assert.deepEqual(changes('dns=debug&ads=error'), [['dns', 'debug'], ['ads', 'error']]);
    const all = new Map(changes('dns=error&level=debug'));
    assert.equal(all.size, SCOPE_NAMES.length);
    assert.equal(all.get('dns'), 'error');
    assert.equal(all.get('ads'), 'debug');
    assert.equal(new Map(changes('all=warn')).get('klog'), 'warn');
  });
  it('takes Envoy\'s level names too', () => {
    assert.deepEqual(changes('dns=trace&ads=warning&ca=critical&sds=off&wasm=WARN'),
      [['dns', 'debug'], ['ads', 'warn'], ['ca', 'fatal'], ['sds', 'none'], ['wasm', 'warn']]);
  });
  it('refuses an unknown scope or level, naming it', () => {
    assert.throws(() => changes('nosuch=debug'), (e: unknown) => e instanceof BadRequest && /unknown scope "nosuch"/.test(e.message));
    assert.throws(() => changes('dns=loud'), /unknown level "loud" for scope dns/);
    assert.throws(() => changes('level=loud'), /unknown level "loud"; levels are/);
    assert.throws(() => changes('dns'), /unknown level "" for scope dns/);
  });
  it('lists every scope', () => {
    const levels = Object.fromEntries(SCOPE_NAMES.map((s) => [s, 'info'])) as Parameters<typeof renderLoggers>[0];
    const text = renderLoggers({ ...levels, dns: 'debug' });
    assert.equal(text.split('\n')[0], 'active loggers:');
    assert.match(text, /^ {2}dns: debug$/m);
    assert.equal(text.trimEnd().split('\n').length, SCOPE_NAMES.length + 1);
  });
});
