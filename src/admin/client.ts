// `pilot-agent request`: one HTTP request to a local agent port. Only the agent's own local
// surfaces are reachable this way, so the command cannot be turned into a general HTTP client.
import { request } from 'node:http';
import { AgentError, usageError } from '../errors/agent-error.js';

/** Admin 15000, debug 15004, merged metrics 15020, status 15021. */
export const REQUEST_PORTS: readonly number[] = [15000, 15004, 15020, 15021];

export interface AdminRequest {
  readonly port: number;
  readonly method: string;
  readonly path: string;
  readonly body?: string;
}

export interface AdminResponse {
  readonly status: number;
  readonly statusText: string;
  readonly body: Buffer;
}

/** Checks and normalises a request: allowed port, HTTP method token, path with a leading slash. */
export function prepareAdminRequest(req: AdminRequest): AdminRequest {
  if (!REQUEST_PORTS.includes(req.port)) {
    throw usageError(`--debug-port: port ${req.port} is not allowed; allowed ports are ${REQUEST_PORTS.join(', ')}`);
  }
  const method = req.method.toUpperCase();
  if (!/^[A-Z!#$%&'*+.^_`|~0-9-]+$/.test(method)) {
    throw usageError(`request: "${req.method}" is not an HTTP method`);
  }
  if (/[\s]/.test(req.path)) throw usageError(`request: path "${req.path}" contains white space`);
  const path = req.path.startsWith('/') ? req.path : `/${req.path}`;
  return { ...req, method, path };
}

export function sendAdminRequest(req: AdminRequest): Promise<AdminResponse> {
  return new Promise((resolve, reject) => {
    const outgoing = request({
      host: 'localhost',
      port: req.port,
      method: req.method,
      path: req.path,
      headers: req.body === undefined ? {} : { 'content-length': Buffer.byteLength(req.body) },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({
        status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', body: Buffer.concat(chunks),
      }));
      res.on('error', reject);
    });
    outgoing.on('error', (err) => reject(new AgentError(
      'ERR_REQUEST_FAILED', `cannot reach localhost:${req.port}: ${err.message}`, { cause: err },
    )));
    outgoing.end(req.body);
  });
}
