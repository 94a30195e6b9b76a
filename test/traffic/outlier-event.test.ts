import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatOutlierEvent, type OutlierEvent } from '../../src/traffic/outlier-event.js';
import { assertGolden } from '../helpers/golden.js';

const at = Date.UTC(2024, 4, 1, 10, 0, 0);

describe('formatOutlierEvent', () => {
  const events: OutlierEvent[] = [
    { action: 'EJECT', type: 'CONSECUTIVE_5XX', clusterName: 'outbound|80|v1|reviews.default.svc.cluster.local', upstreamUrl: '10.0.0.1:80',
      numEjections: 1, enforced: true, timestampMs: at },
    { action: 'UNEJECT', clusterName: 'outbound|80|v1|reviews.default.svc.cluster.local', upstreamUrl: '10.0.0.1:80',
      numEjections: 1, enforced: false, timestampMs: at + 35_123, secsSinceLastAction: 35.9 },
    { action: 'EJECT', type: 'CONSECUTIVE_GATEWAY_FAILURE', clusterName: 'outbound|9080||ratings.default.svc.cluster.local', upstreamUrl: '[fd00::7]:9080',
      numEjections: 2, enforced: true, timestampMs: at + 60_000, secsSinceLastAction: 24 },
    { action: 'EJECT', type: 'CONSECUTIVE_LOCAL_ORIGIN_FAILURE', clusterName: 'outbound|80||db', upstreamUrl: '10.0.0.9:80',
      numEjections: 3, enforced: true, timestampMs: at + 1 },
  ];

  it('writes Envoy\'s OutlierDetectionEvent JSON lines (golden)', () => {
    assertGolden('traffic/testdata/outlier-events.golden', events.map((e) => `${formatOutlierEvent(e)}\n`).join(''));
  });

  it('gives one JSON object per line, fields in Envoy\'s order', () => {
    const line = formatOutlierEvent(events[1]!);
    assert.doesNotMatch(line, /\n/);
    assert.deepEqual(Object.keys(JSON.parse(line) as object),
      ['type', 'timestamp', 'secs_since_last_action', 'cluster_name', 'upstream_url', 'action', 'num_ejections', 'enforced']);
    assert.deepEqual(Object.keys(JSON.parse(formatOutlierEvent(events[0]!)) as object),
      ['type', 'timestamp', 'cluster_name', 'upstream_url', 'action', 'num_ejections', 'enforced', 'eject_consecutive_event']);
  });
});
