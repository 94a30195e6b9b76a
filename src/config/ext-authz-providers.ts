// The mesh config's `extensionProviders` that this agent acts on: external authorizers
// (`envoyExtAuthzHttp`, `envoyExtAuthzGrpc`), named by AuthorizationPolicy `action: CUSTOM`.
// Checked as Istio checks them, then frozen; the other provider kinds (tracing, access-log
// services...) are named in a warning (this agent has no use for them). Pure.
import { parseGoDuration } from './env/values.js';

/** A header name pattern of Istio's provider fields: exact (any case), `prefix*`, `*suffix`. */
export interface HeaderPattern {
  readonly kind: 'exact' | 'prefix' | 'suffix';
  /** Lower-case. */
  readonly text: string;
}

interface ProviderBase {
  readonly name: string;
  /** The authorizer's host (Istio's `[<namespace>/]<hostname>`, the namespace dropped) and port. */
  readonly host: string;
  readonly port: number;
  readonly timeoutMs: number;
  /** True: a failed check (no answer, time-out, a 5xx from an HTTP authorizer) lets the request through. */
  readonly failOpen: boolean;
  /** The status of a request refused because the check failed (default 403). */
  readonly statusOnError: number;
  /** `includeRequestBodyInCheck`: the request body is held and sent with the check. Undefined: no body (the request streams on). */
  readonly body?: BodyInCheck;
}

/** How much of the request body an authorizer sees, and how. */
export interface BodyInCheck {
  /** At most this many bytes are held and sent (`maxRequestBytes`). */
  readonly maxBytes: number;
  /** A longer body: its first `maxBytes` are sent and the request goes on (else 413). */
  readonly allowPartial: boolean;
  /** gRPC: the body goes as bytes (`raw_body`), not as text (`body`). */
  readonly asBytes: boolean;
}

/** The most body held for one check: held bodies are memory, per request in flight. */
export const MAX_BODY_IN_CHECK = 16 * 1024 * 1024;

export interface HttpAuthzProvider extends ProviderBase {
  readonly kind: 'http';
  /** Prepended to the request's path in the check request ('' when not set). */
  readonly pathPrefix: string;
  /** Client request headers copied into the check request (beside Host, the method and the path). */
  readonly includeRequestHeaders: readonly HeaderPattern[];
  /** Headers set on the check request (lower-case names), replacing the client's. */
  readonly additionalHeaders: readonly (readonly [string, string])[];
  /** The authorizer's answer headers that replace the request's on the way upstream (allowed). Empty: none. */
  readonly headersToUpstreamOnAllow: readonly HeaderPattern[];
  /** The authorizer's answer headers added to the response to the client (allowed). Empty: none. */
  readonly headersToDownstreamOnAllow: readonly HeaderPattern[];
  /** The authorizer's answer headers sent back to the client with its refusal. Undefined: all of them but Host. */
  readonly headersToDownstreamOnDeny?: readonly HeaderPattern[];
}

export interface GrpcAuthzProvider extends ProviderBase {
  readonly kind: 'grpc';
}

export type ExtAuthzProvider = HttpAuthzProvider | GrpcAuthzProvider;

/** A provider field that does not check: its path under `meshConfig.` and why. */
export class ProviderFieldError extends Error {
  constructor(readonly field: string, message: string) {
    super(`${field}: ${message}`);
    this.name = 'ProviderFieldError';
  }
}

/** Istio's default time-out of an authorizer's answer (10 minutes). */
export const DEFAULT_EXT_AUTHZ_TIMEOUT_MS = 600_000;

const COMMON = ['service', 'port', 'timeout', 'failOpen', 'statusOnError', 'includeRequestBodyInCheck'];
const HTTP_FIELDS = [...COMMON, 'pathPrefix', 'includeHeadersInCheck', 'includeRequestHeadersInCheck', 'includeAdditionalHeadersInCheck',
  'headersToUpstreamOnAllow', 'headersToDownstreamOnAllow', 'headersToDownstreamOnDeny'];
