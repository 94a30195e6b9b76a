// A connection carried as TCP to a cluster's endpoint (traffic management), as the sidecar's capture
// listeners and the gateway's TCP / TLS PASSTHROUGH ports both make it.
import type { Socket } from 'node:net';
import type { ClusterTarget } from '../decider.js';
import type { Endpoint as TrafficEndpoint } from '../../traffic/cluster.js';
import { OUTCOME } from '../../traffic/retry.js';
import { setTcpKeepalive } from '../socket-options.js';

/**
 * A TCP connection to a cluster's endpoint: its slot in maxConnections given back when it closes (or
 * sooner, by the function returned: at most once), connectTimeout, tcpKeepalive, and how the connect
 * went told to the cluster (outlier detection).
 */
export function connectionToCluster(s: Socket, r: { readonly target: ClusterTarget; readonly endpoint: TrafficEndpoint }, tls: boolean): () => void {
  const cluster = r.target.cluster;
  const tcp = cluster.spec.policy.connectionPool.tcp;
  let connected = false;
  let held = true;
  const release = (): void => {
    if (!held) return;
    held = false;
    cluster.releaseConnection(r.endpoint);
  };
  s.once('close', release);
  const timer = setTimeout(() => {
    s.destroy(Object.assign(new Error(`upstream connect timeout (${tcp.connectTimeoutMs} ms)`), { code: 'ETIMEDOUT' }));
  }, tcp.connectTimeoutMs);
  s.once(tls ? 'secureConnect' : 'connect', () => {
    connected = true;
    clearTimeout(timer);
    cluster.connectEnded(r.endpoint, OUTCOME.connected);
    if (tcp.tcpKeepalive !== undefined) {
      try {
        setTcpKeepalive(s, tcp.tcpKeepalive);
      } catch { /* the kernel's keep-alive settings stay */ }
    }
  });
  s.once('error', (err: NodeJS.ErrnoException) => {
    clearTimeout(timer);
    if (!connected) cluster.connectEnded(r.endpoint, err.code === 'ETIMEDOUT' ? OUTCOME.connectTimeout : OUTCOME.connectFailure);
  });
  return release;
}


