// DNS_PROXY_ADDR: where the DNS proxy listens. Pure.
import { isIP } from 'node:net'; // isIP is a pure function: the same parser the sockets use
import { AgentError } from '../errors/agent-error.js';

/** The port the iptables DNS capture redirects to (`--redirect-dns`). */
export const DNS_CAPTURE_PORT = 15053;

export interface ProxyAddress {
  /** As written: `localhost`, an IP address, or '' for every address. */
  readonly host: string;
  readonly port: number;
}

/** `localhost:15053`, `127.0.0.1:53`, `[::1]:15053`, `:53`. */
export function parseProxyAddress(text: string, variable = 'DNS_PROXY_ADDR'): ProxyAddress {
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(text.trim());
  const host = m ? (m[1] ?? m[2] ?? '') : '';
  const port = m ? Number(m[3]) : NaN;
  const hostOk = host === '' || host === 'localhost' || isIP(host) !== 0;
  if (!m || !hostOk || !(port >= 0 && port <= 65535) || (m[1] !== undefined && isIP(host) !== 6)) {
    throw new AgentError('ERR_ENV_VALUE', `${variable}=${JSON.stringify(text)} is not an address to listen on; `
      + 'expected HOST:PORT with HOST localhost, an IP address ([...] for IPv6) or empty for every address, e.g. localhost:15053 or :53');
  }
  return { host, port };
}

/**
 * The addresses to bind. `localhost` is both loopbacks, where the capture rules send DNS (REDIRECT
 * of a local packet goes to 127.0.0.1 and ::1). An empty host, `0.0.0.0` or `::` is every address of
 * the pod, each bound on its own: a UDP answer must leave from the address the query came to, and a
 * wildcard socket would let the kernel pick another one.
 */
export function listenHosts(host: string, localAddresses: readonly string[]): string[] {
  if (host === 'localhost') return ['127.0.0.1', '::1'];
  if (host === '' || host === '0.0.0.0' || host === '::') {
    const family = host === '0.0.0.0' ? 4 : undefined;
    const all = localAddresses.filter((a) => isIP(a) !== 0 && (family === undefined || isIP(a) === family) && !/^fe[89ab]/i.test(a));
    return [...new Set(all)];
  }
  return [host];
}
