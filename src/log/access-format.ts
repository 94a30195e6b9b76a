// The access log's line format: the mesh config's `accessLogFormat` (Envoy's command operators,
// `%START_TIME%`, `%REQ(X?Y):Z%`...) compiled once into a list of literal text and renderers, then
// applied to each AccessRecord. TEXT: a format string (default: Istio's, plus this agent's decision
// fields when a decision was taken); JSON: a JSON object whose string values hold operators
// (default: Istio's keys). An operator Envoy does not have is refused when the config is read; one
// Envoy has but whose value this proxy never knows (upstream TLS peers...) prints `-` (null in
// JSON). Which is which: docs/ACCESS-LOG.md. Pure.
import { grpcStatusText } from '../proxy/http2/grpc.js';
import { flagsText, type AccessRecord, type ForwardedHeaders } from './access-record.js';

export type AccessLogEncoding = 'TEXT' | 'JSON';

/** Istio's default TEXT format (pilot's EnvoyTextLogFormat, 1.9 onwards). */
export const ISTIO_TEXT_FORMAT = '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" '
  + '%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% '
  + '"%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% '
  + '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" '
  + '"%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% '
  + '%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n';

/** Istio's default JSON keys (EnvoyJSONLogFormatIstio) and this agent's decision fields; printed in key order, as Envoy does. */
export const DEFAULT_JSON_FORMAT: Readonly<Record<string, string>> = Object.freeze({
  authority: '%REQ(:AUTHORITY)%',
  authz: '%MESH_DECISION(AUTHZ)%',
  bytes_received: '%BYTES_RECEIVED%',
  bytes_sent: '%BYTES_SENT%',
  connection_security_policy: '%MESH_CONNECTION_SECURITY_POLICY%',
  connection_termination_details: '%CONNECTION_TERMINATION_DETAILS%',
  downstream_local_address: '%DOWNSTREAM_LOCAL_ADDRESS%',
  downstream_peer_uri_san: '%DOWNSTREAM_PEER_URI_SAN%',
  downstream_remote_address: '%DOWNSTREAM_REMOTE_ADDRESS%',
  duration: '%DURATION%',
  grpc_status: '%GRPC_STATUS%',
  jwt: '%MESH_DECISION(JWT)%',
  method: '%REQ(:METHOD)%',
  path: '%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%',
  principal: '%MESH_DECISION(PRINCIPAL)%',
  protocol: '%PROTOCOL%',
  request_id: '%REQ(X-REQUEST-ID)%',
  requested_server_name: '%REQUESTED_SERVER_NAME%',
  response_code: '%RESPONSE_CODE%',
  response_code_details: '%RESPONSE_CODE_DETAILS%',
  response_flags: '%RESPONSE_FLAGS%',
  route: '%MESH_DECISION(ROUTE)%',
  route_name: '%ROUTE_NAME%',
  start_time: '%START_TIME%',
  upstream_cluster: '%UPSTREAM_CLUSTER%',
  upstream_host: '%UPSTREAM_HOST%',
  upstream_local_address: '%UPSTREAM_LOCAL_ADDRESS%',
  upstream_service_time: '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%',
  upstream_transport_failure_reason: '%UPSTREAM_TRANSPORT_FAILURE_REASON%',
  user_agent: '%REQ(USER-AGENT)%',
  x_forwarded_for: '%REQ(X-FORWARDED-FOR)%',
});

/** A bad `accessLogFormat`: the message names the operator (or the JSON problem) and where. */
export class AccessLogFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AccessLogFormatError';
  }
}

type Value = string | number | undefined;
type Read = (r: AccessRecord) => Value;
type Render = (r: AccessRecord) => string;

export interface CompileOptions {
  /** HOSTNAME's value. */
  readonly hostname?: string;
}

/** A compiled format: one line (with its newline) per record. */
export interface AccessLogFormat {
  readonly encoding: AccessLogEncoding;
  /** Lower-case names of the response headers the format reads (RESP, TRAILER): only those are kept per response. */
  readonly responseHeaders: readonly string[];
  format(record: AccessRecord): string;
}

// ---- values

