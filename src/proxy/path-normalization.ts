// The request path as policy, routing and the application all see it (Istio's mesh config
// `pathNormalization.normalization`). An application resolves `/public/../admin`, `/%61dmin` and
// `\admin` to `/admin`; a policy that matched the raw text would judge another path than the one
// served. So the path is normalized once, before any decision, and the normalized path is what
// goes upstream. The steps follow Istio's "Authorization Policy Normalization" table:
//   NONE                      nothing (but %00 is still refused)
//   BASE (default)            %-decoding of unreserved characters (ALPHA DIGIT - . _ ~), once;
//                             `\` → `/`; `.` and `..` segments resolved (RFC 3986 5.2.4)
//   MERGE_SLASHES             BASE, then `//` → `/`
//   DECODE_AND_MERGE_SLASHES  %2F and %5C decoded first, then MERGE_SLASHES
// Beyond Istio (a path that cannot mean anything else to a server): an invalid %-escape and a dot
// segment carrying parameters (`..;x`, which Tomcat reads as `..`) are refused. Pure.

import type { PathNormalization } from '../config/mesh-config.js';

export { DEFAULT_PATH_NORMALIZATION, type PathNormalization } from '../config/mesh-config.js';

const HEX = '0123456789ABCDEF';

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

/** ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986 2.3). */
function unreserved(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a) || c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e;
}

/** Decodes the escapes of unreserved characters (and of `/` and `\` with `slashes`) once; undefined for a bad escape. */
function decode(path: string, slashes: boolean): string | undefined {
  let out = '';
  let from = 0;
  for (let i = path.indexOf('%'); i >= 0; i = path.indexOf('%', i + 1)) {
    const h = hexValue(path.charCodeAt(i + 1));
    const l = hexValue(path.charCodeAt(i + 2));
    if (h < 0 || l < 0) return undefined;
    const c = h * 16 + l;
    if (unreserved(c) || (slashes && (c === 0x2f || c === 0x5c))) {
      out += path.slice(from, i) + String.fromCharCode(c);
    } else { // kept encoded, in the canonical upper-case form
      out += `${path.slice(from, i)}%${HEX[h]}${HEX[l]}`;
    }
    from = i + 3;
    i += 2;
  }
  return from === 0 ? path : out + path.slice(from);
}

/** RFC 3986 5.2.4 on a path that starts with `/`; undefined for a dot segment with parameters. */
function removeDotSegments(path: string): string | undefined {
  const segments = path.split('/');
  const out: string[] = [];
  const last = segments.length - 1;
  for (let i = 1; i <= last; i++) {
    const s = segments[i]!;
    if (s === '.' || s === '..') {
      if (s === '..') out.pop();
      if (i === last) out.push('');
    } else if (s.startsWith('.;') || s.startsWith('..;')) {
      return undefined;
    } else {
      out.push(s);
    }
  }
  return `/${out.join('/')}`;
}

/**
 * The normalized form of an origin-form path (no query, no fragment), or undefined when it cannot
 * be normalized (the request is answered 400): `%00`, a bad escape, `..;`.
 */
export function normalizePath(path: string, mode: PathNormalization): string | undefined {
  const percent = path.indexOf('%');
  if (percent >= 0 && /%00/.test(path)) return undefined;
  if (mode === 'NONE') return path;
  const merge = mode !== 'BASE';
  // The common case: nothing to do (one scan per test, no allocation).
  if (percent < 0 && !path.includes('\\') && !path.includes('/.') && !(merge && path.includes('//'))) return path;
  let p = percent < 0 ? path : decode(path, mode === 'DECODE_AND_MERGE_SLASHES');
  if (p === undefined) return undefined;
  if (p.includes('\\')) p = p.replaceAll('\\', '/');
  if (!p.startsWith('/')) return undefined;
  const resolved = removeDotSegments(p);
  if (resolved === undefined) return undefined;
  return merge ? resolved.replace(/\/{2,}/g, '/') : resolved;
}
