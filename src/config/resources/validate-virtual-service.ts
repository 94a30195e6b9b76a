// VirtualService (networking.mesh.io): HTTP routes for a set of hosts, bound to gateways and/or the
// mesh (sidecars). Header matchers whose key is `@request.auth.claims...` match validated JWT claims
// instead of headers (gateways only, as in Istio). Timeouts and retries are read here and turned
// into each route's traffic settings by src/traffic/clusters.ts; fault injection, header edits
// (request and response, per route and per destination), rewrites, redirects, mirrors and corsPolicy
// are read into the typed route and carried out by the sidecar and the gateway; the rest of Istio's
// HTTPRoute (delegation, per-route statistics) is refused as "not supported yet" rather than accepted
// and ignored. `tcp` and `tls` routes: validate-l4-routes.ts.
import type {
  CorsPolicy, HeaderMatch, HeaderOperations, HttpFault, HttpMatchRequest, HttpMirror, HttpRetry, HttpRoute, HttpRouteDestination, ResourceMeta,
  RetryOnPolicy, StringMatch, VirtualService,
} from './types.js';
import { isRouteClaimKey, parseRouteClaimKey } from '../../security/claims.js';
import {
  checkFields, child, FieldError, IGNORE_WARNINGS, INT32_MAX, int, item, list, obj, oneOf, optBool, optDuration, optInt, optList, optObj, optStr, show, str,
  stringMap, strList, type Warn,
} from './fields.js';
import { checkHeaderName, checkHostPattern, checkName, checkNamespace, parseExportTo } from './names.js';
import { labelMap } from './selector.js';
import { compileGlobal, groupCount, parseStringMatch, translateSubstitution } from './string-match.js';
import { checkSubsetName } from './validate-destination-rule.js';
import { parseTcpRoutes, parseTlsRoutes, type L4RouteContext } from './validate-l4-routes.js';
import { GRPC_STATUS_NAMES } from '../../proxy/http2/grpc.js';
import { isHopByHop, isProxyOwned } from '../../proxy/http1/headers.js';

export const MESH_GATEWAY = 'mesh';
const REDIRECT_CODES = [301, 302, 303, 307, 308];

/** What each field refused as "not supported yet" would do. */
const LATER = {
  delegate: 'delegating routes to another VirtualService',
  statPrefix: 'per-route statistics',
} as const;

/** Istio's retryOn words (Envoy's x-envoy-retry-on and x-envoy-retry-grpc-on conditions). */
export const RETRY_ON_POLICIES: readonly RetryOnPolicy[] = [
  '5xx', 'gateway-error', 'reset', 'reset-before-request', 'connect-failure', 'retriable-4xx', 'refused-stream', 'retriable-status-codes',
  'retriable-headers', 'envoy-ratelimited', 'http3-post-connect-failure', 'cancelled', 'deadline-exceeded', 'internal', 'resource-exhausted',
  'unavailable',
];

/** The status codes Go's net/http names (Istio takes a number in retryOn as a status code only when it is one of these). */
const KNOWN_STATUS = new Set<number>([
  100, 101, 102, 103, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 307, 308,
  400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 421, 422, 423, 424, 425, 426, 428, 429, 431, 451,
  500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
]);

/** `mesh` stays; `ns/name` stays; a bare `name` is in the VirtualService's namespace. */
export function resolveGatewayRef(raw: unknown, field: string, namespace: string): string {
  const ref = str(raw, field, { nonEmpty: true });
  if (ref === MESH_GATEWAY) return ref;
  const slash = ref.indexOf('/');
  if (slash < 0) return `${namespace}/${checkName(ref, field)}`;
  checkNamespace(ref.slice(0, slash), field);
  checkName(ref.slice(slash + 1), field);
  return ref;
}

function stringMatch(raw: unknown, field: string): StringMatch | undefined {
  return raw === undefined ? undefined : parseStringMatch(raw, field);
}

function headerMatches(raw: unknown, field: string): HeaderMatch[] {
  if (raw === undefined) return [];
  return Object.entries(obj(raw, field)).map(([key, m]) => {
    const at = item(field, key);
    if (m === null || m === undefined) throw new FieldError(at, 'expected a matcher such as {exact: value} ({} for "present")');
    const match = parseStringMatch(m, at, { allowPresent: true });
    if (isRouteClaimKey(key)) {
      const parsed = parseRouteClaimKey(key);
      if (!parsed.ok) throw new FieldError(at, `${show(key)} is not a valid claim key: ${parsed.message}`);
      return { kind: 'claim', key, path: parsed.path, match };
    }
    if (key.startsWith('@')) {
      throw new FieldError(at, `${show(key)}: the only '@' keys are @request.auth.claims.<claim> and @request.auth.claims[<claim>]`);
    }
    return { kind: 'header', name: checkHeaderName(key, at).toLowerCase(), match };
  });
}