function header(h: ForwardedHeaders | undefined, name: string): string | undefined {
  if (!h) return undefined;
  if (h.set) for (const [n, v] of h.set) if (n === name) return v;
  if (h.remove?.includes(name)) return undefined;
  let out: string | undefined;
  const raw = h.raw;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!;
    if (n.length === name.length && n.toLowerCase() === name) out = out === undefined ? raw[i + 1]! : `${out},${raw[i + 1]!}`;
  }
  if (h.add) for (const [n, v] of h.add) if (n === name) out = out === undefined ? v : `${out},${v}`;
  return out;
}

function requestValue(r: AccessRecord, name: string): string | undefined {
  switch (name) {
    case ':method': return r.method;
    case ':path': return r.path;
    case ':authority': return header(r.requestHeaders, 'host');
    case ':scheme': return r.kind === 'http' ? header(r.requestHeaders, 'x-forwarded-proto') ?? 'http' : undefined;
    case 'x-envoy-original-path': return r.originalPath;
    default: return header(r.requestHeaders, name);
  }
}

function responseValue(r: AccessRecord, name: string): string | undefined {
  if (name === 'x-envoy-upstream-service-time') return r.upstreamServiceMs === undefined ? undefined : String(Math.floor(r.upstreamServiceMs));
  const h = r.responseHeaders;
  if (!h) return undefined;
  let out: string | undefined;
  for (let i = 0; i < h.length; i += 2) if (h[i] === name) out = out === undefined ? h[i + 1]! : `${out},${h[i + 1]!}`;
  return out;
}

/** `host:port` / `[v6]:port` → [host, port]. */
function splitHostPort(a: string | undefined): [string, string] | undefined {
  if (a === undefined) return undefined;
  const colon = a.lastIndexOf(':');
  if (colon < 0) return [a, ''];
  const host = a.slice(0, colon);
  return [host.startsWith('[') ? host.slice(1, -1) : host, a.slice(colon + 1)];
}
const withoutPort = (a: string | undefined): string | undefined => splitHostPort(a)?.[0];
const portOf = (a: string | undefined): number | undefined => {
  const p = splitHostPort(a)?.[1];
  return p ? Number(p) : undefined;
};

const quoted = (s: string | undefined): string => (s === undefined ? '-' : JSON.stringify(s));

/** This agent's decision fields as one text (`jwt="valid" principal="iss/sub" authz="..." route="..."`). */
export function decisionText(r: AccessRecord): string | undefined {
  const d = r.decision;
  if (!d) return undefined;
  const peer = r.downstreamPeerUriSan === undefined ? '' : ` peer=${quoted(r.downstreamPeerUriSan)}`;
  return `jwt=${quoted(d.jwt)} principal=${quoted(d.principal)} authz=${quoted(d.authz)} route=${quoted(d.route)}${peer}`;
}

// ---- START_TIME

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** Fractional seconds with `digits` digits (the clock has microseconds at best: the rest are 0). */
function fraction(ms: number, digits: number): string {
  const nanos = Math.floor((ms - Math.floor(ms / 1000) * 1000) * 1e6);
  return String(nanos).padStart(9, '0').slice(0, digits);
}

type TimePart = string | ((d: Date, ms: number) => string);

