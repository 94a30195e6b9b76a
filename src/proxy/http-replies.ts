// The answers the fast HTTP/1.1 path writes itself, as bytes: local replies (a decider's 401/403/
// 404/redirect), 400 for a malformed request, 503 when the upstream fails, 504 on a route timeout.
// Texts are those of the node:http path (http-handler.ts), so clients see one proxy.
import { STATUS_CODES } from 'node:http';
import { scope } from '../log/logger.js';
import type { LocalReply } from './http-handler.js';
import { validHeaderValue } from './http-headers.js';

const log = scope('default');

export const UPSTREAM_FAILURE = 'upstream connect error or disconnect/reset before headers. reset reason: ';

export const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n';

/** Codes of a connection that never opened (counted as connect failures). */
export function isConnectFailure(code: string | undefined): boolean {
  return code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ETIMEDOUT';
}

/** The 503 body naming why the upstream failed. */
export function upstreamFailureBody(err: NodeJS.ErrnoException): string {
  return `${UPSTREAM_FAILURE}${err.code === 'ECONNREFUSED' ? 'connection failure' : err.code ?? err.message}\n`;
}

/** A decider that throws answers 500 instead of taking the process down. */
export function decisionFailed(err: Error): LocalReply {
  log.error(`request decision failed: ${err.message}`, { stack: err.stack });
  return { kind: 'reply', status: 500, body: 'internal error deciding this request\n' };
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
    if (!validHeaderValue(value)) continue; // node:http would refuse it too
    if (l === 'content-type') typed = true;
    head += `${name}: ${value}\r\n`;
  }
  if (!typed) head += 'content-type: text/plain\r\n';
  head += `content-length: ${body.length}\r\n${close ? 'connection: close\r\n' : ''}\r\n`;
  const headBytes = Buffer.from(head, 'latin1');
  return headOnly || body.length === 0 ? headBytes : Buffer.concat([headBytes, body]);
}
