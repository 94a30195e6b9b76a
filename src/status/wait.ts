// `pilot-agent wait`: poll the readiness URL until it answers 200 or the time is up.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentError } from '../errors/agent-error.js';
import type { ReadyTarget } from './ready-url.js';

export interface WaitOptions {
  readonly target: ReadyTarget;
  readonly periodMs: number;
  readonly requestTimeoutMs: number;
  readonly timeoutMs: number;
  /** Told about each failed attempt (debug logging). */
  readonly onAttempt?: (error: string) => void;
  readonly now?: () => number;
}

/** TLS handshake failures that mean "this port speaks plain HTTP". */
const PLAINTEXT_PEER = /^(ERR_SSL_|EPROTO$)/;

class AttemptError extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
  }
}

function attempt(url: URL, local: boolean, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const secure = url.protocol === 'https:';
    const options = {
      method: 'GET',
      signal: AbortSignal.timeout(timeoutMs),
      // The local agent's certificate is self-signed; readiness of the own pod is not a secret.
      ...(secure && local ? { rejectUnauthorized: false } : {}),
    };
    const onResponse = (res: IncomingMessage): void => {
      if (res.statusCode === 200) {
        res.resume();
        resolve();
        return;
      }
      // The status server says why it is not ready ("draining", "listeners not bound: ...").
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { if (body.length < 512) body += chunk; });
      res.on('end', () => {
        const reason = body.trim().split('\n')[0]?.slice(0, 200) ?? '';
        reject(new AttemptError(`HTTP status code ${res.statusCode}${reason ? `: ${reason}` : ''}`));
      });
      res.on('error', () => reject(new AttemptError(`HTTP status code ${res.statusCode}`)));
    };
    const req = secure ? httpsRequest(url, options, onResponse) : httpRequest(url, options, onResponse);
    req.on('error', (err: NodeJS.ErrnoException) => {
      const message = err.name === 'AbortError' || err.name === 'TimeoutError'
        ? `no response within ${timeoutMs}ms` : err.message;
      reject(new AttemptError(message, err.code));
    });
    req.end();
  });
}

/**
 * Resolves when the URL answers 200; rejects with ERR_WAIT_TIMEOUT and the last error otherwise.
 * At least one attempt is made, so `--timeoutSeconds 0` means "check once".
 */
export async function waitForReady(opts: WaitOptions): Promise<void> {
  const now = opts.now ?? Date.now;
  const start = now();
  let url = opts.target.url;
  let lastError = '';
  for (;;) {
    try {
      await attempt(url, opts.target.local, opts.requestTimeoutMs);
      return;
    } catch (err) {
      const failure = err as AttemptError;
      if (opts.target.local && url.protocol === 'https:' && PLAINTEXT_PEER.test(failure.code ?? '')) {
        // The local status port answered in plain HTTP: speak that from now on.
        url = new URL(url.href.replace(/^https:/, 'http:'));
        continue;
      }
      lastError = failure.message;
      opts.onAttempt?.(lastError);
    }
    const remaining = opts.timeoutMs - (now() - start);
    if (remaining <= 0) break;
    await sleep(Math.min(opts.periodMs, remaining));
  }
  throw new AgentError('ERR_WAIT_TIMEOUT',
    `timeout waiting for the proxy to become ready at ${url.href}. Last error: ${lastError}`);
}
