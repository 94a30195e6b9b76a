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

/** dist/build-info.json, from dist/src/version/build-info.js or from a chunk of the bundle in dist/bundle/. */
const STAMP_PATHS = ['../../build-info.json', '../build-info.json'];

function readStamp(): Stamp {
  for (const path of STAMP_PATHS) {
    try {
      return JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as Stamp;
    } catch { /* the next place */ }
  }
  return {};
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
