import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { renderEnvironmentDoc } from '../../../src/config/env/docs.js';
import { declarations } from '../../../src/config/env/registry.js';
import { repoRoot } from '../../helpers/repo.js';

it('docs/ENVIRONMENT.md is current with the registry (make docs regenerates it)', () => {
  const committed = readFileSync(join(repoRoot, 'docs', 'ENVIRONMENT.md'), 'utf8');
  assert.equal(committed, renderEnvironmentDoc(), 'docs/ENVIRONMENT.md is stale: run `make docs`');
});

it('lists every variable with its type and default', () => {
  const doc = renderEnvironmentDoc();
  for (const v of declarations) assert.ok(doc.includes(`| ${v.name} | ${v.type} |`), v.name);
  assert.ok(doc.includes('| SECRET_TTL | duration | `24h0m0s` |'));
});
