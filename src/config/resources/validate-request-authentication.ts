// RequestAuthentication (security.mesh.io): which issuers' JWTs a workload accepts, where their
// keys are, and where tokens are read from. A token that is present must verify; none is required.
import type { JwtRule, RequestAuthentication, ResourceMeta } from './types.js';
import {
  checkFields, child, FieldError, IGNORE_WARNINGS, isObj, item, list, obj, optBool, optDuration, optList, optStr, optStrList, show, str,
  type Warn,
} from './fields.js';
import { checkHeaderName } from './names.js';
import { parseWorkloadSelector } from './selector.js';

function checkJwksUri(text: string, field: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new FieldError(field, `${show(text)} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new FieldError(field, `${show(text)}: expected an http or https URL`);
  return text;
}

/** Inline keys must be a JWK set: `{"keys": [{"kty": ...}, ...]}` with at least one key. */
function checkJwks(text: string, field: string): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new FieldError(field, `not valid JSON: ${(err as Error).message}`);
  }
  if (!isObj(value) || !Array.isArray(value['keys'])) throw new FieldError(field, 'expected a JWK set: {"keys": [...]}');
  if (value['keys'].length === 0) throw new FieldError(field, 'the JWK set has no keys');
  const bad = value['keys'].findIndex((k) => !isObj(k) || typeof k['kty'] !== 'string');
  if (bad >= 0) throw new FieldError(field, `keys[${bad}] is not a JWK (an object with "kty")`);
  return text;
}

/** `sub` → ['sub']; `a.b` → ['a', 'b'] (nested claims). */
function claimPath(text: string, field: string): string[] {
  const path = text.split('.');
  if (path.some((p) => p === '')) throw new FieldError(field, `${show(text)} is not a claim name (empty part between dots)`);
  return path;
}

/** Whether checkJwksUri takes it: an http(s) URL that discovery can be asked under. */
function isUrl(text: string): boolean {
  try {
    checkJwksUri(text, '');
    return true;
  } catch {
    return false;
  }
}

function parseJwtRule(raw: unknown, field: string, warn: Warn): JwtRule {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['issuer', 'audiences', 'jwksUri', 'jwks', 'fromHeaders', 'fromParams', 'fromCookies',
      'outputPayloadToHeader', 'forwardOriginalToken', 'outputClaimToHeaders', 'timeout'],
  });
  const at = (k: string): string => child(field, k);
  const issuer = str(o['issuer'], at('issuer'), { nonEmpty: true });
  const jwksUri = o['jwksUri'] === undefined ? undefined : checkJwksUri(str(o['jwksUri'], at('jwksUri')), at('jwksUri'));
  const jwks = o['jwks'] === undefined ? undefined : checkJwks(str(o['jwks'], at('jwks')), at('jwks'));
  // The key set fetch's time-out; at least 1ms, as Istio's schema says (durations: fields.ts).
  const timeoutMs = optDuration(o['timeout'], at('timeout'));
  if (timeoutMs !== undefined && jwks !== undefined) warn(at('timeout'), 'has no effect with an inline jwks: nothing is fetched (as in Istio)');
  // Neither: the keys are found by OpenID discovery under the issuer, as Istio does (src/security/jwt/jwks.ts).
  if (jwksUri === undefined && jwks === undefined && !isUrl(issuer)) {
    warn(at('issuer'), `${show(issuer)} is not an http(s) URL, so with neither jwksUri nor jwks no keys can be discovered for it: its tokens are refused (401), as in Istio`);
  }
  const fromHeaders = optList(o['fromHeaders'], at('fromHeaders')).map((h, i) => {
    const hf = item(at('fromHeaders'), i);
    const ho = obj(h, hf);
    checkFields(ho, hf, { supported: ['name', 'prefix'] });
    return {
      name: checkHeaderName(str(ho['name'], child(hf, 'name')), child(hf, 'name')).toLowerCase(),
      prefix: optStr(ho['prefix'], child(hf, 'prefix')) ?? '',
    };
  });
  const outputPayloadToHeader = optStr(o['outputPayloadToHeader'], at('outputPayloadToHeader'));
  if (outputPayloadToHeader !== undefined) checkHeaderName(outputPayloadToHeader, at('outputPayloadToHeader'));
  const outputClaimToHeaders = optList(o['outputClaimToHeaders'], at('outputClaimToHeaders')).map((c, i) => {
    const cf = item(at('outputClaimToHeaders'), i);
    const co = obj(c, cf);
    checkFields(co, cf, { supported: ['header', 'claim'] });
    return {
      header: checkHeaderName(str(co['header'], child(cf, 'header')), child(cf, 'header')).toLowerCase(),
      claim: claimPath(str(co['claim'], child(cf, 'claim'), { nonEmpty: true }), child(cf, 'claim')),
    };
  });
  return {
    issuer,
    audiences: optStrList(o['audiences'], at('audiences'), { nonEmptyItems: true }) ?? [],
    ...(jwksUri !== undefined ? { jwksUri } : {}),
    ...(jwks !== undefined ? { jwks } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    fromHeaders,
    fromParams: optStrList(o['fromParams'], at('fromParams'), { nonEmptyItems: true }) ?? [],
    fromCookies: optStrList(o['fromCookies'], at('fromCookies'), { nonEmptyItems: true }) ?? [],
    ...(outputPayloadToHeader !== undefined ? { outputPayloadToHeader: outputPayloadToHeader.toLowerCase() } : {}),
    forwardOriginalToken: optBool(o['forwardOriginalToken'], at('forwardOriginalToken')) ?? false,
    outputClaimToHeaders,
  };
}

export function validateRequestAuthentication(spec: unknown, meta: ResourceMeta, warn: Warn = IGNORE_WARNINGS): RequestAuthentication {
  const s = obj(spec ?? {}, 'spec');
  checkFields(s, 'spec', { supported: ['selector', 'jwtRules'], unsupported: ['targetRef', 'targetRefs'] });
  const selector = parseWorkloadSelector(s['selector'], 'spec.selector');
  const jwtRules = s['jwtRules'] === undefined ? [] : list(s['jwtRules'], 'spec.jwtRules').map((r, i) => parseJwtRule(r, item('spec.jwtRules', i), warn));
  return { meta, ...(selector !== undefined ? { selector } : {}), jwtRules };
}