function parseMatch(raw: unknown, field: string, namespace: string, vsGateways: readonly string[], warn: Warn): HttpMatchRequest {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['name', 'uri', 'scheme', 'method', 'authority', 'headers', 'withoutHeaders', 'queryParams', 'ignoreUriCase', 'port', 'gateways',
      'sourceLabels', 'sourceNamespace'],
    pending: { statPrefix: LATER.statPrefix },
  });
  const at = (k: string): string => child(field, k);
  const queryParams = o['queryParams'] === undefined ? [] : Object.entries(obj(o['queryParams'], at('queryParams'))).map(([name, m]) => {
    const where = item(at('queryParams'), name);
    if (m === null || m === undefined) throw new FieldError(where, 'expected a matcher such as {exact: value} ({} for "present")');
    return { name, match: parseStringMatch(m, where, { allowPresent: true }) };
  });
  const name = optStr(o['name'], at('name'));
  const uri = stringMatch(o['uri'], at('uri'));
  const method = stringMatch(o['method'], at('method'));
  const authority = stringMatch(o['authority'], at('authority'));
  const scheme = stringMatch(o['scheme'], at('scheme'));
  const port = optInt(o['port'], at('port'), 1, 65535);
  const gateways = o['gateways'] === undefined ? undefined
    : list(o['gateways'], at('gateways')).map((g, i) => resolveGatewayRef(g, item(at('gateways'), i), namespace));
  const sourceLabels = o['sourceLabels'] === undefined ? undefined : labelMap(o['sourceLabels'], at('sourceLabels'));
  const sourceNamespace = o['sourceNamespace'] === undefined ? undefined
    : checkNamespace(str(o['sourceNamespace'], at('sourceNamespace'), { nonEmpty: true }), at('sourceNamespace'));
  // Istio applies both to sidecars only: on a match that no sidecar uses, they have no effect.
  if (!(gateways ?? vsGateways).includes(MESH_GATEWAY)) {
    if (sourceLabels !== undefined) warn(at('sourceLabels'), 'has no effect: Istio applies it to sidecars only, and this match is not bound to the mesh gateway');
    if (sourceNamespace !== undefined) warn(at('sourceNamespace'), 'has no effect: Istio applies it to sidecars only, and this match is not bound to the mesh gateway');
  }
  return {
    ...(name !== undefined ? { name } : {}),
    ...(uri !== undefined ? { uri } : {}),
    ...(method !== undefined ? { method } : {}),
    ...(authority !== undefined ? { authority } : {}),
    ...(scheme !== undefined ? { scheme } : {}),
    headers: headerMatches(o['headers'], at('headers')),
    withoutHeaders: headerMatches(o['withoutHeaders'], at('withoutHeaders')),
    queryParams,
    ignoreUriCase: optBool(o['ignoreUriCase'], at('ignoreUriCase')) ?? false,
    ...(port !== undefined ? { port } : {}),
    ...(gateways !== undefined ? { gateways } : {}),
    ...(sourceLabels !== undefined ? { sourceLabels } : {}),
    ...(sourceNamespace !== undefined ? { sourceNamespace } : {}),
  };
}

function parseDestination(raw: unknown, field: string): Omit<HttpRouteDestination, 'weight'> & { weight?: number } {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['destination', 'weight', 'headers'] });
  const headers = parseHeaderEdits(o['headers'], child(field, 'headers'));
  const weight = optInt(o['weight'], child(field, 'weight'), 0, INT32_MAX);
  return {
    ...parseDestinationRef(o['destination'], child(field, 'destination')), ...(weight !== undefined ? { weight } : {}),
    ...(headers?.request || headers?.response ? { headers } : {}),
  };
}

/** A Destination (host, subset, port): a route's, or a mirror's. */
function parseDestinationRef(raw: unknown, dField: string): Omit<HttpRouteDestination, 'weight'> {
  const d = obj(raw, dField);
  checkFields(d, dField, { supported: ['host', 'subset', 'port'] });
  const host = checkHostPattern(str(d['host'], child(dField, 'host'), { nonEmpty: true }), child(dField, 'host'));
  if (host.includes('*')) throw new FieldError(child(dField, 'host'), `${show(host)}: a destination host cannot be a wildcard`);
  const rawSubset = optStr(d['subset'], child(dField, 'subset'));
  const subset = rawSubset === undefined || rawSubset === '' ? undefined : checkSubsetName(rawSubset, child(dField, 'subset'));
  let port: number | undefined;
  if (d['port'] !== undefined) {
    const pField = child(dField, 'port');
    const p = obj(d['port'], pField);
    checkFields(p, pField, { supported: ['number'] });
    port = int(p['number'], child(pField, 'number'), 1, 65535);
  }
  return { host, ...(port !== undefined ? { port } : {}), ...(subset !== undefined ? { subset } : {}) };
}