const GRPC_FIELDS = COMMON;

/** Istio's other provider kinds: accepted and named in a warning (nothing here uses them). */
const OTHER_KINDS = ['zipkin', 'lightstep', 'datadog', 'stackdriver', 'opencensus', 'skywalking', 'opentelemetry', 'prometheus',
  'envoyFileAccessLog', 'envoyHttpAls', 'envoyTcpAls', 'envoyOtelAls', 'sds'];
const AUTHZ_KINDS = ['envoyExtAuthzHttp', 'envoyExtAuthzGrpc'];

type Doc = Readonly<Record<string, unknown>>;
const isDoc = (v: unknown): v is Doc => v !== null && typeof v === 'object' && !Array.isArray(v);

function checkKeys(doc: Doc, at: string, known: readonly string[]): void {
  for (const k of Object.keys(doc)) {
    if (!known.includes(k)) throw new ProviderFieldError(`${at}.${k}`, `is not a field of this provider (known: ${known.join(', ')})`);
  }
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Istio's header matchers: `abc` exact, `abc*` prefix, `*abc` suffix (a lone `*`: every header). */
function patterns(raw: unknown, at: string): HeaderPattern[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new ProviderFieldError(at, 'expected a list of header names (exact, prefix* or *suffix)');
  return raw.map((v: unknown, i) => {
    const where = `${at}[${i}]`;
    if (typeof v !== 'string' || v === '') throw new ProviderFieldError(where, 'expected a header name (exact, prefix* or *suffix)');
    const lower = v.toLowerCase();
    const p: HeaderPattern = lower === '*' ? { kind: 'prefix', text: '' }
      : lower.endsWith('*') ? { kind: 'prefix', text: lower.slice(0, -1) }
        : lower.startsWith('*') ? { kind: 'suffix', text: lower.slice(1) } : { kind: 'exact', text: lower };
    if (p.text !== '' && !TOKEN.test(p.text.replace(/\*/g, '!'))) throw new ProviderFieldError(where, `${JSON.stringify(v)} is not a header name`);
    if (p.text.includes('*')) throw new ProviderFieldError(where, `${JSON.stringify(v)}: a * only at the start or the end`);
    return p;
  });
}

/** Whether any pattern matches the lower-case header name. */
export function matchesHeader(list: readonly HeaderPattern[], lowerName: string): boolean {
  for (const p of list) {
    if (p.kind === 'exact' ? lowerName === p.text : p.kind === 'prefix' ? lowerName.startsWith(p.text) : lowerName.endsWith(p.text)) return true;
  }
  return false;
}

function bool(raw: unknown, at: string): boolean {
  if (raw === undefined || raw === null) return false;
  if (typeof raw !== 'boolean') throw new ProviderFieldError(at, `${JSON.stringify(raw)} is not true or false`);
  return raw;
}

function base(name: string, o: Doc, at: string): ProviderBase {
  const service = o['service'];
  if (typeof service !== 'string' || service.trim() === '') throw new ProviderFieldError(`${at}.service`, 'is required: the authorizer\'s host, [<namespace>/]<hostname>');
  const slash = service.indexOf('/');
  const host = (slash < 0 ? service : service.slice(slash + 1)).trim();
  if (host === '' || host.includes('/') || /\s/.test(host)) throw new ProviderFieldError(`${at}.service`, `${JSON.stringify(service)} is not [<namespace>/]<hostname>`);
  const port = o['port'];
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new ProviderFieldError(`${at}.port`, `${JSON.stringify(port)} is not a port number (1 to 65535); it is required`);
  }
  let timeoutMs = DEFAULT_EXT_AUTHZ_TIMEOUT_MS;
  if (o['timeout'] !== undefined && o['timeout'] !== null) {
    const parsed = typeof o['timeout'] === 'string' ? parseGoDuration(o['timeout']) : undefined;
    if (!parsed?.ok || parsed.value < 1) throw new ProviderFieldError(`${at}.timeout`, `${JSON.stringify(o['timeout'])} is not a duration of at least 1ms, such as 500ms or 2s`);
    timeoutMs = parsed.value;
  }
  let statusOnError = 403;
  const status = o['statusOnError'];
  if (status !== undefined && status !== null && status !== '') {
    // Istio's field is a string ("503"); a number is taken too.
    const n = typeof status === 'number' ? status : typeof status === 'string' && /^[0-9]+$/.test(status) ? Number(status) : NaN;
    if (!Number.isInteger(n) || n < 200 || n > 599) throw new ProviderFieldError(`${at}.statusOnError`, `${JSON.stringify(status)} is not an HTTP status code (200 to 599)`);
    statusOnError = n;
  }
  const body = bodyInCheck(o['includeRequestBodyInCheck'], `${at}.includeRequestBodyInCheck`);
  return {
    name, host: host.toLowerCase(), port, timeoutMs, failOpen: bool(o['failOpen'], `${at}.failOpen`), statusOnError, ...(body ? { body } : {}),
  };
}

