// Where the repository is, from a compiled test file (dist/test/...) or a source one.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(start: string): string {
  let dir = start;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${start}`);
    dir = parent;
  }
  return dir;
}

export const repoRoot = findRoot(dirname(fileURLToPath(import.meta.url)));
/** The pilot-agent under test; PILOT_AGENT_BIN points the end-to-end tests at another build (an older one, to show a test fails there). */
export const binPath = process.env['PILOT_AGENT_BIN'] ?? join(repoRoot, 'bin', 'pilot-agent');
