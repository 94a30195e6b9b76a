// MESH_APP_PROBERS (Istio's ISTIO_KUBE_APP_PROBERS): the injector rewrites each container's
// liveness/readiness/startup probe to `GET :15021/app-health/<container>/<livez|readyz|startupz>` and
// hands the original probes to the agent as JSON keyed by that path. This file turns the JSON into a
// typed, frozen table. Pure: no I/O. A bad document or entry never throws: it becomes a message to
// log, and every valid entry is kept (a kubelet probe for a dropped entry then gets 404 and fails).

export type ProbeType = 'livez' | 'readyz' | 'startupz';

export interface ProbeHeader {
  readonly name: string;
  readonly value: string;
}

interface ProbeBase {
  /** The key: `/app-health/<container>/<type>`. */
  readonly path: string;
  readonly container: string;
  readonly type: ProbeType;
  /** timeoutSeconds in ms; Kubernetes' default of 1 s when absent or 0. */
  readonly timeoutMs: number;
}

export interface HttpGetProbe extends ProbeBase {
  readonly kind: 'httpGet';
  readonly scheme: 'HTTP' | 'HTTPS';
  /** httpGet.host: when set, it is the destination instead of the pod IP. */
  readonly host?: string;
  readonly port: number;
  /** The path (and query) requested from the app; always starts with `/`. */
  readonly requestPath: string;
  readonly headers: readonly ProbeHeader[];
}

export interface TcpSocketProbe extends ProbeBase {
  readonly kind: 'tcpSocket';
  readonly host?: string;
  readonly port: number;
}

export interface GrpcProbe extends ProbeBase {
  readonly kind: 'grpc';
  readonly port: number;
  /** grpc.health.v1 service name; '' asks about the server as a whole. */
  readonly service: string;
}

export type AppProbe = HttpGetProbe | TcpSocketProbe | GrpcProbe;

export interface AppProbers {
  /** Valid entries by path. */
  readonly probes: ReadonlyMap<string, AppProbe>;
  /** One message per rejected entry (or for the whole document); for the log. */
  readonly errors: readonly string[];
}

const VARIABLE = 'MESH_APP_PROBERS';
const KINDS = ['httpGet', 'tcpSocket', 'grpc'] as const;
/** Istio's pattern: the container part is anything without a slash. */
const PROBE_PATH = /^\/app-health\/([^/]+)\/(livez|readyz|startupz)$/;
/** RFC 9110 token: what a header name may be. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const DEFAULT_TIMEOUT_SECONDS = 1;

class EntryError extends Error {}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `"${value}"`;
  if (typeof value === 'object') return 'an object';
  return String(value);
}

/** A JSON `null` is an absent field, as for Go's pointer fields. */
function field(obj: Json, name: string): unknown {
  const value = obj[name];
  return value === null ? undefined : value;
}

function port(value: unknown, where: string): number {
  if (value === undefined) throw new EntryError(`${where}.port is missing`);
  if (typeof value === 'string') {
    // Kubernetes allows a container port's name here; the injector resolves names to numbers, and the
    // agent cannot (it does not see the pod spec).
    throw new EntryError(`${where}.port "${value}" is a named port, which cannot be resolved here: give the port number (1-65535)`);
  }
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    throw new EntryError(`${where}.port ${describe(value)} is not a port number (1-65535)`);
  }
  return value;
}

function optionalString(obj: Json, name: string, where: string): string | undefined {
  const value = field(obj, name);
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new EntryError(`${where}.${name} ${describe(value)} is not a string`);
  return value;
}

function timeoutMs(entry: Json): number {
  const value = field(entry, 'timeoutSeconds');
  if (value === undefined || value === 0) return DEFAULT_TIMEOUT_SECONDS * 1000;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new EntryError(`timeoutSeconds ${describe(value)} is not a whole number of seconds`);
  }
  return value * 1000;
}

