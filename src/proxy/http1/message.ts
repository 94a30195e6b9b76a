// From a parsed request head to the request the proxy judges and forwards, and back to bytes. The
// rule that keeps policy honest: what the decider sees (method, url, authority, headers) is exactly
// what the upstream receives, and the framing lines are the proxy's own, stating the bytes it sends.
// - target: absolute-form becomes origin-form, its authority replacing Host; the path is normalized
//   (path-normalization.ts) once, and that path is both judged and forwarded;
// - Host: exactly one valid line (none allowed only with an absolute URI or HTTP/1.0);
// - hop-by-hop lines and the ones `Connection` names are not forwarded, but `Connection` can never
//   take away the framing or Host: Content-Length, Transfer-Encoding and Host are written by the
//   proxy from what it parsed;
// - Upgrade passes only with `Connection: upgrade` on HTTP/1.1, never for h2c (answered as
//   HTTP/1.1, as Envoy does) nor on a request with content; Expect must be `100-continue` (else 417).
// Pure.
import { normalizePath, type PathNormalization } from '../path-normalization.js';
import { cgiName, isHopByHop, isProxyOwned, lookalike, wireText, type HeaderEdits } from './headers.js';
import type { BodyFraming, RequestHead } from './request-parser.js';
import { parseTarget, validAuthority } from './target.js';

export interface RequestMessage {
  readonly method: string;
  /** What is judged and forwarded: the normalized path and the query, `*`, or CONNECT's host:port. */
  readonly url: string;
  /** The request's authority: the absolute URI's, else Host ('' when HTTP/1.0 sent none). */
  readonly authority: string;
  readonly minor: 0 | 1;
  /** Forwarded header lines (name, value...): Host first as received (value = authority), hop-by-hop ones out. */
  readonly headers: string[];
  readonly framing: BodyFraming;
  readonly contentLength: number;
  /** The client lets the connection carry another request after this one. */
  readonly keepAlive: boolean;
  /** A protocol switch the proxy passes on: the Upgrade value, or CONNECT. */
  readonly tunnel?: { readonly kind: 'upgrade'; readonly protocols: string } | { readonly kind: 'connect' };
  /** `Expect: 100-continue` on HTTP/1.1. */
  readonly expectContinue: boolean;
}

export interface MessageError {
  readonly status: 400 | 417;
  readonly reason: string;
}

export interface MessageOptions {
  readonly normalization: PathNormalization;
}

const bad = (reason: string): MessageError => ({ status: 400, reason });

/**
 * Content on an Upgrade request: some servers (node:http) take those bytes as the first ones of the
 * new protocol, others as the body, so such an upgrade is not passed on: the request goes plain.
 */
function hasBody(head: RequestHead): boolean {
  return head.framing === 'chunked' || head.contentLength > 0;
}