/**
 * Istio's rule: one destination takes all traffic; several share it in proportion to their weights
 * (which need not add up to 100), and at least one weight must be above 0.
 */
export function parseRouteDestinations(raw: unknown, field: string): HttpRouteDestination[] {
  const parsed = optList(raw, field).map((v, i) => parseDestination(v, item(field, i)));
  if (parsed.length === 1) return [{ ...parsed[0]!, weight: 100 }];
  const total = parsed.reduce((sum, d) => sum + (d.weight ?? 0), 0);
  if (parsed.length > 1 && total === 0) {
    throw new FieldError(field, 'the weights of several destinations add up to 0: give at least one a weight above 0 (a destination gets weight / sum of weights)');
  }
  return parsed.map((d) => ({ ...d, weight: d.weight ?? 0 }));
}

/** `retryOn`: Envoy's condition names and HTTP status codes, comma-separated, as Istio's validation reads it. */
function parseRetryOn(raw: unknown, field: string): NonNullable<HttpRetry['retryOn']> {
  const text = str(raw, field, { nonEmpty: true });
  const conditions: RetryOnPolicy[] = [];
  const statusCodes: number[] = [];
  for (const part of text.split(',')) {
    if (/^[0-9]+$/.test(part) && KNOWN_STATUS.has(Number(part))) {
      if (!statusCodes.includes(Number(part))) statusCodes.push(Number(part));
    } else if ((RETRY_ON_POLICIES as readonly string[]).includes(part)) {
      if (!conditions.includes(part as RetryOnPolicy)) conditions.push(part as RetryOnPolicy);
    } else {
      const hint = part.trim() !== part ? ' (no spaces around the commas: Istio refuses them)' : part === '' ? ' (an empty entry)' : '';
      throw new FieldError(field, `${show(part)} is not a retry condition${hint}; accepted: ${RETRY_ON_POLICIES.join(', ')}, or an HTTP status code such as 503`);
    }
  }
  return { conditions, statusCodes };
}

function parseRetries(raw: unknown, field: string): HttpRetry {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['attempts', 'perTryTimeout', 'retryOn', 'retryRemoteLocalities', 'retryIgnorePreviousHosts', 'backoff'] });
  const at = (k: string): string => child(field, k);
  const attempts = optInt(o['attempts'], at('attempts'), 0, INT32_MAX) ?? 0;
  if (attempts === 0) {
    // Istio's rule: with no attempts (retries off), the rest of a policy would be meaningless.
    const extra = (['perTryTimeout', 'retryOn', 'retryRemoteLocalities'] as const).find((k) => o[k] !== undefined);
    if (extra !== undefined) throw new FieldError(at(extra), 'is given while attempts is 0 (retries off), which Istio refuses: set attempts, or remove it');
  }
  const perTryTimeoutMs = optDuration(o['perTryTimeout'], at('perTryTimeout'));
  const retryOn = o['retryOn'] === undefined ? undefined : parseRetryOn(o['retryOn'], at('retryOn'));
  const retryRemoteLocalities = optBool(o['retryRemoteLocalities'], at('retryRemoteLocalities'));
  const retryIgnorePreviousHosts = optBool(o['retryIgnorePreviousHosts'], at('retryIgnorePreviousHosts'));
  const backoffMs = optDuration(o['backoff'], at('backoff'));
  return {
    attempts,
    ...(perTryTimeoutMs !== undefined ? { perTryTimeoutMs } : {}),
    ...(retryOn !== undefined ? { retryOn } : {}),
    ...(retryRemoteLocalities !== undefined ? { retryRemoteLocalities } : {}),
    ...(retryIgnorePreviousHosts !== undefined ? { retryIgnorePreviousHosts } : {}),
    ...(backoffMs !== undefined ? { backoffMs } : {}),
  };
}

/** Istio's Percent `{value}`: a double from 0 to 100, as Envoy's per-million share (truncated, as Istio converts it). */
function percentage(raw: unknown, field: string): number {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['value'] });
  const v = o['value'] ?? 0;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 100) throw new FieldError(child(field, 'value'), `${show(v)}: expected a number from 0 to 100`);
  return Math.trunc(v * 10000);
}

/**
 * Istio's fault injection, with its translation to Envoy's filter: a share left out is 0 (nothing is
 * delayed or aborted: Istio passes no share, and Envoy's default is none); the deprecated integer
 * `percent` of a delay counts only when `percentage` is absent.
 */