/** strftime as Envoy's START_TIME takes it (UTC): the specifiers listed; any other is refused. */
function compileTime(spec: string, at: number): (ms: number) => string {
  const parts: TimePart[] = [];
  let literal = '';
  for (let i = 0; i < spec.length; i++) {
    const c = spec[i]!;
    if (c !== '%') {
      literal += c;
      continue;
    }
    const rest = spec.slice(i + 1);
    const m = /^(?:([1-9])f|E([1-9*])S|Ez|[YmdHMSyjebaZzsTFf%])/.exec(rest);
    if (!m) throw new AccessLogFormatError(`START_TIME: unsupported time specifier %${rest.slice(0, 1)} at character ${at + i + 1} (supported: %Y %m %d %H %M %S %y %j %e %b %a %T %F %z %Ez %Z %s %f %1f-%9f %E1S-%E9S %%)`);
    i += m[0].length;
    const token = m[0];
    let part: TimePart;
    if (m[1] !== undefined) {
      const n = Number(m[1]);
      part = (_d, ms) => fraction(ms, n);
    } else if (m[2] !== undefined) {
      const n = m[2] === '*' ? 9 : Number(m[2]);
      part = (d, ms) => `${pad(d.getUTCSeconds())}.${fraction(ms, n)}`;
    } else {
      switch (token) {
        case 'Y': part = (d) => String(d.getUTCFullYear()); break;
        case 'm': part = (d) => pad(d.getUTCMonth() + 1); break;
        case 'd': part = (d) => pad(d.getUTCDate()); break;
        case 'e': part = (d) => String(d.getUTCDate()).padStart(2, ' '); break;
        case 'H': part = (d) => pad(d.getUTCHours()); break;
        case 'M': part = (d) => pad(d.getUTCMinutes()); break;
        case 'S': part = (d) => pad(d.getUTCSeconds()); break;
        case 'y': part = (d) => pad(d.getUTCFullYear() % 100); break;
        case 'j': part = (d) => pad(Math.floor((d.getTime() - Date.UTC(d.getUTCFullYear(), 0, 1)) / 86_400_000) + 1, 3); break;
        case 'b': part = (d) => MONTHS[d.getUTCMonth()]!; break;
        case 'a': part = (d) => DAYS[d.getUTCDay()]!; break;
        case 'T': part = (d) => `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`; break;
        case 'F': part = (d) => `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`; break;
        case 'z': part = '+0000'; break;
        case 'Ez': part = '+00:00'; break;
        case 'Z': part = 'UTC'; break;
        case 's': part = (_d, ms) => String(Math.floor(ms / 1000)); break;
        case 'f': part = (_d, ms) => fraction(ms, 9); break;
        default: part = '%'; break;
      }
    }
    if (typeof part === 'string') {
      literal += part;
    } else {
      if (literal !== '') parts.push(literal);
      literal = '';
      parts.push(part);
    }
  }
  if (literal !== '') parts.push(literal);
  return (ms) => {
    const d = new Date(ms);
    let out = '';
    for (const p of parts) out += typeof p === 'string' ? p : p(d, ms);
    return out;
  };
}

/** Envoy's default START_TIME (`2026-11-21T10:00:00.123Z`), made at most once per millisecond. */
let isoMs = Number.NaN;
let isoText = '';
function isoTime(ms: number): string {
  const whole = Math.floor(ms);
  if (whole !== isoMs) {
    isoMs = whole;
    isoText = new Date(whole).toISOString();
  }
  return isoText;
}

// ---- operators

type Arg = 'none' | 'optional' | 'header' | 'any';

interface OperatorSpec {
  readonly arg: Arg;
  /** Builds the value reader from the argument. */
  readonly read: (arg: string | undefined, at: number, o: CompileOptions) => Read;
  /** Response header names the reader needs. */
  readonly responseHeaders?: (arg: string) => string[];
}

const field = (read: Read): OperatorSpec => ({ arg: 'none', read: () => read });
const NEVER: OperatorSpec = { arg: 'none', read: () => () => undefined };
const NEVER_WITH_ARG: OperatorSpec = { arg: 'any', read: () => () => undefined };

/** `X?Y` → the lower-case names, checked. */
function headerNames(arg: string, op: string, at: number): [string, string | undefined] {
  const names = arg.split('?');
  if (names.length > 2 || names.some((n) => n === '' || /[\s%()]/.test(n))) {
    throw new AccessLogFormatError(`%${op}(${arg})% at character ${at}: expected a header name, or two as X?Y (the second if the first is absent)`);
  }
  return [names[0]!.toLowerCase(), names[1]?.toLowerCase()];
}

function headerOperator(lookup: (r: AccessRecord, name: string) => string | undefined, op: string, edit?: (v: string) => string): OperatorSpec {
  return {
    arg: 'header',
    read: (arg, at) => {
      const [main, alt] = headerNames(arg!, op, at);
      return (r) => {
        const v = lookup(r, main) ?? (alt === undefined ? undefined : lookup(r, alt));
        return v === undefined || edit === undefined ? v : edit(v);
      };
    },
  };
}

