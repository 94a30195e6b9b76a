// Golden files: expected outputs kept in the SOURCE tree (test/**/testdata), compared exactly.
// Run the tests with UPDATE_GOLDEN=1 to (re)write them from the actual output, then review the diff.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { repoRoot } from './repo.js';

/**
 * Asserts that `actual` equals the golden file at `relPath`, a path under the source `test/`
 * directory (e.g. `cli/completion/testdata/bash.golden`), never under dist/.
 */
export function assertGolden(relPath: string, actual: string): void {
  const file = join(repoRoot, 'test', relPath);
  if (process.env['UPDATE_GOLDEN'] === '1') {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, actual);
    return;
  }
  assert.ok(existsSync(file), `golden file ${file} is missing: run the tests with UPDATE_GOLDEN=1`);
  assert.equal(actual, readFileSync(file, 'utf8'), `output differs from ${file} (UPDATE_GOLDEN=1 rewrites it)`);
}