function parseFault(raw: unknown, field: string): HttpFault | undefined {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['delay', 'abort'] });
  let delay: HttpFault['delay'];
  if (o['delay'] !== undefined) {
    const dField = child(field, 'delay');
    const d = obj(o['delay'], dField);
    checkFields(d, dField, { supported: ['fixedDelay', 'percentage', 'percent'], pending: { exponentialDelay: 'exponential delays (Istio refuses them too)' } });
    if (d['fixedDelay'] === undefined) throw new FieldError(child(dField, 'fixedDelay'), 'required: the time to delay a request by');
    const fixedDelayMs = optDuration(d['fixedDelay'], child(dField, 'fixedDelay'))!;
    const percent = optInt(d['percent'], child(dField, 'percent'), 0, 100);
    const perMillion = d['percentage'] !== undefined ? percentage(d['percentage'], child(dField, 'percentage')) : (percent ?? 0) * 10000;
    delay = { fixedDelayMs, perMillion };
  }
  let abort: HttpFault['abort'];
  if (o['abort'] !== undefined) {
    const aField = child(field, 'abort');
    const a = obj(o['abort'], aField);
    checkFields(a, aField, { supported: ['httpStatus', 'grpcStatus', 'percentage'], pending: { http2Error: 'aborts with an HTTP/2 error (Istio refuses them too)' } });
    const given = (['httpStatus', 'grpcStatus'] as const).filter((k) => a[k] !== undefined);
    if (given.length !== 1) throw new FieldError(aField, given.length === 0 ? 'needs httpStatus or grpcStatus' : 'takes only one of httpStatus or grpcStatus');
    const perMillion = a['percentage'] !== undefined ? percentage(a['percentage'], child(aField, 'percentage')) : 0;
    if (a['httpStatus'] !== undefined) {
      abort = { perMillion, httpStatus: int(a['httpStatus'], child(aField, 'httpStatus'), 200, 599) };
    } else {
      const name = str(a['grpcStatus'], child(aField, 'grpcStatus'), { nonEmpty: true });
      const code = GRPC_STATUS_NAMES.indexOf(name);
      if (code < 0) throw new FieldError(child(aField, 'grpcStatus'), `${show(name)} is not a gRPC status name; accepted: ${GRPC_STATUS_NAMES.join(', ')}`);
      abort = { perMillion, grpcStatus: code };
    }
  }
  if (delay === undefined && abort === undefined) throw new FieldError(field, 'needs delay or abort (Istio refuses an empty fault)');
  return { ...(delay ? { delay } : {}), ...(abort ? { abort } : {}) };
}

/**
 * Why configuration may not edit a header, or undefined: the framing and the connection's own lines
 * (the proxy writes them for the bytes it sends), pseudo-headers, and what the proxy asserts about a
 * request (x-forwarded-client-cert: the peer's certificate; x-envoy-*: Envoy's internal headers, peer
 * metadata among them), which neither a client nor a route may supply.
 */
function ownedHeader(lower: string): string | undefined {
  if (lower.startsWith(':')) return 'is a pseudo-header';
  if (isProxyOwned(lower) || isHopByHop(lower)) return 'belongs to the connection and the framing, which the proxy writes';
  if (lower === 'x-forwarded-client-cert') return 'is asserted by the proxy (the peer\'s certificate)';
  if (lower.startsWith('x-envoy-')) return 'is one of Envoy\'s internal headers, which the proxy owns';
  return undefined;
}

function headerOperations(raw: unknown, field: string, direction: 'request' | 'response'): HeaderOperations | undefined {
  const r = optObj(raw, field);
  if (r === undefined) return undefined;
  checkFields(r, field, { supported: ['set', 'add', 'remove'] });
  const checked = (name: string, at: string): string => {
    const lower = checkHeaderName(name, at).toLowerCase();
    const owned = ownedHeader(lower);
    if (owned !== undefined) throw new FieldError(at, `${show(name)} cannot be edited by a route: it ${owned}`);
    return lower;
  };
  const names = (m: Record<string, string>, at: string): Record<string, string> =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [checked(k, item(at, k)), v]));
  const set = r['set'] === undefined ? {} : names(stringMap(r['set'], child(field, 'set')), child(field, 'set'));
  const add = r['add'] === undefined ? {} : names(stringMap(r['add'], child(field, 'add')), child(field, 'add'));
  // `add` appends a line: a second Host would make two requests of one (set it instead).
  if (direction === 'request' && Object.hasOwn(add, 'host')) throw new FieldError(item(child(field, 'add'), 'host'), 'cannot be added: a request has one Host (use set, or rewrite.authority)');
  const remove = r['remove'] === undefined ? []
    : strList(r['remove'], child(field, 'remove')).map((h, i) => checked(h, item(child(field, 'remove'), i)));
  if (direction === 'request' && remove.includes('host')) throw new FieldError(child(field, 'remove'), 'cannot remove Host: a request needs one');
  return { set, add, remove };
}

