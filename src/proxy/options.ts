// The typed, validated options of `pilot-agent proxy` (spec 4.5).
import { usageError } from '../errors/agent-error.js';

export type ProxyType = 'sidecar' | 'router';
export const PROXY_TYPES: readonly ProxyType[] = ['sidecar', 'router'];

/** Envoy's log levels, which `--proxyLogLevel` takes (and `warn` as Envoy's alias of `warning`). */
export const PROXY_LOG_LEVELS = ['trace', 'debug', 'info', 'warning', 'warn', 'error', 'critical', 'off'] as const;
export type ProxyLogLevel = (typeof PROXY_LOG_LEVELS)[number];

export interface ProxyLogLevels {
  /** Level of every component not named below. */
  readonly level: ProxyLogLevel;
  /** Per-component levels (`misc:error,upstream:debug`). */
  readonly components: ReadonlyMap<string, ProxyLogLevel>;
}

/** `--serviceCluster`'s default (Istio's istio-proxy, renamed). */
export const DEFAULT_SERVICE_CLUSTER = 'mesh-proxy';

export interface ProxyOptions {
  readonly type: ProxyType;
  /** Workers sharing the listeners; 0 means MESH_CPU_LIMIT or the number of cores. */
  readonly concurrency: number;
  readonly domain: string;
  readonly meshConfigPath: string;
  readonly outlierLogPath: string;
  readonly profiling: boolean;
  readonly logLevels: ProxyLogLevels;
  /** The node's cluster (/server_info, /config_dump): the mesh config's serviceCluster, else the flag. */
  readonly serviceCluster: string;
  readonly stsPort: number;
  readonly templateFile: string;
  readonly tokenManagerPlugin: string;
}

const isProxyLogLevel = (text: string): text is ProxyLogLevel =>
  (PROXY_LOG_LEVELS as readonly string[]).includes(text);

/** Parses `level[,component:level...]`, Envoy's `--log-level` plus `--component-log-level` in one. */
export function parseProxyLogLevel(flag: string, text: string): ProxyLogLevels {
  let level: ProxyLogLevel | undefined;
  const components = new Map<string, ProxyLogLevel>();
  for (const entry of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const [name, value, ...rest] = entry.split(':');
    const levelText = value ?? name!;
    if (rest.length > 0 || !isProxyLogLevel(levelText) || (value !== undefined && !/^[a-z_0-9]+$/.test(name!))) {
      throw usageError(`${flag}: "${entry}" is not <level> or <component>:<level>; levels are ${PROXY_LOG_LEVELS.join(', ')}`);
    }
    if (value === undefined) level = levelText;
    else components.set(name!, levelText);
  }
  return { level: level ?? 'warning', components };
}

export function parseProxyType(text: string | undefined): ProxyType {
  const type = PROXY_TYPES.find((t) => t === (text ?? 'sidecar'));
  if (!type) throw usageError(`proxy: unknown proxy type "${text}"; use ${PROXY_TYPES.join(' or ')}`);
  return type;
}
