// The four forms of an HTTP/1.1 request-target (RFC 9112 3.2) and the authority rules. A proxy
// that judged `GET http://g/admin HTTP/1.1` by its raw text would miss the `/admin` every server
// routes it to: as Envoy does, an absolute URI becomes path and authority before any policy or
// route sees it, its authority replaces Host (RFC 9112 3.2.2), and the application gets
// origin-form. The fragment (`#...`), which a client must not send, is cut off before anything
// matches. Pure.

export type TargetForm = 'origin' | 'absolute' | 'authority' | 'asterisk';

export interface RequestTarget {
  readonly form: TargetForm;
  /** The path without query and fragment (`*` for asterisk-form, '' for authority-form). */
  readonly path: string;
  /** `?...`, or ''. */
  readonly query: string;
  /** The target's own authority (absolute-form, authority-form). */
  readonly authority?: string;
}

// host = IP-literal / IPv4address / reg-name, then an optional port (RFC 3986 3.2.2).
const AUTHORITY = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;

/** A Host value or target authority the grammar allows (no `/`, `@`, space, quote...). */
export function validAuthority(authority: string): boolean {
  return AUTHORITY.test(authority);
}

/** Splits `rest` (what follows the authority) into path and query, without the fragment. */
function pathAndQuery(rest: string): { path: string; query: string } {
  const hash = rest.indexOf('#');
  const noFragment = hash < 0 ? rest : rest.slice(0, hash);
  const q = noFragment.indexOf('?');
  return q < 0 ? { path: noFragment, query: '' } : { path: noFragment.slice(0, q), query: noFragment.slice(q) };
}

/** The target's form and parts, or the reason it is not a valid target for `method`. */
export function parseTarget(method: string, target: string): RequestTarget | string {
  if (method === 'CONNECT') {
    // authority-form only: host and port.
    const colon = target.lastIndexOf(':');
    if (colon <= 0 || colon === target.length - 1 || !validAuthority(target) || target.startsWith(':')) return 'CONNECT needs host:port';
    return { form: 'authority', path: '', query: '', authority: target };
  }
  if (target.charCodeAt(0) === 0x2f /* / */) return { form: 'origin', ...pathAndQuery(target) };
  if (target === '*') return method === 'OPTIONS' ? { form: 'asterisk', path: '*', query: '' } : '`*` is a target for OPTIONS only';
  const scheme = SCHEME.exec(target);
  if (!scheme) return 'not an origin-form path or an absolute URI';
  const name = scheme[1]!.toLowerCase();
  if (name !== 'http' && name !== 'https') return `scheme ${JSON.stringify(scheme[1])} is not http or https`;
  const rest = target.slice(scheme[0].length);
  let end = rest.search(/[/?#]/);
  if (end < 0) end = rest.length;
  const authority = rest.slice(0, end);
  if (authority.includes('@')) return 'userinfo in the target';
  if (authority === '' || authority.startsWith(':') || !validAuthority(authority)) return 'authority of the target';
  const { path, query } = pathAndQuery(rest.slice(end));
  return { form: 'absolute', path: path === '' ? '/' : path, query, authority };
}