/** Istio's Headers: `request` and `response` operations. */
function parseHeaderEdits(raw: unknown, field: string): { request?: HeaderOperations; response?: HeaderOperations } | undefined {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['request', 'response'] });
  const request = headerOperations(o['request'], child(field, 'request'), 'request');
  const response = headerOperations(o['response'], child(field, 'response'), 'response');
  return { ...(request ? { request } : {}), ...(response ? { response } : {}) };
}

function parseRedirect(raw: unknown, field: string): HttpRoute['redirect'] {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['uri', 'authority', 'redirectCode', 'scheme', 'port', 'derivePort'] });
  const uri = optStr(o['uri'], child(field, 'uri'), { nonEmpty: true });
  const authority = optStr(o['authority'], child(field, 'authority'), { nonEmpty: true });
  const scheme = optStr(o['scheme'], child(field, 'scheme'), { nonEmpty: true });
  if (scheme !== undefined && !/^[A-Za-z][A-Za-z0-9+.-]*$/.test(scheme)) throw new FieldError(child(field, 'scheme'), `${show(scheme)} is not a URI scheme (such as http or https)`);
  const port = optInt(o['port'], child(field, 'port'), 1, 65535);
  const derivePort = o['derivePort'] === undefined ? undefined
    : oneOf(o['derivePort'], child(field, 'derivePort'), ['FROM_PROTOCOL_DEFAULT', 'FROM_REQUEST_PORT'] as const);
  // One field in Istio's API (a oneof): both given is a contradiction, not a choice.
  if (port !== undefined && derivePort !== undefined) throw new FieldError(field, 'takes only one of port or derivePort');
  if (uri === undefined && authority === undefined && scheme === undefined && port === undefined && derivePort === undefined) {
    throw new FieldError(field, 'needs uri, authority, scheme, port or derivePort');
  }
  const code = optInt(o['redirectCode'], child(field, 'redirectCode'), 300, 399) ?? 301;
  if (!REDIRECT_CODES.includes(code)) throw new FieldError(child(field, 'redirectCode'), `${code} is not one of ${REDIRECT_CODES.join(', ')}`);
  return {
    ...(uri !== undefined ? { uri } : {}), ...(authority !== undefined ? { authority } : {}), redirectCode: code,
    ...(scheme !== undefined ? { scheme } : {}), ...(port !== undefined ? { port } : {}), ...(derivePort !== undefined ? { derivePort } : {}),
  };
}

/** `uriRegexRewrite`: an RE2 regex found anywhere in the path, and its RE2 substitution, both as JavaScript reads them with the same meaning. */
function parseUriRegexRewrite(raw: unknown, field: string): NonNullable<NonNullable<HttpRoute['rewrite']>['uriRegex']> {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['match', 'rewrite'] });
  const match = str(o['match'], child(field, 'match'), { nonEmpty: true });
  let regex: RegExp;
  try {
    regex = compileGlobal(match);
  } catch (err) {
    throw new FieldError(child(field, 'match'), `${show(match)} is not a regular expression this agent reads as RE2 does: ${(err as Error).message}`);
  }
  const text = str(o['rewrite'], child(field, 'rewrite'));
  try {
    return { match, regex, substitution: translateSubstitution(text, groupCount(regex)) };
  } catch (err) {
    throw new FieldError(child(field, 'rewrite'), `${show(text)}: ${(err as Error).message}`);
  }
}

function parseRewrite(raw: unknown, field: string): HttpRoute['rewrite'] {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['uri', 'authority', 'uriRegexRewrite'] });
  const uri = optStr(o['uri'], child(field, 'uri'));
  const authority = optStr(o['authority'], child(field, 'authority'), { nonEmpty: true });
  const uriRegex = o['uriRegexRewrite'] === undefined ? undefined : parseUriRegexRewrite(o['uriRegexRewrite'], child(field, 'uriRegexRewrite'));
  if (uriRegex !== undefined && uri !== undefined) throw new FieldError(field, 'takes only one of uri or uriRegexRewrite (Istio\'s rule)');
  return { ...(uri !== undefined ? { uri } : {}), ...(authority !== undefined ? { authority } : {}), ...(uriRegex !== undefined ? { uriRegex } : {}) };
}

