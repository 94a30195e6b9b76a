// The two Prometheus endpoints: 15090 serves the proxy's registry; 15020 serves the merge of the
// agent's metrics, the proxy's and, when the pod is annotated, the application's (Istio's merged
// metrics, so one scrape config covers the pod). The merge re-parses every part so the answer is
// always valid Prometheus text: one HELP/TYPE per family, samples of a family together, no series
// twice; a part that fails or does not parse is left out and counted, the answer is still 200.
import { isLoopbackAddress } from '../net/local-addresses.js';
import { listenAll } from '../net/listen.js';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Registry } from './prom.js';
import { AgentError } from '../errors/agent-error.js';
import { scope, type ScopedLogger } from '../log/logger.js';
import { SCRAPE_TYPES, scrapeMetrics, type ScrapeMetrics, type ScrapeType } from './agent-metrics.js';
import { mergeExpositions, parseExposition, renderExposition, type Family } from './exposition.js';

const log = scope('monitoring');

export const METRICS_PATH = '/stats/prometheus';
export const PROMETHEUS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;
/** How long the merged endpoint waits for the application's metrics. */
export const DEFAULT_APP_TIMEOUT_MS = 5_000;
/** An application answer larger than this is a failed part (protects the agent's memory). */
export const MAX_APP_METRICS_BYTES = 32 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Configuration and access decisions. Pure.

/** Where the application's own metrics are (from MESH_METRICS_ANNOTATIONS). */
export interface AppScrapeTarget {
  readonly port: number;
  readonly path: string;
  /** Default `localhost`. */
  readonly host?: string;
}

/**
 * MESH_METRICS_ANNOTATIONS, the injector's copy of the pod's `prometheus.io/*` annotations:
 * `{"scrape":"true","port":"8080","path":"/metrics"}`. Empty → no application metrics;
 * `scrape` other than "true" → none either. Port defaults to 80 and path to /metrics (Istio's).
 * Numbers and booleans are accepted for strings. Anything else is an ERR_ENV_VALUE naming the field.
 */
