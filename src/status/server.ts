// The status server (PROXY_STATUS_PORT, 15021): the kubelet's view of the pod.
//   GET /healthz/ready                          200 when the proxy is ready, else 503 with the reason
//   GET /app-health/<container>/<livez|readyz|startupz>
//                                               the app's own probe, run by the agent (MESH_APP_PROBERS):
//                                               200 when it passes, 500 with the failure, 404 if unknown
// Plain HTTP, as Istio's status port. Text bodies end with a newline, as Go's http.Error writes them.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { scope } from '../log/logger.js';
import { listenAll } from '../net/listen.js';
import { parseAppProbers } from './app-probers.js';
import { AppProber } from './probe.js';

const log = scope('healthcheck');

export interface Readiness {
  readonly ready: boolean;
  /** Why not ready, e.g. "listeners not bound: 15001" or "draining". */
  readonly reason?: string;
}

export interface StatusServerOptions {
  /** PROXY_STATUS_PORT; 0 picks a free port (tests). */
  readonly port: number;
  /** Default '::' (every address, both families); 0.0.0.0 where IPv6 is off. */
  readonly host?: string;
  readonly readiness: () => Readiness;
  /** Raw MESH_APP_PROBERS text; '' = no app probes. */
  readonly probers: string;
  readonly env: { instanceIp: string; rewriteLegacyLocalhost: boolean; keepAlive: boolean; http2Probing: boolean };
}

export interface StatusServer {
  readonly port: number;
  close(): Promise<void>;
}

export const READY_PATH = '/healthz/ready';
export const APP_HEALTH_PREFIX = '/app-health/';

function reply(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** Starts the status server; resolves once it listens. */
export async function startStatusServer(options: StatusServerOptions): Promise<StatusServer> {
  const { probes, errors } = parseAppProbers(options.probers);
  for (const message of errors) log.error(message);
  const prober = new AppProber(options.env);
  if (probes.size > 0) {
    log.info(`application probes: ${[...probes.keys()].join(', ')} (destination ${prober.destination})`);
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://status').pathname;
    if (path === READY_PATH) {
      const state = options.readiness();
      if (state.ready) reply(res, 200, '');
      else reply(res, 503, `${state.reason || 'not ready'}\n`);
      return;
    }
    if (path.startsWith(APP_HEALTH_PREFIX)) {
      const probe = probes.get(path);
      if (!probe) {
        reply(res, 404, `no application probe configured for ${path}\n`);
        return;
      }
      const result = await prober.run(probe, req.headers);
      if (!result.ok) log.debug(`${path}: ${result.message}`);
      // Istio answers 500 for a failed probe; the kubelet only looks at the status.
      reply(res, result.ok ? 200 : 500, `${result.message}\n`);
      return;
    }
    reply(res, 404, '404 page not found\n');
  };

  const server = createServer((req, res) => {
    // The request body is not used; drain it so the connection stays usable.
    req.resume();
    handle(req, res).catch((err: unknown) => {
      log.error(`status request ${req.url ?? ''} failed: ${err instanceof Error ? err.message : String(err)}`);
      reply(res, 500, 'internal error\n');
    });
  });
  // A probe can take its whole timeoutSeconds; anything past a minute is a stuck client.
  server.requestTimeout = 60_000;
  server.headersTimeout = 10_000;
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });

  try {
    await listenAll(server, options.port, options.host);
  } catch (err) {
    prober.close();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  log.info(`status server listening on port ${port}`);

  return {
    port,
    close: () => new Promise<void>((resolve, reject) => {
      prober.close();
      server.close((err) => (err ? reject(err) : resolve()));
      server.closeAllConnections();
    }),
  };
}
