// VirtualService (networking.mesh.io): HTTP routes for a set of hosts, bound to gateways. Header
// matchers whose key is `@request.auth.claims...` match validated JWT claims instead of headers.
import type {
  HeaderMatch, HttpMatchRequest, HttpRoute, HttpRouteDestination, ResourceMeta, StringMatch, VirtualService,
} from './types.js';
import { parseGoDuration } from '../env/values.js';
import { isRouteClaimKey, parseRouteClaimKey } from '../../security/claims.js';
import {
  checkFields, child, FieldError, int, item, list, obj, optBool, optInt, optList, optObj, optStr, show, str,
  stringMap, strList,
} from './fields.js';
import { checkHeaderName, checkHostPattern, checkName, checkNamespace } from './names.js';
import { parseStringMatch } from './string-match.js';

export const MESH_GATEWAY = 'mesh';
const REDIRECT_CODES = [301, 302, 303, 307, 308];

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

function parseMatch(raw: unknown, field: string, namespace: string): HttpMatchRequest {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['name', 'uri', 'scheme', 'method', 'authority', 'headers', 'withoutHeaders', 'queryParams', 'ignoreUriCase', 'port', 'gateways'],
    ignored: ['statPrefix'],
    unsupported: ['sourceLabels', 'sourceNamespace'],
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
  };
}

function parseDestination(raw: unknown, field: string): Omit<HttpRouteDestination, 'weight'> & { weight?: number } {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['destination', 'weight'], ignored: ['headers'] });
  const dField = child(field, 'destination');
  const d = obj(o['destination'], dField);
  checkFields(d, dField, { supported: ['host', 'subset', 'port'] });
  const host = checkHostPattern(str(d['host'], child(dField, 'host'), { nonEmpty: true }), child(dField, 'host'));
  if (host.includes('*')) throw new FieldError(child(dField, 'host'), `${show(host)}: a destination host cannot be a wildcard`);
  const subset = optStr(d['subset'], child(dField, 'subset'));
  let port: number | undefined;
  if (d['port'] !== undefined) {
    const pField = child(dField, 'port');
    const p = obj(d['port'], pField);
    checkFields(p, pField, { supported: ['number'] });
    port = int(p['number'], child(pField, 'number'), 1, 65535);
  }
  const weight = optInt(o['weight'], child(field, 'weight'), 0, 100);
  return { host, ...(port !== undefined ? { port } : {}), ...(subset !== undefined ? { subset } : {}), ...(weight !== undefined ? { weight } : {}) };
}

/** Istio's rule: one destination takes all traffic; several must have weights adding up to 100. */
function parseRouteDestinations(raw: unknown, field: string): HttpRouteDestination[] {
  const parsed = optList(raw, field).map((v, i) => parseDestination(v, item(field, i)));
  if (parsed.length === 1) return [{ ...parsed[0]!, weight: 100 }];
  const total = parsed.reduce((sum, d) => sum + (d.weight ?? 0), 0);
  if (parsed.length > 1 && total !== 100) {
    throw new FieldError(field, `the weights of several destinations must add up to 100, got ${total} (${parsed.map((d) => d.weight ?? 0).join(' + ')})`);
  }
  return parsed.map((d) => ({ ...d, weight: d.weight ?? 0 }));
}

function parseHeaderEdits(raw: unknown, field: string): HttpRoute['requestHeaders'] {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  // Response edits are an Istio field this agent does not apply (accepted, ignored).
  checkFields(o, field, { supported: ['request'], ignored: ['response'] });
  const rField = child(field, 'request');
  const r = optObj(o['request'], rField);
  if (r === undefined) return undefined;
  checkFields(r, rField, { supported: ['set', 'add', 'remove'] });
  const names = (m: Record<string, string>, at: string): Record<string, string> =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [checkHeaderName(k, item(at, k)).toLowerCase(), v]));
  const set = r['set'] === undefined ? {} : names(stringMap(r['set'], child(rField, 'set')), child(rField, 'set'));
  const add = r['add'] === undefined ? {} : names(stringMap(r['add'], child(rField, 'add')), child(rField, 'add'));
  const remove = r['remove'] === undefined ? []
    : strList(r['remove'], child(rField, 'remove')).map((h, i) => checkHeaderName(h, item(child(rField, 'remove'), i)).toLowerCase());
  return { set, add, remove };
}