function bodyInCheck(raw: unknown, at: string): BodyInCheck | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isDoc(raw)) throw new ProviderFieldError(at, 'expected a mapping {maxRequestBytes, allowPartialMessage, packAsBytes}');
  checkKeys(raw, at, ['maxRequestBytes', 'allowPartialMessage', 'packAsBytes']);
  const max = raw['maxRequestBytes'];
  // Envoy requires at least one byte; the bound keeps one request from holding the proxy's memory.
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > MAX_BODY_IN_CHECK) {
    throw new ProviderFieldError(`${at}.maxRequestBytes`, `${JSON.stringify(max)} is not a byte count from 1 to ${MAX_BODY_IN_CHECK}; it is required`);
  }
  return { maxBytes: max, allowPartial: bool(raw['allowPartialMessage'], `${at}.allowPartialMessage`), asBytes: bool(raw['packAsBytes'], `${at}.packAsBytes`) };
}

function http(name: string, o: Doc, at: string): HttpAuthzProvider {
  checkKeys(o, at, HTTP_FIELDS);
  const prefix = o['pathPrefix'] ?? '';
  if (typeof prefix !== 'string' || (prefix !== '' && !prefix.startsWith('/')) || /[\s?#]/.test(prefix)) {
    throw new ProviderFieldError(`${at}.pathPrefix`, `${JSON.stringify(prefix)} is not a path prefix starting with /`);
  }
  if (o['includeHeadersInCheck'] != null && o['includeRequestHeadersInCheck'] != null) {
    throw new ProviderFieldError(`${at}.includeHeadersInCheck`, 'is the deprecated name of includeRequestHeadersInCheck: set one of them');
  }
  const additional = o['includeAdditionalHeadersInCheck'] ?? {};
  if (!isDoc(additional)) throw new ProviderFieldError(`${at}.includeAdditionalHeadersInCheck`, 'expected a mapping of header name to value');
  const additionalHeaders = Object.entries(additional).map(([k, v]): [string, string] => {
    const where = `${at}.includeAdditionalHeadersInCheck.${k}`;
    if (!TOKEN.test(k)) throw new ProviderFieldError(where, `${JSON.stringify(k)} is not a header name`);
    if (typeof v !== 'string' || /[\r\n\0]/.test(v)) throw new ProviderFieldError(where, 'expected a header value (text on one line)');
    // Envoy would substitute its command operators (%DOWNSTREAM_REMOTE_ADDRESS%...); sent as written they would mislead the authorizer.
    if (/%[A-Z_]+(\([^)]*\))?(:[0-9]+)?%/.test(v)) throw new ProviderFieldError(where, `${JSON.stringify(v)}: Envoy's %COMMAND% substitutions are not supported yet; give a literal value`);
    return [k.toLowerCase(), v];
  });
  const onDeny = o['headersToDownstreamOnDeny'];
  return {
    ...base(name, o, at), kind: 'http', pathPrefix: prefix,
    includeRequestHeaders: patterns(o['includeRequestHeadersInCheck'] ?? o['includeHeadersInCheck'],
      `${at}.${o['includeRequestHeadersInCheck'] != null ? 'includeRequestHeadersInCheck' : 'includeHeadersInCheck'}`),
    additionalHeaders,
    headersToUpstreamOnAllow: patterns(o['headersToUpstreamOnAllow'], `${at}.headersToUpstreamOnAllow`),
    headersToDownstreamOnAllow: patterns(o['headersToDownstreamOnAllow'], `${at}.headersToDownstreamOnAllow`),
    ...(onDeny != null && !(Array.isArray(onDeny) && onDeny.length === 0)
      ? { headersToDownstreamOnDeny: patterns(onDeny, `${at}.headersToDownstreamOnDeny`) } : {}),
  };
}

