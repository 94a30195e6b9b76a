// CA_ADDR as `host:port` (or `[v6]:port`), checked at start; apart from the CA client so that the
// check needs none of gRPC (loaded only when a CA is used).
import { AgentError } from '../errors/agent-error.js';

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** Splits `host:port` / `[v6]:port`; the host is what the CA's certificate must name. */
export function parseCaAddress(address: string): HostPort {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(address.trim());
  const port = Number(m?.[3]);
  if (!m || port < 1 || port > 65535) {
    throw new AgentError('ERR_ENV_VALUE', `CA_ADDR=${JSON.stringify(address)} is not host:port (for example istiod.istio-system.svc:15012 or [fd00::1]:15012)`);
  }
  return { host: m[1] ?? m[2]!, port };
}
