// The table of Istio's "Authorization Policy Normalization" page, case by case, per option.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PathNormalization } from '../../src/config/mesh-config.js';
import { normalizePath } from '../../src/proxy/path-normalization.js';

const cases: [string, Partial<Record<PathNormalization, string | undefined>>][] = [
  // path, then the result per option (undefined: refused, 400)
  ['/plain/path', { NONE: '/plain/path', BASE: '/plain/path', MERGE_SLASHES: '/plain/path', DECODE_AND_MERGE_SLASHES: '/plain/path' }],
  ['/public/../admin', { NONE: '/public/../admin', BASE: '/admin', MERGE_SLASHES: '/admin' }],
  ['/./admin', { BASE: '/admin' }],
  ['/%61dmin', { NONE: '/%61dmin', BASE: '/admin' }],
  ['/%41%5A%30%39%2d%2E%5f%7E', { BASE: '/AZ09-._~' }],
  ['/public/%2e%2e/admin', { BASE: '/admin' }],
  ['/public/%2E%2E/%2e/admin', { BASE: '/admin' }],
  ['/%252e%252e/admin', { BASE: '/%252e%252e/admin' }], // decoded once, never twice
  ['/a\\b\\..\\c', { NONE: '/a\\b\\..\\c', BASE: '/a/c' }],
  ['/a//b///c', { BASE: '/a//b///c', MERGE_SLASHES: '/a/b/c' }],
  ['/a%2Fb%5cc', { BASE: '/a%2Fb%5Cc', MERGE_SLASHES: '/a%2Fb%5Cc', DECODE_AND_MERGE_SLASHES: '/a/b/c' }],
  ['/a%2f%2f..%2fb', { DECODE_AND_MERGE_SLASHES: '/a/b' }], // `..` takes the empty segment (RFC 3986), then slashes merge
  ['/a/b/..', { BASE: '/a/' }],
  ['/..', { BASE: '/' }],
  ['/../../x', { BASE: '/x' }],
  ['/a/./', { BASE: '/a/' }],
  ['/.well-known/x', { BASE: '/.well-known/x' }],
  ['/a..b/c.', { BASE: '/a..b/c.' }],
  ['/a%20b', { BASE: '/a%20b' }], // a space stays encoded
  ['/%00', { NONE: undefined, BASE: undefined, DECODE_AND_MERGE_SLASHES: undefined }],
  ['/a%zzb', { NONE: '/a%zzb', BASE: undefined }],
  ['/a%2', { BASE: undefined }],
  ['/public/..;/admin', { NONE: '/public/..;/admin', BASE: undefined }],
  ['/public/.;x/admin', { BASE: undefined }],
  ['/admin;jsessionid=1', { BASE: '/admin;jsessionid=1' }],
];

describe('normalizePath', () => {
  for (const [path, want] of cases) {
    for (const [mode, result] of Object.entries(want) as [PathNormalization, string | undefined][]) {
      it(`${mode} ${JSON.stringify(path)} → ${result === undefined ? 'refused' : JSON.stringify(result)}`, () => {
        assert.equal(normalizePath(path, mode), result);
      });
    }
  }

  it('is idempotent: a normalized path normalizes to itself', () => {
    for (const [path] of cases) {
      for (const mode of ['BASE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'] as const) {
        const once = normalizePath(path, mode);
        if (once !== undefined && !/%2[fF]|%5[cC]/.test(path)) assert.equal(normalizePath(once, mode), once, `${mode} ${path}`);
      }
    }
  });
});
