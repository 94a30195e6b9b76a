// Telemetry (telemetry.istio.io): Istio's per-workload access log, metrics and tracing overrides.
// Read so that a resource written for Istio is judged field by field: the selector is read, every
// override is refused naming the field and why (none is honoured yet), never accepted and ignored.
import type { ResourceMeta, Telemetry } from './types.js';
import { checkFields, obj, type Warn } from './fields.js';
import { parseWorkloadSelector } from './selector.js';

/** What each refused field would do, and what to use meanwhile. */
const LATER = {
  accessLogging: 'switching the access log per workload (providers, disabled, match, filter): the access log is the mesh config\'s accessLogFile for every workload',
  metrics: 'metric overrides (disabling a metric, removing or adding tags): the proxy\'s metrics are the same for every workload',
} as const;

export function validateTelemetry(spec: unknown, meta: ResourceMeta, _warn: Warn): Telemetry {
  const s = spec === undefined || spec === null ? {} : obj(spec, 'spec');
  checkFields(s, 'spec', {
    supported: ['selector'],
    pending: { accessLogging: LATER.accessLogging, metrics: LATER.metrics },
    unsupported: ['tracing', 'targetRef', 'targetRefs'],
  });
  const selector = parseWorkloadSelector(s['selector'], 'spec.selector');
  return { meta, ...(selector !== undefined ? { selector } : {}) };
}