function parseDirectResponse(raw: unknown, field: string): HttpRoute['directResponse'] {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['status', 'body'] });
  const status = int(o['status'], child(field, 'status'), 200, 599);
  if (o['body'] === undefined) return { status };
  const bField = child(field, 'body');
  const b = obj(o['body'], bField);
  checkFields(b, bField, { supported: ['string', 'bytes'] });
  if (b['string'] !== undefined && b['bytes'] !== undefined) throw new FieldError(bField, 'expected only one of string or bytes');
  if (b['bytes'] !== undefined) {
    const base64 = str(b['bytes'], child(bField, 'bytes'));
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64) || base64.length % 4 !== 0) throw new FieldError(child(bField, 'bytes'), 'expected base64 text');
    return { status, body: Buffer.from(base64, 'base64').toString('utf8') };
  }
  return { status, body: str(b['string'], child(bField, 'string')) };
}

/** Istio's Percent: `{value: <0..100>}`, a double. */
function parsePercent(raw: unknown, field: string): number {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['value'] });
  const v = o['value'] ?? 0;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new FieldError(child(field, 'value'), `expected a number from 0 to 100, got ${show(v)}`);
  if (v < 0 || v > 100) throw new FieldError(child(field, 'value'), `${v} is not a percentage from 0 to 100`);
  return v;
}

/**
 * `mirror` with `mirrorPercentage` (or the deprecated `mirrorPercent`), or the list `mirrors`: 100%
 * when no percentage is given, an explicit 0 turns a mirror off (Istio's reading).
 */
function parseMirrors(o: Record<string, unknown>, at: (k: string) => string, warn: Warn): HttpMirror[] | undefined {
  const percentKey = o['mirrorPercent'] !== undefined ? 'mirrorPercent' : o['mirror_percent'] !== undefined ? 'mirror_percent' : undefined;
  if (o['mirror'] !== undefined && o['mirrors'] !== undefined) throw new FieldError(at('mirrors'), 'is given with mirror: use one of them (Istio refuses both)');
  if (o['mirror'] === undefined) {
    const stray = o['mirrorPercentage'] !== undefined ? 'mirrorPercentage' : percentKey;
    if (stray !== undefined) throw new FieldError(at(stray), 'only applies with mirror');
  }
  if (o['mirror'] !== undefined) {
    const destination = { ...parseDestinationRef(o['mirror'], at('mirror')), weight: 100 };
    let percent = 100;
    if (percentKey !== undefined) {
      const old = int(o[percentKey], at(percentKey), 0, 100);
      if (o['mirrorPercentage'] !== undefined) warn(at(percentKey), 'is deprecated and ignored beside mirrorPercentage, as Istio ignores it');
      else {
        warn(at(percentKey), 'is deprecated: use mirrorPercentage');
        percent = old;
      }
    }
    if (o['mirrorPercentage'] !== undefined) percent = parsePercent(o['mirrorPercentage'], at('mirrorPercentage'));
    return [{ destination, percent }];
  }
  if (o['mirrors'] === undefined) return undefined;
  return list(o['mirrors'], at('mirrors')).map((m, i) => {
    const field = item(at('mirrors'), i);
    const mo = obj(m, field);
    checkFields(mo, field, { supported: ['destination', 'percentage'] });
    if (mo['destination'] === undefined) throw new FieldError(child(field, 'destination'), 'required');
    const destination = { ...parseDestinationRef(mo['destination'], child(field, 'destination')), weight: 100 };
    const percent = mo['percentage'] === undefined ? 100 : parsePercent(mo['percentage'], child(field, 'percentage'));
    return { destination, percent };
  });
}

/** The methods Istio accepts in corsPolicy.allowMethods. */
const CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'];

