// Build information: written next to the compiled code by scripts/build-info.mjs at `make build`;
// the Node version and platform are those of the running process.
import { readFileSync } from 'node:fs';

export interface BuildInfo {
  readonly version: string;
  readonly revision: string;
  /** `Clean` or `Modified` (uncommitted changes at build time). */
  readonly status: string;
  readonly buildTime: string;
  readonly nodeVersion: string;
  readonly platform: string;
}

interface Stamp {
  version?: string;
  revision?: string;
  status?: string;
  buildTime?: string;
}

function readStamp(): Stamp {
  try {
    // dist/src/version/build-info.js → dist/build-info.json
    return JSON.parse(readFileSync(new URL('../../build-info.json', import.meta.url), 'utf8')) as Stamp;
  } catch {
    return {};
  }
}

export function buildInfo(): BuildInfo {
  const stamp = readStamp();
  return {
    version: stamp.version ?? '0.0.0-dev',
    revision: stamp.revision ?? 'unknown',
    status: stamp.status ?? 'unknown',
    buildTime: stamp.buildTime ?? 'unknown',
    nodeVersion: process.version,
    platform: `${process.platform}/${process.arch}`,
  };
}