const DECISION_FIELDS = ['JWT', 'PRINCIPAL', 'AUTHZ', 'ROUTE'] as const;

/** Every operator this proxy accepts: the ones it fills, and Envoy's that have no value here (always `-`). */
const OPERATORS: Readonly<Record<string, OperatorSpec>> = {
  START_TIME: {
    arg: 'optional',
    read: (arg, at) => {
      if (arg === undefined || arg === '') return (r) => isoTime(r.startMs);
      const time = compileTime(arg, at + 'START_TIME('.length);
      return (r) => time(r.startMs);
    },
  },
  REQ: headerOperator(requestValue, 'REQ'),
  REQ_WITHOUT_QUERY: headerOperator(requestValue, 'REQ_WITHOUT_QUERY', (v) => {
    const q = v.indexOf('?');
    return q < 0 ? v : v.slice(0, q);
  }),
  RESP: { ...headerOperator(responseValue, 'RESP'), responseHeaders: (arg) => arg.toLowerCase().split('?').filter((n) => n !== 'x-envoy-upstream-service-time') },
  // Response trailers are not relayed (the response parser drops them).
  TRAILER: { arg: 'header', read: (arg, at) => { headerNames(arg!, 'TRAILER', at); return () => undefined; } },
  PROTOCOL: field((r) => r.protocol),
  RESPONSE_CODE: field((r) => r.status),
  RESPONSE_FLAGS: field((r) => flagsText(r.flags)),
  RESPONSE_FLAGS_LONG: field((r) => flagsText(r.flags, true)),
  RESPONSE_CODE_DETAILS: field((r) => r.details),
  CONNECTION_TERMINATION_DETAILS: field((r) => r.terminationDetails),
  BYTES_RECEIVED: field((r) => r.bytesReceived),
  BYTES_SENT: field((r) => r.bytesSent),
  DURATION: field((r) => Math.floor(r.durationMs)),
  RESPONSE_DURATION: field((r) => (r.responseMs === undefined ? undefined : Math.floor(r.responseMs))),
  UPSTREAM_HOST: field((r) => r.upstreamHost),
  UPSTREAM_REMOTE_ADDRESS: field((r) => r.upstreamHost),
  UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: field((r) => withoutPort(r.upstreamHost)),
  UPSTREAM_REMOTE_PORT: field((r) => portOf(r.upstreamHost)),
  UPSTREAM_CLUSTER: field((r) => r.upstreamCluster),
  UPSTREAM_CLUSTER_RAW: field((r) => r.upstreamCluster),
  UPSTREAM_LOCAL_ADDRESS: field((r) => r.upstreamLocal),
  UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: field((r) => withoutPort(r.upstreamLocal)),
  UPSTREAM_LOCAL_PORT: field((r) => portOf(r.upstreamLocal)),
  UPSTREAM_REQUEST_ATTEMPT_COUNT: field((r) => r.attempts),
  DOWNSTREAM_LOCAL_ADDRESS: field((r) => r.downstreamLocal),
  DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: field((r) => withoutPort(r.downstreamLocal)),
  DOWNSTREAM_LOCAL_PORT: field((r) => portOf(r.downstreamLocal)),
  DOWNSTREAM_REMOTE_ADDRESS: field((r) => r.downstreamRemote),
  DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: field((r) => withoutPort(r.downstreamRemote)),
  DOWNSTREAM_REMOTE_PORT: field((r) => portOf(r.downstreamRemote)),
  DOWNSTREAM_DIRECT_REMOTE_ADDRESS: field((r) => r.downstreamRemote),
  DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT: field((r) => withoutPort(r.downstreamRemote)),
  DOWNSTREAM_DIRECT_REMOTE_PORT: field((r) => portOf(r.downstreamRemote)),
  REQUESTED_SERVER_NAME: field((r) => r.serverName),
  ROUTE_NAME: field((r) => r.routeName),
  HOSTNAME: { arg: 'none', read: (_a, _at, o) => () => o.hostname },
  MESH_DECISION: {
    arg: 'optional',
    read: (arg, at) => {
      if (arg === undefined || arg === '') return decisionText;
      switch (arg.toUpperCase()) {
        case 'JWT': return (r) => r.decision?.jwt;
        case 'PRINCIPAL': return (r) => r.decision?.principal;
        case 'AUTHZ': return (r) => r.decision?.authz;
        case 'ROUTE': return (r) => r.decision?.route;
        default: throw new AccessLogFormatError(`%MESH_DECISION(${arg})% at character ${at}: expected one of ${DECISION_FIELDS.join(', ')}, or no argument for all of them`);
      }
    },
  },
  DOWNSTREAM_PEER_URI_SAN: field((r) => r.downstreamPeerUriSan),
  DOWNSTREAM_PEER_FINGERPRINT_256: field((r) => r.downstreamPeerFingerprint),
  DOWNSTREAM_LOCAL_URI_SAN: field((r) => r.downstreamLocalUriSan),
  UPSTREAM_TRANSPORT_FAILURE_REASON: field((r) => r.upstreamTransportFailure),
  /** Istio's metric label as a log field: `mutual_tls` when the downstream came over mesh mTLS, else `none`. */
  MESH_CONNECTION_SECURITY_POLICY: field((r) => (r.downstreamPeerUriSan === undefined ? 'none' : 'mutual_tls')),
  // Envoy's, with no value here: no gRPC, no tracing, no metadata.
  REQUEST_DURATION: NEVER,
  REQUEST_TX_DURATION: NEVER,
  RESPONSE_TX_DURATION: NEVER,
  DOWNSTREAM_HANDSHAKE_DURATION: NEVER,
  ROUNDTRIP_DURATION: NEVER,
  CONNECTION_ID: NEVER,
  UPSTREAM_CONNECTION_ID: NEVER,
  STREAM_ID: NEVER,
  TRACE_ID: NEVER,
  GRPC_STATUS: {
    arg: 'optional',
    read: (arg, at) => {
      const form = arg === undefined || arg === '' ? 'CAMEL_STRING' : arg;
      if (form !== 'CAMEL_STRING' && form !== 'SNAKE_STRING' && form !== 'NUMBER') {
        throw new AccessLogFormatError(`%GRPC_STATUS(${arg})% at character ${at}: expected CAMEL_STRING, SNAKE_STRING or NUMBER`);
      }
      return (r) => (r.grpcStatus === undefined ? undefined : grpcStatusText(r.grpcStatus, form));
    },
  },
  GRPC_STATUS_NUMBER: field((r) => r.grpcStatus),
  VIRTUAL_CLUSTER_NAME: NEVER,
  DOWNSTREAM_TLS_VERSION: NEVER,
  DOWNSTREAM_TLS_CIPHER: NEVER,
  DOWNSTREAM_TLS_SESSION_ID: NEVER,
  DOWNSTREAM_PEER_SUBJECT: NEVER,
  DOWNSTREAM_PEER_ISSUER: NEVER,
  DOWNSTREAM_PEER_SERIAL: NEVER,
  DOWNSTREAM_LOCAL_SUBJECT: NEVER,
  UPSTREAM_TLS_VERSION: NEVER,
  UPSTREAM_TLS_CIPHER: NEVER,
  UPSTREAM_PEER_URI_SAN: NEVER,
  UPSTREAM_PEER_SUBJECT: NEVER,
  UPSTREAM_LOCAL_URI_SAN: NEVER,
  DYNAMIC_METADATA: NEVER_WITH_ARG,
  CLUSTER_METADATA: NEVER_WITH_ARG,
  UPSTREAM_METADATA: NEVER_WITH_ARG,
  FILTER_STATE: NEVER_WITH_ARG,
  UPSTREAM_FILTER_STATE: NEVER_WITH_ARG,
};