/** The request `head` stands for, or why it is refused. */
export function requestMessage(head: RequestHead, o: MessageOptions): RequestMessage | MessageError {
  const { method, rawHeaders: raw, minor } = head;
  const target = parseTarget(method, head.target);
  if (typeof target === 'string') return bad(`request target: ${target}`);
  let hostAt = -1;
  let hosts = 0;
  let connection: string[] | undefined;
  let upgrade: string | undefined;
  let expect: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (lookalike(name)) return bad(`header ${JSON.stringify(name)} (an underscore spelling of a framing header)`);
    switch (name.length) {
      case 4: if (name.toLowerCase() === 'host') { hosts++; hostAt = i; } break;
      case 6: if (name.toLowerCase() === 'expect') expect = expect === undefined ? raw[i + 1]! : `${expect}, ${raw[i + 1]!}`; break;
      case 7: if (name.toLowerCase() === 'upgrade') upgrade = upgrade === undefined ? raw[i + 1]! : `${upgrade}, ${raw[i + 1]!}`; break;
      case 10:
        if (name.toLowerCase() === 'connection') {
          for (const t of raw[i + 1]!.split(',')) {
            const token = t.trim().toLowerCase();
            if (token !== '') (connection ??= []).push(token);
          }
        }
        break;
      default: break;
    }
  }
  if (hosts > 1) return bad('Host repeated');
  const host = hostAt >= 0 ? raw[hostAt + 1]! : undefined;
  if (host !== undefined && !validAuthority(host)) return bad('Host');
  if (host === undefined && minor === 1 && target.form !== 'absolute') return bad('no Host');
  const authority = target.authority ?? host ?? '';

  let url: string;
  if (target.form === 'origin' || target.form === 'absolute') {
    const path = normalizePath(target.path, o.normalization);
    if (path === undefined) return bad(`path ${JSON.stringify(target.path)} cannot be normalized`);
    url = path + target.query;
  } else {
    url = target.form === 'asterisk' ? '*' : authority;
  }

  let tunnel: RequestMessage['tunnel'];
  if (method === 'CONNECT') {
    if (head.framing === 'chunked' || head.contentLength > 0) return bad('CONNECT with a body');
    tunnel = { kind: 'connect' };
  } else if (minor === 1 && upgrade !== undefined && connection?.includes('upgrade') && !/(^|[\s,])h2c(\s*(,|$))/i.test(upgrade)
    && !hasBody(head)) {
    tunnel = { kind: 'upgrade', protocols: upgrade };
  }
  let expectContinue = false;
  if (expect !== undefined && minor === 1) { // HTTP/1.0 clients cannot expect anything: ignored
    if (expect.trim().toLowerCase() !== '100-continue') return { status: 417, reason: `Expect ${JSON.stringify(expect)}` };
    expectContinue = true;
  }

  // Names `Connection` lists beyond its own words: hop-by-hop for this request, unless the proxy owns them.
  let named: Set<string> | undefined;
  if (connection) {
    for (const token of connection) {
      if (token !== 'close' && token !== 'keep-alive' && token !== 'upgrade' && token !== 'host' && !isProxyOwned(token)) (named ??= new Set()).add(token);
    }
  }
  const headers: string[] = [];
  if (hostAt < 0 && authority !== '') headers.push('host', authority);
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (i === hostAt) {
      headers.push(name, authority);
      continue;
    }
    if (isHopByHop(name)) continue;
    const l = name.length;
    if ((l === 14 || l === 6 || l === 4) && isProxyOwned(name.toLowerCase())) continue; // content-length, expect
    if (named?.has(name.toLowerCase())) continue;
    headers.push(name, raw[i + 1]!);
  }
  return {
    method, url, authority, minor, headers, framing: tunnel?.kind === 'connect' ? 'none' : head.framing, contentLength: head.contentLength,
    keepAlive: minor === 1 && !connection?.includes('close'),
    ...(tunnel ? { tunnel } : {}), expectContinue,
  };
}

export function isMessageError(m: RequestMessage | MessageError): m is MessageError {
  return (m as MessageError).reason !== undefined;
}

/** A ForwardTarget's changes: header edits and a new request target. */
export interface UpstreamEdits extends HeaderEdits {
  readonly path?: string;
}

/**
 * The head sent upstream: request line, the forwarded lines with the decider's edits (a `host`
 * edit replaces the authority; edits of proxy-owned names are ignored; set values go out as
 * UTF-8), then the proxy's own lines: framing, the protocol switch, Expect when it is passed on.
 * A name removed or set is removed in its underscore spelling too: a header the mesh asserts
 * (`x-jwt-sub`, `x-forwarded-for`) must not survive as `x_jwt_sub` for a server that maps `_` to `-`.
 */
export function upstreamHead(m: RequestMessage, edits: UpstreamEdits | undefined, forwardExpect: boolean): string {
  let text = `${m.method} ${edits?.path ?? m.url} HTTP/1.${m.minor}\r\n`;
  const remove = edits?.removeHeaders;
  const set = edits?.setHeaders;
  const edited = (remove !== undefined && remove.length > 0) || (set !== undefined && set.length > 0);
  const raw = m.headers;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (edited) {
      const l = cgiName(name);
      if (remove?.includes(l)) continue;
      if (set?.some(([n]) => n.toLowerCase() === l)) continue;
    }
    text += `${name}: ${raw[i + 1]!}\r\n`;
  }
  if (set) for (const [n, v] of set) if (!isProxyOwned(n.toLowerCase())) text += `${n}: ${wireText(v)}\r\n`;
  const add = edits?.addHeaders;
  if (add) for (const [n, v] of add) if (!isProxyOwned(n.toLowerCase())) text += `${n}: ${wireText(v)}\r\n`;
  if (m.framing === 'chunked') text += 'transfer-encoding: chunked\r\n';
  else if (m.framing === 'length') text += `content-length: ${m.contentLength}\r\n`;
  if (m.tunnel?.kind === 'upgrade') text += `connection: upgrade\r\nupgrade: ${m.tunnel.protocols}\r\n`;
  if (m.expectContinue && forwardExpect) text += 'expect: 100-continue\r\n';
  return `${text}\r\n`;
}
