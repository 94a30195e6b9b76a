// The DNS series on both registries (merged 15020 and proxy 15090).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { registerDnsMetrics } from '../../src/dns/metrics.js';

describe('registerDnsMetrics', () => {
  it('registers the four series of spec 2.4 and the mismatch counter on every registry, one set of values', async () => {
    const agent = new Registry();
    const proxy = new Registry();
    const m = registerDnsMetrics([agent, proxy]);
    m.incRequests();
    m.incRequests();
    m.incUpstreamRequests();
    m.incUpstreamFailures();
    m.observeUpstreamDuration(0.003);
    m.incUpstreamMismatches();
    m.incUpstreamMismatches();
    for (const registry of [agent, proxy]) {
      const text = await registry.metrics();
      assert.match(text, /^# TYPE dns_requests_total counter$/m);
      assert.match(text, /^dns_requests_total 2$/m);
      assert.match(text, /^dns_upstream_requests_total 1$/m);
      assert.match(text, /^dns_upstream_failures_total 1$/m);
      assert.match(text, /^dns_upstream_request_duration_seconds_bucket\{le="0.005"\} 1$/m);
      assert.match(text, /^dns_upstream_request_duration_seconds_count 1$/m);
      assert.match(text, /^# TYPE dns_upstream_mismatched_answers_total counter$/m);
      assert.match(text, /^dns_upstream_mismatched_answers_total 2$/m);
    }
  });

  it('a second registration on the same registry does not throw', () => {
    const registry = new Registry();
    registerDnsMetrics([registry]);
    assert.doesNotThrow(() => registerDnsMetrics([registry]));
  });
});