export interface ProvidersRead {
  readonly providers: readonly ExtAuthzProvider[];
  /** One line per provider of a kind this agent does not use, and per field with no effect on its provider. */
  readonly warnings: readonly string[];
}

/** Reads `meshConfig.extensionProviders`; throws ProviderFieldError naming the field of the first bad provider. */
export function readExtAuthzProviders(raw: unknown): ProvidersRead {
  if (raw === undefined || raw === null) return { providers: [], warnings: [] };
  if (!Array.isArray(raw)) throw new ProviderFieldError('extensionProviders', 'expected a list of {name, <kind>: {...}}');
  const providers: ExtAuthzProvider[] = [];
  const warnings: string[] = [];
  const names = new Set<string>();
  raw.forEach((entry: unknown, i) => {
    const at = `extensionProviders[${i}]`;
    if (!isDoc(entry)) throw new ProviderFieldError(at, 'expected {name, <kind>: {...}}');
    const name = entry['name'];
    if (typeof name !== 'string' || name === '') throw new ProviderFieldError(`${at}.name`, 'is required');
    if (names.has(name)) throw new ProviderFieldError(`${at}.name`, `${JSON.stringify(name)} names another provider too: names must be unique`);
    names.add(name);
    const kinds = Object.keys(entry).filter((k) => k !== 'name' && entry[k] !== null && entry[k] !== undefined);
    if (kinds.length !== 1) throw new ProviderFieldError(at, `needs exactly one provider kind beside its name (found ${kinds.length === 0 ? 'none' : kinds.join(', ')})`);
    const kind = kinds[0]!;
    const body = entry[kind];
    if (AUTHZ_KINDS.includes(kind)) {
      if (!isDoc(body)) throw new ProviderFieldError(`${at}.${kind}`, 'expected a mapping');
      if (kind === 'envoyExtAuthzHttp') {
        const provider = http(name, body, `${at}.${kind}`);
        // Envoy's pack_as_bytes only chooses the gRPC CheckRequest's field: an HTTP check's body is the bytes as they are.
        if (provider.body?.asBytes === true) {
          warnings.push(`meshConfig.${at}.${kind}.includeRequestBodyInCheck.packAsBytes: has no effect on an HTTP authorizer, as in Istio: `
            + 'the check request carries the body as it is (the field only changes a gRPC CheckRequest)');
        }
        providers.push(provider);
      } else {
        checkKeys(body, `${at}.${kind}`, GRPC_FIELDS);
        providers.push({ ...base(name, body, `${at}.${kind}`), kind: 'grpc' });
      }
    } else if (OTHER_KINDS.includes(kind)) {
      warnings.push(`meshConfig.${at}.${kind}: not honoured by this agent: provider ${JSON.stringify(name)} is of a kind it does not use `
        + '(only envoyExtAuthzHttp and envoyExtAuthzGrpc, for AuthorizationPolicy CUSTOM)');
    } else {
      throw new ProviderFieldError(`${at}.${kind}`, `is not a provider kind (known: ${[...AUTHZ_KINDS, ...OTHER_KINDS].join(', ')})`);
    }
  });
  return { providers, warnings };
}
