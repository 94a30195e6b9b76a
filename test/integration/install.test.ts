// `npm install -g .` gives a working `pilot-agent` (package.json bin + engines), into a prefix of
// the test's own so the machine's global packages are left alone.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { promisify } from 'node:util';
import { repoRoot } from '../helpers/repo.js';

const run = promisify(execFile);
const prefix = mkdtempSync(join(tmpdir(), 'pa-install-'));
after(() => rmSync(prefix, { recursive: true, force: true }));

it('npm install -g . puts a runnable pilot-agent on the PATH', async () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    version: string; bin: Record<string, string>; engines: Record<string, string>;
  };
  assert.equal(pkg.bin['pilot-agent'], 'bin/pilot-agent');
  assert.match(pkg.engines['node']!, />=\s*20/);
  await run('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', repoRoot]);
  const { stdout } = await run(join(prefix, 'bin', 'pilot-agent'), ['version']);
  assert.equal(stdout, `${pkg.version}\n`);
});
