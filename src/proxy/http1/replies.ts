// The answers the HTTP/1.1 path writes itself, as bytes: local replies (a decider's 401/403/404/
// redirect), 400 and friends for a request the parser or the message rules refuse, 503 when the
// upstream fails, 504 on a route timeout. Envoy's texts where an operator would search for them.
import { STATUS_CODES } from 'node:http';
import { detailsWord } from '../../log/access-record.js';
import { scope } from '../../log/logger.js';
import type { LocalReply } from '../decider.js';
import { validHeaderValue, wireText } from './headers.js';

const log = scope('default');

export const UPSTREAM_FAILURE = 'upstream connect error or disconnect/reset before headers. reset reason: ';

/** The answer to a request refused before any decision (malformed, too large, not supported): a downstream protocol error. */
export function refusal(status: number, reason: string): LocalReply {
  return {
    kind: 'reply', status, body: `${STATUS_CODES[status] ?? 'Bad Request'}: ${reason}\n`,
    flag: 'DPE', details: `http1.codec_error{${detailsWord(reason.replace(/"/g, ''))}}`,
  };
}

/** Codes of a connection that never opened (counted as connect failures). */
export function isConnectFailure(code: string | undefined): boolean {
  return code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ETIMEDOUT';
}

/** How an upstream failed a request, as Envoy's reset reasons name it. */
export type UpstreamFailure = 'connection_failure' | 'connection_termination' | 'protocol_error';

/**
 * Envoy's RESPONSE_CODE_DETAILS for an upstream that failed (`after`: part of the response was
 * sent already), with the socket error's code when there is one (ECONNREFUSED, ECONNRESET...).
 */
export function upstreamFailureDetails(failure: UpstreamFailure, code: string | undefined, after: boolean): string {
  const errno = code !== undefined && /^E[A-Z]+$/.test(code) ? `,${code}` : '';
  return `upstream_reset_${after ? 'after' : 'before'}_response_started{${failure}${errno}}`;
}

/** The 503 body naming why the upstream failed (`transport`: why its TLS failed, as Envoy says it). */
export function upstreamFailureBody(err: NodeJS.ErrnoException, transport?: string): string {
  if (transport !== undefined) return `${UPSTREAM_FAILURE}connection failure, transport failure reason: ${transport}\n`;
  return `${UPSTREAM_FAILURE}${err.code === 'ECONNREFUSED' ? 'connection failure' : err.code ?? err.message}\n`;
}

/** A decider that throws answers 500 instead of taking the process down. */
export function decisionFailed(err: Error): LocalReply {
  log.error(`request decision failed: ${err.message}`, { stack: err.stack });
  return { kind: 'reply', status: 500, body: 'internal error deciding this request\n', details: 'decision_failed' };
}

let dateSecond = -1;
let dateText = '';

/** The `Date` header value, made once a second. */
export function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/**
 * A complete response: `content-type: text/plain` unless the reply's headers say otherwise,
 * content-length, `connection: close` when the connection ends after it. No body for HEAD.
 */
export function replyBytes(reply: LocalReply, close: boolean, headOnly: boolean): Buffer {
  const body = Buffer.from(reply.body, 'utf8');
  let head = `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? ''}\r\ndate: ${httpDate()}\r\n`;
  const headers = reply.headers ?? {};
  let typed = false;
  for (const name of Object.keys(headers)) {
    const l = name.toLowerCase();
    if (l === 'content-length' || l === 'connection' || l === 'transfer-encoding' || l === 'date') continue;
    const value = headers[name]!;
    if (!validHeaderValue(value)) continue; // never a CR, LF or NUL on the wire
    if (l === 'content-type') typed = true;
    head += `${name}: ${wireText(value)}\r\n`;
  }
  if (!typed) head += 'content-type: text/plain\r\n';
  head += `content-length: ${body.length}\r\n${close ? 'connection: close\r\n' : ''}\r\n`;
  const headBytes = Buffer.from(head, 'latin1');
  return headOnly || body.length === 0 ? headBytes : Buffer.concat([headBytes, body]);
}
