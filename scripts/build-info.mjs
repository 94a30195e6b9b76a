#!/usr/bin/env node
// Stamps dist/build-info.json with the version, git revision and build time (read by `version`).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';

const git = (...args) => {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
};
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
// BUILD_REVISION / BUILD_STATUS stand in where there is no .git (docker build).
const revision = process.env.BUILD_REVISION || git('rev-parse', 'HEAD');
const stamp = {
  version: pkg.version,
  revision: revision || 'unknown',
  status: process.env.BUILD_STATUS
    || (revision === '' ? 'unknown' : git('status', '--porcelain') === '' ? 'Clean' : 'Modified'),
  buildTime: process.env.SOURCE_DATE_EPOCH
    ? new Date(Number(process.env.SOURCE_DATE_EPOCH) * 1000).toISOString()
    : new Date().toISOString(),
};
mkdirSync(new URL('../dist/', import.meta.url), { recursive: true });
writeFileSync(new URL('../dist/build-info.json', import.meta.url), `${JSON.stringify(stamp, null, 2)}\n`);
