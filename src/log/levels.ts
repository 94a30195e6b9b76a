// Log scopes and levels of spec 4.2, and the `<scope>:<level>,...` flag syntax Istio uses.
import { usageError } from '../errors/agent-error.js';

/** The spec's scopes. `all` is not a scope of its own: it addresses every scope at once. */
export const SCOPE_NAMES = [
  'ads', 'ca', 'cache', 'meshcaclient', 'default', 'dns', 'gcecred', 'grpc', 'healthcheck', 'iptables',
  'klog', 'mockcred', 'monitoring', 'sds', 'security', 'spiffe', 'validation', 'wasm', 'xdsproxy',
] as const;
export type ScopeName = (typeof SCOPE_NAMES)[number];
export const ALL_SCOPES = 'all';
export const DEFAULT_SCOPE: ScopeName = 'default';

/** Least to most severe; `none` silences a scope. */
export const LEVELS = ['debug', 'info', 'warn', 'error', 'fatal', 'none'] as const;
export type Level = (typeof LEVELS)[number];

export const DEFAULT_OUTPUT_LEVEL: Level = 'info';
export const DEFAULT_STACKTRACE_LEVEL: Level = 'none';

export function isLevel(text: string): text is Level {
  return (LEVELS as readonly string[]).includes(text);
}

export function isScope(text: string): text is ScopeName {
  return (SCOPE_NAMES as readonly string[]).includes(text);
}

/** True when a message at `level` passes a scope set to `threshold`. */
export function passes(level: Level, threshold: Level): boolean {
  return level !== 'none' && LEVELS.indexOf(level) >= LEVELS.indexOf(threshold);
}

/**
 * Parses `--log_output_level` / `--log_stacktrace_level`: comma-separated `<scope>:<level>`; a bare
 * `<level>` means the `default` scope; `all:<level>` sets every scope and, as in Istio, overrides
 * the other entries. Returns only the scopes the text names.
 */
export function parseScopedLevels(flag: string, text: string): Map<ScopeName, Level> {
  const result = new Map<ScopeName, Level>();
  for (const entry of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const parts = entry.split(':');
    if (parts.length > 2) {
      throw usageError(`${flag}: "${entry}" is not <scope>:<level>`);
    }
    const [scopeText, levelText] = parts.length === 1 ? [DEFAULT_SCOPE, parts[0]!] : [parts[0]!, parts[1]!];
    if (!isLevel(levelText)) {
      throw usageError(`${flag}: unknown level "${levelText}" in "${entry}"; levels are ${LEVELS.join(', ')}`);
    }
    if (scopeText === ALL_SCOPES) {
      return new Map(SCOPE_NAMES.map((s) => [s, levelText]));
    }
    if (!isScope(scopeText)) {
      throw usageError(`${flag}: unknown scope "${scopeText}" in "${entry}"; scopes are ${ALL_SCOPES}, ${SCOPE_NAMES.join(', ')}`);
    }
    result.set(scopeText, levelText);
  }
  return result;
}
