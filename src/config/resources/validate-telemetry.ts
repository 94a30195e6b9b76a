// Telemetry (telemetry.istio.io): Istio's per-workload access log, metrics and tracing overrides.
// Honoured: turning the access log off per workload and direction (`accessLogging` entries with
// `disabled: true`). Refused, naming the field: turning it on (the mesh config's accessLogFile does
// that for every workload), filters, providers other than the built-in `envoy`, metrics, tracing.
import type { ResourceMeta, Telemetry } from './types.js';
import { checkFields, child, FieldError, item, obj, oneOf, optBool, optList, optObj, show, str, type Warn } from './fields.js';
import { parseWorkloadSelector } from './selector.js';

export const ACCESS_LOG_MODES = ['CLIENT_AND_SERVER', 'CLIENT', 'SERVER'] as const;
/** The one access log provider here: the proxy's own log (Istio's built-in `envoy` file provider). */
export const ACCESS_LOG_PROVIDER = 'envoy';

/** What each refused field would do, and what to use meanwhile. */
const LATER = {
  metrics: 'metric overrides (disabling a metric, removing or adding tags): the proxy\'s metrics are the same for every workload',
  filter: 'filter expressions (CEL) on access log lines: a workload logs every request or none',
  enable: 'turning the access log on per workload: the mesh config\'s accessLogFile turns it on for every workload, and a Telemetry can turn it off',
} as const;

function parseAccessLogging(raw: unknown, at: string): { client: boolean; server: boolean } {
  const o = obj(raw, at);
  checkFields(o, at, { supported: ['providers', 'disabled', 'match'], pending: { filter: LATER.filter } });
  for (const [i, p] of optList(o['providers'], child(at, 'providers')).entries()) {
    const pAt = item(child(at, 'providers'), i);
    const po = obj(p, pAt);
    checkFields(po, pAt, { supported: ['name'] });
    const name = str(po['name'], child(pAt, 'name'), { nonEmpty: true });
    if (name !== ACCESS_LOG_PROVIDER) {
      throw new FieldError(child(pAt, 'name'), `${show(name)} is not supported by this agent: its one access log provider is ${ACCESS_LOG_PROVIDER} (the proxy's own access log, the mesh config's accessLogFile)`);
    }
  }
  if (optBool(o['disabled'], child(at, 'disabled')) !== true) throw new FieldError(o['disabled'] === undefined ? at : child(at, 'disabled'), `is not supported yet: ${LATER.enable}`);
  const match = optObj(o['match'], child(at, 'match'));
  let mode: (typeof ACCESS_LOG_MODES)[number] = 'CLIENT_AND_SERVER';
  if (match !== undefined) {
    checkFields(match, child(at, 'match'), { supported: ['mode'] });
    if (match['mode'] !== undefined) mode = oneOf(match['mode'], child(child(at, 'match'), 'mode'), ACCESS_LOG_MODES);
  }
  return { client: mode !== 'SERVER', server: mode !== 'CLIENT' };
}

export function validateTelemetry(spec: unknown, meta: ResourceMeta, _warn: Warn): Telemetry {
  const s = spec === undefined || spec === null ? {} : obj(spec, 'spec');
  checkFields(s, 'spec', {
    supported: ['selector', 'accessLogging'],
    pending: { metrics: LATER.metrics },
    unsupported: ['tracing', 'targetRef', 'targetRefs'],
  });
  const selector = parseWorkloadSelector(s['selector'], 'spec.selector');
  let accessLogOff: Telemetry['accessLogOff'];
  for (const [i, raw] of optList(s['accessLogging'], 'spec.accessLogging').entries()) {
    const off = parseAccessLogging(raw, item('spec.accessLogging', i));
    accessLogOff = { client: off.client || (accessLogOff?.client ?? false), server: off.server || (accessLogOff?.server ?? false) };
  }
  return { meta, ...(selector !== undefined ? { selector } : {}), ...(accessLogOff !== undefined ? { accessLogOff } : {}) };
}
