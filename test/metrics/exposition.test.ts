// The pure parts of src/metrics/servers.ts: Prometheus text parsing, merging and filtering, the
// annotation parser, the localhost decision and one merged scrape with stand-in sources.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Counter, Registry } from 'prom-client';
import { AgentError } from '../../src/errors/agent-error.js';
import { configureLogging, defaultLogOptions } from '../../src/log/logger.js';
import { SCOPE_NAMES } from '../../src/log/levels.js';
import { scrapeMetrics } from '../../src/metrics/agent-metrics.js';
import {
  ExpositionError, filterExposition, mergeExpositions, parseExposition, renderExposition,
} from '../../src/metrics/exposition.js';
import { mergedMetrics, parseMetricsAnnotations } from '../../src/metrics/servers.js';
import { assertValidPrometheusText, familyOrder, validatePrometheusText } from './prom-text-validator.js';

before(() => configureLogging({ ...defaultLogOptions, outputLevels: new Map(SCOPE_NAMES.map((s) => [s, 'none'])) }));

const histogramText = [
  '# HELP rq_ms Request time.',
  '# TYPE rq_ms histogram',
  'rq_ms_bucket{le="1"} 1',
  'rq_ms_bucket{le="+Inf"} 2',
  'rq_ms_sum 3.5',
  'rq_ms_count 2',
  '',
].join('\n');