function parseRedirect(raw: unknown, field: string): HttpRoute['redirect'] {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['uri', 'authority', 'redirectCode'], unsupported: ['scheme', 'port', 'derivePort'] });
  const uri = optStr(o['uri'], child(field, 'uri'), { nonEmpty: true });
  const authority = optStr(o['authority'], child(field, 'authority'), { nonEmpty: true });
  if (uri === undefined && authority === undefined) throw new FieldError(field, 'needs uri or authority');
  const code = optInt(o['redirectCode'], child(field, 'redirectCode'), 300, 399) ?? 301;
  if (!REDIRECT_CODES.includes(code)) throw new FieldError(child(field, 'redirectCode'), `${code} is not one of ${REDIRECT_CODES.join(', ')}`);
  return { ...(uri !== undefined ? { uri } : {}), ...(authority !== undefined ? { authority } : {}), redirectCode: code };
}

function parseRewrite(raw: unknown, field: string): HttpRoute['rewrite'] {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['uri', 'authority'], unsupported: ['uriRegexRewrite'] });
  const uri = optStr(o['uri'], child(field, 'uri'));
  const authority = optStr(o['authority'], child(field, 'authority'), { nonEmpty: true });
  return { ...(uri !== undefined ? { uri } : {}), ...(authority !== undefined ? { authority } : {}) };
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

function parseTimeout(raw: unknown, field: string): number | undefined {
  if (raw === undefined) return undefined;
  const parsed = typeof raw === 'string' ? parseGoDuration(raw) : undefined;
  if (!parsed?.ok || parsed.value < 0) throw new FieldError(field, `${show(raw)} is not a duration such as 15s or 500ms`);
  return parsed.value;
}

function parseRoute(raw: unknown, field: string, namespace: string): HttpRoute {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['name', 'match', 'route', 'redirect', 'directResponse', 'rewrite', 'timeout', 'headers'],
    ignored: ['retries', 'fault', 'mirror', 'mirrors', 'mirrorPercentage', 'mirrorPercent', 'mirror_percent', 'corsPolicy'],
    unsupported: ['delegate'],
  });
  const at = (k: string): string => child(field, k);
  const name = optStr(o['name'], at('name'));
  const match = optList(o['match'], at('match')).map((m, i) => parseMatch(m, item(at('match'), i), namespace));
  const route = parseRouteDestinations(o['route'], at('route'));
  const redirect = parseRedirect(o['redirect'], at('redirect'));
  const directResponse = parseDirectResponse(o['directResponse'], at('directResponse'));
  const rewrite = parseRewrite(o['rewrite'], at('rewrite'));
  const requestHeaders = parseHeaderEdits(o['headers'], at('headers'));
  const timeoutMs = parseTimeout(o['timeout'], at('timeout'));
  const actions = [route.length > 0 && 'route', redirect && 'redirect', directResponse && 'directResponse'].filter(Boolean);
  if (actions.length === 0) throw new FieldError(field, 'needs one of route, redirect or directResponse');
  if (actions.length > 1) throw new FieldError(field, `takes only one of route, redirect or directResponse, got ${actions.join(' and ')}`);
  if (rewrite && !route.length) throw new FieldError(at('rewrite'), 'only applies with route');
  return {
    ...(name !== undefined ? { name } : {}),
    match,
    route,
    ...(directResponse !== undefined ? { directResponse } : {}),
    ...(redirect !== undefined ? { redirect } : {}),
    ...(rewrite !== undefined ? { rewrite } : {}),
    ...(requestHeaders !== undefined ? { requestHeaders } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  };
}

export function validateVirtualService(spec: unknown, meta: ResourceMeta): VirtualService {
  const s = obj(spec, 'spec');
  // tcp and tls routes are Istio fields this agent does not serve (accepted, ignored).
  checkFields(s, 'spec', { supported: ['hosts', 'gateways', 'http'], ignored: ['tls', 'tcp', 'exportTo'] });
  const hosts = list(s['hosts'], 'spec.hosts', { nonEmpty: true })
    .map((h, i) => checkHostPattern(str(h, item('spec.hosts', i), { nonEmpty: true }), item('spec.hosts', i)));
  const listed = optList(s['gateways'], 'spec.gateways').map((g, i) => resolveGatewayRef(g, item('spec.gateways', i), meta.namespace));
  // Absent or empty: the mesh (sidecars) only, as in Istio.
  const gateways = listed.length === 0 ? [MESH_GATEWAY] : [...new Set(listed)];
  if (gateways.includes(MESH_GATEWAY) && hosts.includes('*')) {
    throw new FieldError('spec.hosts', 'the host * is not allowed in a VirtualService bound to the mesh gateway (Istio\'s rule)');
  }
  const http = optList(s['http'], 'spec.http').map((r, i) => parseRoute(r, item('spec.http', i), meta.namespace));
  if (http.length === 0 && s['tcp'] === undefined && s['tls'] === undefined) {
    throw new FieldError('spec.http', 'required: a VirtualService needs at least one route');
  }
  return { meta, hosts, gateways, http };
}