function parseCorsPolicy(raw: unknown, field: string, warn: Warn): CorsPolicy | undefined {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, {
    supported: ['allowOrigins', 'allowOrigin', 'allowMethods', 'allowHeaders', 'exposeHeaders', 'maxAge', 'allowCredentials', 'unmatchedPreflights'],
  });
  const at = (k: string): string => child(field, k);
  let allowOrigins: StringMatch[] = optList(o['allowOrigins'], at('allowOrigins')).map((m, i) => {
    const where = item(at('allowOrigins'), i);
    const match = parseStringMatch(m, where);
    if (match.kind !== 'present' && match.value === '') throw new FieldError(where, 'an empty origin matcher is not accepted (Istio)');
    return match;
  });
  if (o['allowOrigin'] !== undefined) {
    const exact = strList(o['allowOrigin'], at('allowOrigin'), { nonEmptyItems: true });
    if (allowOrigins.length > 0) warn(at('allowOrigin'), 'is deprecated and ignored beside allowOrigins, as Istio ignores it');
    else {
      warn(at('allowOrigin'), 'is deprecated: use allowOrigins (each entry here is an exact match)');
      allowOrigins = exact.map((value) => ({ kind: 'exact', value }));
    }
  }
  const methods = o['allowMethods'] === undefined ? undefined : strList(o['allowMethods'], at('allowMethods')).map((m, i) => {
    if (!CORS_METHODS.includes(m)) throw new FieldError(item(at('allowMethods'), i), `${show(m)} is not a supported HTTP method (one of ${CORS_METHODS.join(', ')})`);
    return m;
  });
  const names = (k: string): string[] | undefined => o[k] === undefined ? undefined
    : strList(o[k], at(k)).map((h, i) => checkHeaderName(h, item(at(k), i)));
  const allowHeaders = names('allowHeaders');
  const exposeHeaders = names('exposeHeaders');
  let maxAge: string | undefined;
  if (o['maxAge'] !== undefined) {
    const ms = optDuration(o['maxAge'], at('maxAge'))!;
    if (ms % 1000 !== 0) throw new FieldError(at('maxAge'), `${show(o['maxAge'])} is not a whole number of seconds (Istio: max_age is accurate only to seconds)`);
    maxAge = String(ms / 1000);
  }
  const allowCredentials = optBool(o['allowCredentials'], at('allowCredentials'));
  const unmatched = o['unmatchedPreflights'] === undefined ? 'UNSPECIFIED'
    : oneOf(o['unmatchedPreflights'], at('unmatchedPreflights'), ['UNSPECIFIED', 'FORWARD', 'IGNORE'] as const);
  return {
    allowOrigins,
    ...(methods !== undefined && methods.length > 0 ? { allowMethods: methods.join(',') } : {}),
    ...(allowHeaders !== undefined && allowHeaders.length > 0 ? { allowHeaders: allowHeaders.join(',') } : {}),
    ...(exposeHeaders !== undefined && exposeHeaders.length > 0 ? { exposeHeaders: exposeHeaders.join(',') } : {}),
    ...(maxAge !== undefined ? { maxAge } : {}),
    ...(allowCredentials !== undefined ? { allowCredentials } : {}),
    unmatchedPreflights: unmatched === 'IGNORE' ? 'IGNORE' : 'FORWARD',
  };
}

function parseRoute(raw: unknown, field: string, namespace: string, vsGateways: readonly string[], warn: Warn): HttpRoute {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['name', 'match', 'route', 'redirect', 'directResponse', 'rewrite', 'timeout', 'headers', 'retries', 'fault', 'mirror', 'mirrors',
      'mirrorPercentage', 'mirrorPercent', 'mirror_percent', 'corsPolicy'],
    pending: { delegate: LATER.delegate },
  });
  const at = (k: string): string => child(field, k);
  const name = optStr(o['name'], at('name'));
  const match = optList(o['match'], at('match')).map((m, i) => parseMatch(m, item(at('match'), i), namespace, vsGateways, warn));
  const route = parseRouteDestinations(o['route'], at('route'));
  const redirect = parseRedirect(o['redirect'], at('redirect'));
  const directResponse = parseDirectResponse(o['directResponse'], at('directResponse'));
  const rewrite = parseRewrite(o['rewrite'], at('rewrite'));
  const headers = parseHeaderEdits(o['headers'], at('headers'));
  const requestHeaders = headers?.request;
  const responseHeaders = headers?.response;
  const timeoutMs = optDuration(o['timeout'], at('timeout'));
  const retries = o['retries'] === undefined ? undefined : parseRetries(o['retries'], at('retries'));
  const fault = parseFault(o['fault'], at('fault'));
  const actions = [route.length > 0 && 'route', redirect && 'redirect', directResponse && 'directResponse'].filter(Boolean);
  if (actions.length === 0) throw new FieldError(field, 'needs one of route, redirect or directResponse');
  if (actions.length > 1) throw new FieldError(field, `takes only one of route, redirect or directResponse, got ${actions.join(' and ')}`);
  if (rewrite && !route.length) throw new FieldError(at('rewrite'), 'only applies with route');
  const mirrors = parseMirrors(o, at, warn);
  if (mirrors !== undefined && !route.length) throw new FieldError(at(o['mirrors'] !== undefined ? 'mirrors' : 'mirror'), 'only applies with route (a copy of what is forwarded)');
  const corsPolicy = parseCorsPolicy(o['corsPolicy'], at('corsPolicy'), warn);
  if (corsPolicy !== undefined && !route.length) {
    warn(at('corsPolicy'), 'has no effect on a rule that redirects or answers directly: Envoy\'s CORS filter skips such routes');
  }
  return {
    ...(name !== undefined ? { name } : {}),
    match,
    route,
    ...(directResponse !== undefined ? { directResponse } : {}),
    ...(redirect !== undefined ? { redirect } : {}),
    ...(rewrite !== undefined ? { rewrite } : {}),
    ...(requestHeaders !== undefined ? { requestHeaders } : {}),
    ...(responseHeaders !== undefined ? { responseHeaders } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(retries !== undefined ? { retries } : {}),
    ...(fault !== undefined ? { fault } : {}),
    ...(mirrors !== undefined ? { mirrors } : {}),
    ...(corsPolicy !== undefined && route.length > 0 ? { corsPolicy } : {}),
  };
}