describe('parseExposition', () => {
  it('groups histogram samples under their family and keeps HELP, TYPE and values', () => {
    const families = parseExposition(`${histogramText}\n# comment\nup 1 1700000000000\n`);
    assert.deepEqual(families.map((f) => [f.name, f.type, f.help, f.samples.length]), [
      ['rq_ms', 'histogram', 'Request time.', 4],
      ['up', 'untyped', undefined, 1],
    ]);
    assert.deepEqual(families[1]!.samples[0], { name: 'up', labels: [], value: '1', timestamp: '1700000000000' });
  });

  it('reads escaped label values and renders them back escaped', () => {
    const text = 'x{a="q\\"uote",b="back\\\\slash",c="new\\nline",} +Inf\n';
    const [family] = parseExposition(text);
    assert.deepEqual(family!.samples[0]!.labels, [['a', 'q"uote'], ['b', 'back\\slash'], ['c', 'new\nline']]);
    assert.equal(renderExposition(parseExposition(text)), '# TYPE x untyped\nx{a="q\\"uote",b="back\\\\slash",c="new\\nline"} +Inf\n');
  });

  it('accepts what Prometheus accepts: spaces, NaN, exponents, CRLF', () => {
    const families = parseExposition('a { l = "v" } NaN\r\nb 1.5e+06\nc -Inf\n');
    assert.deepEqual(families.map((f) => f.samples[0]!.value), ['NaN', '1.5e+06', '-Inf']);
  });

  const bad: [string, string, RegExp][] = [
    ['a bad value', 'x 1\ny abc\n', /line 2: "abc" is not a number/],
    ['no value', 'x{a="b"}\n', /line 1: expected "<value>/],
    ['an unterminated label', 'x{a="b} 1\n', /line 1: unterminated value of label "a"/],
    ['a bad escape', 'x{a="\\t"} 1\n', /bad escape/],
    ['a label twice', 'x{a="1",a="2"} 1\n', /label "a" given twice/],
    ['a second TYPE', '# TYPE x gauge\n# TYPE x counter\n', /line 2: second TYPE for x/],
    ['a second HELP', '# HELP x a\n# HELP x b\n', /second HELP for x/],
    ['TYPE after samples', 'x 1\n# TYPE x gauge\n', /TYPE for x after its samples/],
    ['an unknown type', '# TYPE x thing\n', /unknown type "thing"/],
    ['a series twice', 'x{a="1"} 1\nx{a="1"} 2\n', /series x\{a="1"\} given twice/],
    ['an OpenMetrics EOF in text', 'x 1\n# EOF\n', /# EOF/],
    ['a bad timestamp', 'x 1 soon\n', /"soon" is not a timestamp/],
  ];
  for (const [what, text, message] of bad) {
    it(`refuses ${what}, naming the line`, () => {
      assert.throws(() => parseExposition(text), (e: unknown) => e instanceof ExpositionError && message.test(e.message));
    });
  }

  it('converts OpenMetrics to 0.0.4: _total counters, no _created, no exemplars, no EOF', () => {
    const om = [
      '# HELP jobs Jobs done.',
      '# TYPE jobs counter',
      '# UNIT jobs jobs',
      'jobs_total{kind="a"} 3 # {trace_id="x"} 1 1700000000.5',
      'jobs_created{kind="a"} 1700000000',
      '# TYPE build info',
      'build_info{version="1"} 1',
      '# TYPE temp gaugehistogram',
      'temp_bucket{le="+Inf"} 2',
      'temp_gcount 2',
      'seen 1 1700000000.25',
      '# EOF',
      '',
    ].join('\n');
    const text = renderExposition(parseExposition(om, { openMetrics: true }));
    assert.equal(text, [
      '# HELP jobs_total Jobs done.',
      '# TYPE jobs_total counter',
      'jobs_total{kind="a"} 3',
      '# TYPE build_info gauge',
      'build_info{version="1"} 1',
      '# TYPE temp_bucket untyped',
      'temp_bucket{le="+Inf"} 2',
      '# TYPE temp_gcount untyped',
      'temp_gcount 2',
      '# TYPE seen untyped',
      'seen 1 1700000000250',
      '',
    ].join('\n'));
    assertValidPrometheusText(text);
  });
});

describe('mergeExpositions', () => {
  it('prints a family several parts have once, with the first HELP/TYPE and every series once', () => {
    const agent = parseExposition('# HELP shared From the agent.\n# TYPE shared counter\nshared{part="agent"} 1\n');
    const app = parseExposition('# HELP shared From the app.\n# TYPE shared counter\nshared{part="app"} 2\nshared{part="agent"} 9\nother 1\n');
    const merged = mergeExpositions([agent, app]);
    const text = renderExposition(merged.families);
    assert.equal(text, [
      '# HELP shared From the agent.',
      '# TYPE shared counter',
      'shared{part="agent"} 1',
      'shared{part="app"} 2',
      '# TYPE other untyped',
      'other 1',
      '',
    ].join('\n'));
    assert.equal(merged.duplicateSeries, 1);
    assertValidPrometheusText(text);
  });

  it('leaves out a later family whose type or sample names clash', () => {
    const first = parseExposition(`${histogramText}# TYPE up gauge\nup 1\n`);
    const later = parseExposition('# TYPE up counter\nup 5\n# TYPE rq_ms_bucket gauge\nrq_ms_bucket{le="1"} 7\n# TYPE fine gauge\nfine 1\n');
    const merged = mergeExpositions([first, later]);
    assert.deepEqual(merged.conflicts, ['up', 'rq_ms_bucket']);
    const text = renderExposition(merged.families);
    assert.deepEqual(familyOrder(text), ['rq_ms', 'up', 'fine']);
    assert.match(text, /^up 1$/m);
    assertValidPrometheusText(text);
  });

  it('keeps the order of the parts', () => {
    const merged = mergeExpositions([parseExposition('a 1\n'), parseExposition('b 1\n'), parseExposition('c 1\n')]);
    assert.deepEqual(merged.families.map((f) => f.name), ['a', 'b', 'c']);
  });
});

describe('filterExposition', () => {
  const families = parseExposition('# TYPE a_total counter\na_total 0\n# TYPE b_total counter\nb_total{x="1"} 0\nb_total{x="2"} 4\n');
  it('keeps families whose name matches the regex', () => {
    assert.deepEqual(filterExposition(families, { filter: /^b/ }).map((f) => f.name), ['b_total']);
  });
  it('with usedOnly, keeps families with a non-zero sample', () => {
    assert.deepEqual(filterExposition(families, { usedOnly: true }).map((f) => f.name), ['b_total']);
  });
});

describe('parseMetricsAnnotations (MESH_METRICS_ANNOTATIONS)', () => {
  const cases: [string, string, ReturnType<typeof parseMetricsAnnotations>][] = [
    ['empty', '', undefined],
    ['blank', '  ', undefined],
    ['the injector\'s form', '{"scrape":"true","port":"8080","path":"/metrics"}', { port: 8080, path: '/metrics' }],
    ['numbers and booleans', '{"scrape":true,"port":9090,"path":"/stats"}', { port: 9090, path: '/stats' }],
    ['defaults (Istio\'s port 80, path /metrics)', '{"scrape":"true"}', { port: 80, path: '/metrics' }],
    ['no scrape field', '{"port":"8080"}', { port: 8080, path: '/metrics' }],
    ['scrape false', '{"scrape":"false","port":"8080"}', undefined],
    ['a path without slash', '{"port":"8080","path":"metrics"}', { port: 8080, path: '/metrics' }],
    ['a path with a query', '{"port":"8080","path":"/m?x=1"}', { port: 8080, path: '/m?x=1' }],
    ['empty strings', '{"scrape":"True","port":"","path":""}', { port: 80, path: '/metrics' }],
  ];
  for (const [name, text, expected] of cases) {
    it(`reads ${name}`, () => assert.deepEqual(parseMetricsAnnotations(text), expected));
  }
  const bad: [string, string, RegExp][] = [
    ['not JSON', '{scrape:true', /not JSON/],
    ['an array', '["8080"]', /not a JSON object/],
    ['a port out of range', '{"port":"70000"}', /"port" "70000" is not a port/],
    ['a port that is not a number', '{"port":"http"}', /"port" "http" is not a port/],
    ['an object for a field', '{"path":{}}', /"path" is not a string/],
    ['a path with spaces', '{"path":"/a b"}', /contains white space/],
  ];
  for (const [name, text, message] of bad) {
    it(`refuses ${name}, naming the variable`, () => {
      assert.throws(() => parseMetricsAnnotations(text), (e: unknown) => e instanceof AgentError && e.code === 'ERR_ENV_VALUE'
        && e.message.includes('MESH_METRICS_ANNOTATIONS') && message.test(e.message));
    });
  }
});

describe('mergedMetrics', () => {
  const agentRegistry = (): Registry => {
    const registry = new Registry();
    new Counter({ name: 'agent_thing_total', help: 'An agent counter.', registers: [registry] }).inc();
    return registry;
  };
  const proxyText = '# HELP mesh_requests_total Requests.\n# TYPE mesh_requests_total counter\nmesh_requests_total{direction="outbound"} 4\n';

  it('prints agent, then proxy, then application metrics, and counts each part', async () => {
    const registry = agentRegistry();
    const counters = scrapeMetrics(registry);
    const text = await mergedMetrics({
      agent: () => registry.metrics(),
      proxy: () => Promise.resolve(proxyText),
      app: () => Promise.resolve({ text: '# TYPE app_up gauge\napp_up 1\n', openMetrics: false }),
    }, counters);
    assertValidPrometheusText(text);
    assert.deepEqual(familyOrder(text), ['agent_thing_total', 'scrapes_total', 'scrape_failures_total', 'mesh_requests_total', 'app_up']);
    for (const type of ['agent', 'proxy', 'application']) assert.match(text, new RegExp(`^scrapes_total\\{type="${type}"\\} 1$`, 'm'));
  });

  it('leaves a failing or unparsable part out, counts it, and still answers', async () => {
    const registry = agentRegistry();
    const counters = scrapeMetrics(registry);
    const sources = {
      agent: () => registry.metrics(),
      proxy: () => Promise.reject(new Error('proxy registry broke')),
      app: () => Promise.resolve({ text: 'app_up{ 1\n', openMetrics: false }),
    };
    const text = await mergedMetrics(sources, counters);
    assertValidPrometheusText(text);
    assert.doesNotMatch(text, /mesh_requests_total|app_up/);
    // The agent part is made last, so it already shows this scrape's failures.
    assert.match(text, /^scrape_failures_total\{type="proxy"\} 1$/m);
    assert.match(text, /^scrape_failures_total\{type="application"\} 1$/m);
    assert.doesNotMatch(text, /scrape_failures_total\{type="agent"\}/);
    const again = await mergedMetrics(sources, counters);
    assert.match(again, /^scrape_failures_total\{type="proxy"\} 2$/m);
    assert.match(again, /^scrapes_total\{type="agent"\} 2$/m);
  });

  it('does not scrape an application that is not annotated', async () => {
    const registry = agentRegistry();
    const text = await mergedMetrics({ agent: () => registry.metrics(), proxy: () => Promise.resolve('') }, scrapeMetrics(registry));
    assert.doesNotMatch(text, /type="application"/);
  });

  it('the validator itself catches what the merge must avoid', () => {
    assert.notDeepEqual(validatePrometheusText('# TYPE a counter\na 1\n# TYPE a counter\na 2\n').problems, []);
    assert.notDeepEqual(validatePrometheusText('a 1\nb 1\na{x="1"} 1\n').problems, []);
    assert.notDeepEqual(validatePrometheusText('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n').problems, []);
    assert.deepEqual(validatePrometheusText(histogramText).problems, []);
  });
});
