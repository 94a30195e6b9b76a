// The `wait --url` value. The spec's default is `https://:15021/healthz/ready`: an empty host means
// the local agent, and the local agent's status port may answer HTTPS or plain HTTP (README "wait").
import { usageError } from '../errors/agent-error.js';

export const DEFAULT_READY_URL = 'https://:15021/healthz/ready';

export interface ReadyTarget {
  readonly url: URL;
  /** The URL named no host (or a loopback one): the pod's own agent. */
  readonly local: boolean;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

export function parseReadyUrl(text: string): ReadyTarget {
  // WHATWG URL rejects `https://:15021/...`, so fill in the host the empty one stands for.
  const filled = text.replace(/^([a-z][a-z0-9+.-]*:\/\/)(?=[:/]|$)/i, '$1localhost');
  let url: URL;
  try {
    url = new URL(filled);
  } catch {
    throw usageError(`--url: "${text}" is not a URL such as ${DEFAULT_READY_URL} or http://localhost:15021/healthz/ready`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw usageError(`--url: "${text}" must use http or https`);
  }
  return { url, local: LOOPBACK_HOSTS.has(url.hostname) || url.hostname.startsWith('127.') };
}