/** The operators filled here and those that print `-` (for the docs and tests). */
export const FILLED_OPERATORS: readonly string[] = Object.keys(OPERATORS).filter((k) => OPERATORS[k] !== NEVER && OPERATORS[k] !== NEVER_WITH_ARG);
export const EMPTY_OPERATORS: readonly string[] = Object.keys(OPERATORS).filter((k) => OPERATORS[k] === NEVER || OPERATORS[k] === NEVER_WITH_ARG);

interface Compiled {
  readonly name: string;
  readonly read: Read;
  readonly max: number | undefined;
}

/** `%NAME%`, `%NAME(arg)%`, `%NAME(arg):N%` (Envoy's grammar: the argument holds no `)`). */
const OPERATOR = /%([A-Z][A-Z0-9_]*)(?:\(([^)]*)\))?(?::(\d+))?%/y;

type Piece = string | Compiled;

/** Splits a format string into literal text and operators; `offset`: where `text` sits in the whole format (for messages). */
function parsePieces(text: string, o: CompileOptions, responseHeaders: Set<string>, offset = 0): Piece[] {
  const pieces: Piece[] = [];
  let literal = '';
  for (let i = 0; i < text.length;) {
    const c = text[i]!;
    if (c !== '%') {
      literal += c;
      i++;
      continue;
    }
    OPERATOR.lastIndex = i;
    const m = OPERATOR.exec(text);
    const at = offset + i + 1;
    if (!m) {
      const shown = /^%[A-Za-z_(]/.test(text.slice(i)) ? text.slice(i, i + 40).split(/[\s"]/)[0] : '%';
      throw new AccessLogFormatError(`no valid command operator at character ${at}: ${JSON.stringify(shown)} `
        + '(operators are %NAME%, %NAME(arg)% or %NAME(arg):LENGTH%, in upper case; Envoy has no escape for a lone %)');
    }
    const [whole, name, arg, len] = m as unknown as [string, string, string | undefined, string | undefined];
    const spec = OPERATORS[name];
    if (!spec) throw new AccessLogFormatError(`unknown command operator %${name}% at character ${at}`);
    if (spec.arg === 'none' && arg !== undefined) throw new AccessLogFormatError(`%${name}% at character ${at} takes no argument, got (${arg})`);
    if ((spec.arg === 'header' || spec.arg === 'any') && (arg === undefined || arg === '')) {
      throw new AccessLogFormatError(`%${name}% at character ${at} needs an argument: %${name}(X)%`);
    }
    const max = len === undefined ? undefined : Number(len);
    if (max === 0) throw new AccessLogFormatError(`%${name}% at character ${at}: a maximum length must be above 0`);
    if (arg !== undefined && spec.responseHeaders) for (const h of spec.responseHeaders(arg)) responseHeaders.add(h);
    if (literal !== '') pieces.push(literal);
    literal = '';
    pieces.push({ name, read: spec.read(arg, at, o), max });
    i += whole.length;
  }
  if (literal !== '') pieces.push(literal);
  return pieces;
}

function textOf(v: Value, max: number | undefined): string {
  if (v === undefined) return '-';
  if (typeof v === 'number') return String(v);
  return max !== undefined && v.length > max ? v.slice(0, max) : v;
}

function textRender(c: Compiled): Render {
  const { read, max } = c;
  return (r) => textOf(read(r), max);
}

/** A JSON value that is one operator is typed (a number stays a number; absent is null), as Envoy's. */
function jsonRender(c: Compiled): Render {
  const { read, max } = c;
  return (r) => {
    const v = read(r);
    if (v === undefined) return 'null';
    if (typeof v === 'number') return String(v);
    return JSON.stringify(max !== undefined && v.length > max ? v.slice(0, max) : v);
  };
}

function joined(pieces: readonly (string | Render)[]): (r: AccessRecord) => string {
  // Adjacent literals merged once: fewer parts per line.
  const parts: (string | Render)[] = [];
  for (const p of pieces) {
    const last = parts[parts.length - 1];
    if (typeof p === 'string' && typeof last === 'string') parts[parts.length - 1] = last + p;
    else if (p !== '') parts.push(p);
  }
  return (r) => {
    let out = '';
    for (const p of parts) out += typeof p === 'string' ? p : p(r);
    return out;
  };
}

/** The default TEXT line ends with the decision fields when a decision was taken (README "Seeing why"). */
const decisionSuffix: Render = (r) => {
  const t = decisionText(r);
  const grpc = r.grpcStatus === undefined ? '' : ` grpc_status=${grpcStatusText(r.grpcStatus)}`;
  return t === undefined ? grpc : `${grpc} ${t}`;
};

function compileText(format: string, o: CompileOptions, withDecision: boolean): AccessLogFormat {
  const responseHeaders = new Set<string>();
  const body = format.endsWith('\n') ? format.slice(0, -1) : format;
  const pieces: (string | Render)[] = parsePieces(body, o, responseHeaders).map((p) => (typeof p === 'string' ? p : textRender(p)));
  if (withDecision) pieces.push(decisionSuffix);
  // A line per record whatever the format says (Envoy writes only what the format has: lines would run together).
  pieces.push('\n');
  return { encoding: 'TEXT', responseHeaders: [...responseHeaders], format: joined(pieces) };
}

/** The JSON object of a JSON format, checked: string values hold operators; objects nest; other scalars are literal. */
function parseJsonFormat(text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new AccessLogFormatError(`with accessLogEncoding JSON, expected a JSON object of keys to command operators such as {"code": "%RESPONSE_CODE%"}: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new AccessLogFormatError('with accessLogEncoding JSON, expected a JSON object of keys to command operators such as {"code": "%RESPONSE_CODE%"}');
  }
  return doc as Record<string, unknown>;
}

function compileJsonValue(key: string, v: unknown, o: CompileOptions, responseHeaders: Set<string>, out: (string | Render)[]): void {
  if (typeof v === 'string') {
    let pieces: Piece[];
    try {
      pieces = parsePieces(v, o, responseHeaders);
    } catch (err) {
      throw err instanceof AccessLogFormatError ? new AccessLogFormatError(`key ${JSON.stringify(key)}: ${err.message}`) : err;
    }
    if (pieces.length === 1 && typeof pieces[0] !== 'string') {
      out.push(jsonRender(pieces[0]!));
    } else if (pieces.every((p) => typeof p === 'string')) {
      out.push(JSON.stringify(v));
    } else {
      const text = joined(pieces.map((p) => (typeof p === 'string' ? p : textRender(p))));
      out.push((r) => JSON.stringify(text(r)));
    }
  } else if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    compileJsonObject(v as Record<string, unknown>, o, responseHeaders, out, `${key}.`);
  } else if (Array.isArray(v)) {
    throw new AccessLogFormatError(`key ${JSON.stringify(key)}: a list is not a format value (strings, numbers, booleans, null and objects are)`);
  } else {
    out.push(JSON.stringify(v));
  }
}

function compileJsonObject(doc: Record<string, unknown>, o: CompileOptions, responseHeaders: Set<string>, out: (string | Render)[], prefix = ''): void {
  out.push('{');
  let first = true;
  for (const [key, value] of Object.entries(doc)) {
    out.push(`${first ? '' : ','}${JSON.stringify(key)}:`);
    first = false;
    compileJsonValue(prefix + key, value, o, responseHeaders, out);
  }
  out.push('}');
}

function compileJson(doc: Record<string, unknown>, o: CompileOptions): AccessLogFormat {
  const responseHeaders = new Set<string>();
  const pieces: (string | Render)[] = [];
  compileJsonObject(doc, o, responseHeaders, pieces);
  pieces.push('\n');
  return { encoding: 'JSON', responseHeaders: [...responseHeaders], format: joined(pieces) };
}

/**
 * Compiles the mesh config's format. `format` undefined or '' → the default: Istio's TEXT format
 * plus the decision fields when a decision was taken, or Istio's JSON keys plus the decision's.
 * TEXT takes the format as a string of operators; JSON takes a JSON object (Istio's convention).
 * Throws AccessLogFormatError naming the operator or the JSON problem.
 */
export function compileAccessLogFormat(encoding: AccessLogEncoding, format: string | undefined, o: CompileOptions = {}): AccessLogFormat {
  const custom = format !== undefined && format.trim() !== '';
  if (encoding === 'TEXT') return compileText(custom ? format : ISTIO_TEXT_FORMAT, o, !custom);
  const doc = custom ? parseJsonFormat(format) : DEFAULT_JSON_FORMAT;
  // Istio: an empty object means its default keys.
  return compileJson(Object.keys(doc).length === 0 ? DEFAULT_JSON_FORMAT : doc, o);
}