/** Istio's duplicate check: one pattern matches the other (`*.a.com` and `x.a.com`, `*` and anything). */
function hostsOverlap(a: string, b: string): boolean {
  const covers = (pattern: string, name: string): boolean =>
    pattern === name || pattern === '*' || (pattern.startsWith('*.') && name.endsWith(pattern.slice(1)));
  return covers(a, b) || covers(b, a);
}

/** Istio's rule: JWT claims are known at gateways only, so a VirtualService that sidecars use cannot route on them. */
function checkClaimRouting(http: readonly HttpRoute[]): void {
  http.forEach((route, r) => route.match.forEach((m, i) => {
    for (const [list, matchers] of [['headers', m.headers], ['withoutHeaders', m.withoutHeaders]] as const) {
      const claim = matchers.find((h) => h.kind === 'claim');
      if (claim?.kind === 'claim') {
        throw new FieldError(`${item(`${item('spec.http', r)}.match`, i)}.${list}[${claim.key}]`,
          'routes on a JWT claim, which Istio allows only in a VirtualService bound to gateways alone (not to mesh)');
      }
    }
  }));
}

export function validateVirtualService(spec: unknown, meta: ResourceMeta, warn: Warn = IGNORE_WARNINGS): VirtualService {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', { supported: ['hosts', 'gateways', 'http', 'tcp', 'tls', 'exportTo'] });
  const hosts = list(s['hosts'], 'spec.hosts', { nonEmpty: true })
    .map((h, i) => checkHostPattern(str(h, item('spec.hosts', i), { nonEmpty: true }), item('spec.hosts', i)));
  hosts.forEach((h, j) => {
    const earlier = hosts.slice(0, j).find((g) => hostsOverlap(g, h));
    if (earlier !== undefined) throw new FieldError(item('spec.hosts', j), `${show(h)} overlaps ${show(earlier)}, listed before (Istio refuses duplicate hosts)`);
  });
  const listed = optList(s['gateways'], 'spec.gateways').map((g, i) => resolveGatewayRef(g, item('spec.gateways', i), meta.namespace));
  // Absent or empty: the mesh (sidecars) only, as in Istio.
  const gateways = listed.length === 0 ? [MESH_GATEWAY] : [...new Set(listed)];
  if (gateways.includes(MESH_GATEWAY) && hosts.includes('*')) {
    throw new FieldError('spec.hosts', 'the host * is not allowed in a VirtualService bound to the mesh gateway (Istio\'s rule)');
  }
  const http = optList(s['http'], 'spec.http').map((r, i) => parseRoute(r, item('spec.http', i), meta.namespace, gateways, warn));
  const l4: L4RouteContext = { hosts, gateways, gatewayRef: (g, at) => resolveGatewayRef(g, at, meta.namespace), warn };
  const tcp = parseTcpRoutes(s['tcp'], l4, parseRouteDestinations);
  const tls = parseTlsRoutes(s['tls'], l4, parseRouteDestinations);
  if (http.length === 0 && tcp.length === 0 && tls.length === 0) {
    throw new FieldError('spec.http', 'required: a VirtualService needs at least one route (http, tcp or tls)');
  }
  if (gateways.includes(MESH_GATEWAY)) checkClaimRouting(http);
  const exportTo = parseExportTo(s['exportTo'], 'spec.exportTo', meta.namespace);
  if (exportTo !== undefined && !(exportTo.length === 1 && exportTo[0] === '*') && gateways.some((g) => g !== MESH_GATEWAY)) {
    // Sidecars honour exportTo (src/traffic/mesh-routes.ts); the gateway's route table does not scope by it yet.
    throw new FieldError('spec.exportTo', 'is not supported yet on a VirtualService bound to a gateway: the gateway does not scope VirtualServices by exportTo (give it on mesh-only VirtualServices)');
  }
  return {
    meta, hosts, gateways, http, ...(tcp.length > 0 ? { tcp } : {}), ...(tls.length > 0 ? { tls } : {}), ...(exportTo !== undefined ? { exportTo } : {}),
  };
}
