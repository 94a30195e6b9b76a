// Telemetry (telemetry.istio.io): Istio's per-workload access log, metrics and tracing overrides.
// Honoured: `accessLogging` entries turning the access log on or off per workload and direction
// (merged in telemetry-scope.ts). Refused, naming the field: filters (CEL), providers other than
// the built-in `envoy`, metrics, tracing.
import type { AccessLoggingEntry, ResourceMeta, Telemetry } from './types.js';
import { checkFields, child, FieldError, item, obj, oneOf, optBool, optList, optObj, show, str, type Warn } from './fields.js';
import { parseWorkloadSelector } from './selector.js';

export const ACCESS_LOG_MODES = ['CLIENT_AND_SERVER', 'CLIENT', 'SERVER'] as const;
/** The one access log provider here: the proxy's own log (Istio's built-in `envoy` file provider). */
export const ACCESS_LOG_PROVIDER = 'envoy';

/** What each refused field would do, and what to use meanwhile. */
const LATER = {
  metrics: 'metric overrides (disabling a metric, removing or adding tags): the proxy\'s metrics are the same for every workload',
  filter: 'filter expressions (CEL) on access log lines: a workload logs every request or none',
} as const;

/**
 * Istio gives an entry without providers the providers of the entry before it (in this Telemetry,
 * or in the root namespace's or the namespace's above it), and at the top the mesh config's
 * defaultProviders (none in Istio's default mesh config).
 */
const NO_PROVIDER = 'names no provider: it applies to the provider an entry before it names (here, or in the root namespace\'s or the '
  + 'namespace\'s Telemetry), else to the mesh config\'s defaultProviders.accessLogging; with neither it has no effect: '
  + `add providers: [{name: ${ACCESS_LOG_PROVIDER}}]`;

function parseAccessLogging(raw: unknown, at: string): AccessLoggingEntry {
  const o = obj(raw, at);
  checkFields(o, at, { supported: ['providers', 'disabled', 'match'], pending: { filter: LATER.filter } });
  const providers = optList(o['providers'], child(at, 'providers'));
  for (const [i, p] of providers.entries()) {
    const pAt = item(child(at, 'providers'), i);
    const po = obj(p, pAt);
    checkFields(po, pAt, { supported: ['name'] });
    const name = str(po['name'], child(pAt, 'name'), { nonEmpty: true });
    if (name !== ACCESS_LOG_PROVIDER) {
      throw new FieldError(child(pAt, 'name'), `${show(name)} is not supported by this agent: its one access log provider is ${ACCESS_LOG_PROVIDER} (the proxy's own access log, written with the mesh config's accessLogFormat and accessLogEncoding)`);
    }
  }
  const disabled = optBool(o['disabled'], child(at, 'disabled')) === true;
  const match = optObj(o['match'], child(at, 'match'));
  let mode: (typeof ACCESS_LOG_MODES)[number] = 'CLIENT_AND_SERVER';
  if (match !== undefined) {
    checkFields(match, child(at, 'match'), { supported: ['mode'] });
    if (match['mode'] !== undefined) mode = oneOf(match['mode'], child(child(at, 'match'), 'mode'), ACCESS_LOG_MODES);
  }
  return { namesProvider: providers.length > 0, disabled, client: mode !== 'SERVER', server: mode !== 'CLIENT' };
}

export function validateTelemetry(spec: unknown, meta: ResourceMeta, warn: Warn): Telemetry {
  const s = spec === undefined || spec === null ? {} : obj(spec, 'spec');
  checkFields(s, 'spec', {
    supported: ['selector', 'accessLogging'],
    pending: { metrics: LATER.metrics },
    unsupported: ['tracing', 'targetRef', 'targetRefs'],
  });
  const selector = parseWorkloadSelector(s['selector'], 'spec.selector');
  const entries = optList(s['accessLogging'], 'spec.accessLogging').map((raw, i) => parseAccessLogging(raw, item('spec.accessLogging', i)));
  // Only a warning: the entry may take its provider from another Telemetry (root or namespace).
  const firstNaming = entries.findIndex((e) => e.namesProvider);
  for (let i = 0; i < (firstNaming < 0 ? entries.length : firstNaming); i++) warn(item('spec.accessLogging', i), NO_PROVIDER);
  return { meta, ...(selector !== undefined ? { selector } : {}), ...(entries.length > 0 ? { accessLogging: entries } : {}) };
}