function headers(value: unknown): ProbeHeader[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new EntryError(`httpGet.httpHeaders ${describe(value)} is not a list of {name, value}`);
  return value.map((item: unknown, i) => {
    const where = `httpGet.httpHeaders[${i}]`;
    if (!isObject(item)) throw new EntryError(`${where} ${describe(item)} is not an object {name, value}`);
    const name = field(item, 'name');
    if (typeof name !== 'string' || !HEADER_NAME.test(name)) {
      throw new EntryError(`${where}.name ${describe(name)} is not a header name`);
    }
    const headerValue = field(item, 'value') ?? '';
    if (typeof headerValue !== 'string' || /[\r\n\0]/.test(headerValue)) {
      throw new EntryError(`${where}.value ${describe(headerValue)} is not a header value`);
    }
    return Object.freeze({ name, value: headerValue });
  });
}

function parseEntry(path: string, entry: unknown): AppProbe {
  const match = PROBE_PATH.exec(path);
  if (!match) throw new EntryError('the path must be /app-health/<container>/livez, readyz or startupz');
  if (!isObject(entry)) throw new EntryError(`the probe is ${describe(entry)}, not an object`);
  const kinds = KINDS.filter((kind) => field(entry, kind) !== undefined);
  if (kinds.length !== 1) {
    throw new EntryError(`${kinds.length === 0 ? 'no probe kind' : `more than one probe kind (${kinds.join(', ')})`}: give exactly one of httpGet, tcpSocket, grpc`);
  }
  const kind = kinds[0]!;
  const action = field(entry, kind);
  if (!isObject(action)) throw new EntryError(`${kind} is ${describe(action)}, not an object`);
  const base: ProbeBase = { path, container: match[1]!, type: match[2] as ProbeType, timeoutMs: timeoutMs(entry) };
  switch (kind) {
    case 'httpGet': {
      const scheme = optionalString(action, 'scheme', kind) ?? 'HTTP';
      if (scheme !== 'HTTP' && scheme !== 'HTTPS') throw new EntryError(`httpGet.scheme "${scheme}" is not HTTP or HTTPS`);
      const requestPath = optionalString(action, 'path', kind) ?? '';
      const host = optionalString(action, 'host', kind);
      return {
        ...base, kind, scheme, port: port(field(action, 'port'), kind),
        requestPath: requestPath.startsWith('/') ? requestPath : `/${requestPath}`,
        headers: Object.freeze(headers(field(action, 'httpHeaders'))),
        ...(host ? { host } : {}),
      };
    }
    case 'tcpSocket': {
      const host = optionalString(action, 'host', kind);
      return { ...base, kind, port: port(field(action, 'port'), kind), ...(host ? { host } : {}) };
    }
    case 'grpc':
      return { ...base, kind, port: port(field(action, 'port'), kind), service: optionalString(action, 'service', kind) ?? '' };
  }
}

/** Parses the raw MESH_APP_PROBERS text; '' (or blanks) means no probes. */
export function parseAppProbers(text: string): AppProbers {
  const probes = new Map<string, AppProbe>();
  const errors: string[] = [];
  const done = (): AppProbers => Object.freeze({ probes, errors: Object.freeze(errors) });
  if (text.trim() === '') return done();
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    errors.push(`${VARIABLE}: not valid JSON: ${(err as Error).message}`);
    return done();
  }
  if (!isObject(doc)) {
    errors.push(`${VARIABLE}: expected a JSON object of probes keyed by /app-health/<container>/<livez|readyz|startupz>, got ${describe(doc)}`);
    return done();
  }
  for (const [path, entry] of Object.entries(doc)) {
    try {
      probes.set(path, Object.freeze(parseEntry(path, entry)));
    } catch (err) {
      if (!(err instanceof EntryError)) throw err;
      errors.push(`${VARIABLE} "${path}": ${err.message}; probe ignored`);
    }
  }
  return done();
}