export function parseMetricsAnnotations(text: string): AppScrapeTarget | undefined {
  const variable = 'MESH_METRICS_ANNOTATIONS';
  if (text.trim() === '') return undefined;
  const bad = (what: string): AgentError => new AgentError('ERR_ENV_VALUE',
    `invalid value for environment variable ${variable}: ${JSON.stringify(text)}: ${what}; `
    + 'expected JSON such as {"scrape":"true","port":"8080","path":"/metrics"}');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw bad(`not JSON (${(err as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad('not a JSON object');
  const fields = parsed as Record<string, unknown>;
  const str = (key: string): string | undefined => {
    const v = fields[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string') return v.trim();
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    throw bad(`"${key}" is not a string`);
  };
  const scrape = str('scrape');
  if (scrape !== undefined && scrape.toLowerCase() !== 'true') return undefined;
  const portText = str('port') || '80';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) throw bad(`"port" ${JSON.stringify(portText)} is not a port (1-65535)`);
  let path = str('path') || '/metrics';
  if (/\s/.test(path)) throw bad(`"path" ${JSON.stringify(path)} contains white space`);
  if (!path.startsWith('/')) path = `/${path}`;
  return { port, path };
}


// ---------------------------------------------------------------------------------------------
// The merged answer.

export interface MergedSources {
  readonly agent: () => Promise<string>;
  readonly proxy: () => Promise<string>;
  /** The application's text and whether it is OpenMetrics; absent when the pod is not annotated. */
  readonly app?: () => Promise<{ text: string; openMetrics: boolean }>;
}

/**
 * One scrape of the merged endpoint: every part is counted in `scrapes_total{type}`; a part that
 * fails or does not parse is left out and counted in `scrape_failures_total{type}`. The agent part
 * is produced last so it already counts this scrape's failures; it is printed first.
 */
export async function mergedMetrics(sources: MergedSources, counters: ScrapeMetrics): Promise<string> {
  const types: ScrapeType[] = sources.app ? ['agent', 'proxy', 'application'] : ['agent', 'proxy'];
  for (const type of types) counters.countScrape(type);
  const attempt = async (type: ScrapeType, get: () => Promise<{ text: string; openMetrics: boolean }>): Promise<Family[]> => {
    try {
      const { text, openMetrics } = await get();
      const families = parseExposition(text, { openMetrics });
      partRecovered(type);
      return families;
    } catch (err) {
      counters.countFailure(type);
      partFailed(type, err);
      return [];
    }
  };
  const [proxy, app] = await Promise.all([
    attempt('proxy', async () => ({ text: await sources.proxy(), openMetrics: false })),
    sources.app ? attempt('application', sources.app) : Promise.resolve([]),
  ]);
  const agent = await attempt('agent', async () => ({ text: await sources.agent(), openMetrics: false }));
  const merged = mergeExpositions([agent, proxy, app]);
  if (merged.conflicts.length > 0 || merged.duplicateSeries > 0) {
    log.debug('merged metrics: left out what clashes with earlier parts', {
      families: merged.conflicts, duplicateSeries: merged.duplicateSeries,
    });
  }
  return renderExposition(merged.families);
}

/** Failures are logged when they start or change, not on every scrape. */
const lastFailure = new Map<ScrapeType, string>();
function partFailed(type: ScrapeType, err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  if (lastFailure.get(type) !== message) log.warn(`merged metrics: the ${type} part failed and is left out: ${message}`);
  else log.debug(`merged metrics: the ${type} part failed again: ${message}`);
  lastFailure.set(type, message);
}
function partRecovered(type: ScrapeType): void {
  if (lastFailure.delete(type)) log.info(`merged metrics: the ${type} part is back`);
}

/** GETs the application's metrics, asking for Prometheus text; non-2xx, time-out or too big fail. */
export function fetchAppMetrics(target: AppScrapeTarget, timeoutMs: number): Promise<{ text: string; openMetrics: boolean }> {
  return new Promise((resolve, reject) => {
    const where = `http://${target.host ?? 'localhost'}:${target.port}${target.path}`;
    const req = request({
      host: target.host ?? 'localhost',
      port: target.port,
      path: target.path,
      headers: { accept: 'text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1', 'accept-encoding': 'gzip' },
      signal: AbortSignal.timeout(timeoutMs),
    }, (res) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        res.resume();
        reject(new Error(`${where} answered ${status}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_APP_METRICS_BYTES) {
          req.destroy(new Error(`${where}: answer larger than ${MAX_APP_METRICS_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', (err) => reject(new Error(`${where}: ${err.message}`)));
      res.on('end', () => {
        try {
          let body = Buffer.concat(chunks);
          if ((res.headers['content-encoding'] ?? '').toLowerCase() === 'gzip') body = process.getBuiltinModule('node:zlib').gunzipSync(body); // rare: loaded when used
          const openMetrics = /application\/openmetrics-text/i.test(res.headers['content-type'] ?? '');
          resolve({ text: body.toString('utf8'), openMetrics });
        } catch (err) {
          reject(new Error(`${where}: ${(err as Error).message}`));
        }
      });
    });
    req.on('error', (err) => reject(new Error(err.name === 'AbortError' || err.name === 'TimeoutError'
      ? `${where}: no answer within ${timeoutMs} ms` : `${where}: ${err.message}`)));
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------
// Servers.

export interface MetricsServer {
  readonly port: number;
  readonly address: string;
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...headers });
  res.end(body);
}

/** The request handling both metric ports share: method, path, localhost-only, errors. */
function metricsHandler(name: string, localhostOnly: boolean, produce: () => Promise<string>): Handler {
  return async (req, res) => {
    req.resume();
    if (localhostOnly && !isLoopbackAddress(req.socket.remoteAddress)) {
      send(res, 403, 'metrics are served to localhost only (METRICS_LOCALHOST_ACCESS_ONLY)\n');
      return;
    }
    const path = (req.url ?? '/').split('?')[0];
    if (path !== METRICS_PATH) {
      send(res, 404, `not found: ${path}; metrics are at ${METRICS_PATH}\n`);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, `${METRICS_PATH} takes GET\n`, { allow: 'GET, HEAD' });
      return;
    }
    try {
      send(res, 200, await produce(), { 'content-type': PROMETHEUS_CONTENT_TYPE });
    } catch (err) {
      log.error(`${name}: cannot produce metrics: ${(err as Error).message}`);
      send(res, 500, `cannot produce metrics: ${(err as Error).message}\n`);
    }
  };
}

/** An HTTP server that answers every request through `handler` and never throws on bad input. */
export function robustServer(handler: Handler, logger: ScopedLogger = log): Server {
  const server = createServer((req, res) => {
    handler(req, res).catch((err: unknown) => {
      logger.error(`unexpected error answering ${req.method ?? '?'} ${req.url ?? '?'}: ${(err as Error).message}`);
      send(res, 500, 'internal error\n');
    });
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });
  return server;
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function serve(name: string, server: Server, port: number, host: string | undefined): Promise<MetricsServer> {
  try {
    await listenAll(server, port, host);
  } catch (err) {
    throw new Error(`${name}: cannot listen on ${host ?? '[::]'}:${port}: ${(err as Error).message}`, { cause: err });
  }
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error(`${name}: no TCP address`);
  log.info(`${name} listening on ${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}${METRICS_PATH}`);
  return { port: address.port, address: address.address, close: () => closeServer(server) };
}

export interface ProxyMetricsServerOptions {
  /** 15090 (PROXY_METRICS_PORT); 0 for any. */
  readonly port: number;
  readonly host?: string;
  readonly registry: Registry;
  /** METRICS_LOCALHOST_ACCESS_ONLY: other peers get 403. */
  readonly localhostOnly: boolean;
}

/** 15090: GET /stats/prometheus is the proxy registry. */
export function startProxyMetricsServer(options: ProxyMetricsServerOptions): Promise<MetricsServer> {
  const server = robustServer(metricsHandler('proxy metrics', options.localhostOnly, () => options.registry.metrics()));
  return serve('proxy metrics', server, options.port, options.host);
}

export interface MergedMetricsServerOptions {
  /** 15020; 0 for any. */
  readonly port: number;
  readonly host?: string;
  /** The agent's registry; scrapes_total and scrape_failures_total are kept on it. */
  readonly agentRegistry: Registry;
  /** The proxy registry's text, in process. */
  readonly proxyMetrics: () => Promise<string>;
  /** From MESH_METRICS_ANNOTATIONS (parseMetricsAnnotations). */
  readonly app?: AppScrapeTarget;
  readonly localhostOnly: boolean;
  /** Default DEFAULT_APP_TIMEOUT_MS. */
  readonly appTimeoutMs?: number;
}

/** 15020: GET /stats/prometheus is agent, proxy and application metrics merged. */
export async function startMergedMetricsServer(options: MergedMetricsServerOptions): Promise<MetricsServer> {
  const counters = scrapeMetrics(options.agentRegistry);
  let app = options.app;
  if (app && app.port === options.port && options.port !== 0 && isLoopbackAddress(app.host ?? '127.0.0.1')) {
    log.warn(`merged metrics: the application metrics port ${app.port} is this server's own; not scraping it`);
    app = undefined;
  }
  // Series start at 0 so rate() works from the first scrape.
  counters.initialise(SCRAPE_TYPES.filter((t) => t !== 'application' || app !== undefined));
  const timeoutMs = options.appTimeoutMs ?? DEFAULT_APP_TIMEOUT_MS;
  const target = app;
  const sources: MergedSources = {
    agent: () => options.agentRegistry.metrics(),
    proxy: options.proxyMetrics,
    ...(target ? { app: () => fetchAppMetrics(target, timeoutMs) } : {}),
  };
  if (target) log.info(`merged metrics include the application's http://${target.host ?? 'localhost'}:${target.port}${target.path}`);
  const server = robustServer(metricsHandler('merged metrics', options.localhostOnly, () => mergedMetrics(sources, counters)));
  return serve('merged metrics', server, options.port, options.host);
}
