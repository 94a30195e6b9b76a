// A network namespace of the test's own, so tests can bind the agent's fixed ports (15000, 15021...)
// without touching the host. Everything started in it is ended by PID and the namespace deleted.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { repoRoot } from './repo.js';
import { runCli, type CliResult, type RunOptions } from './run-cli.js';

export interface Netns {
  readonly name: string;
  readonly prefix: readonly string[];
  runCli(args: readonly string[], opts?: Omit<RunOptions, 'prefix'>): Promise<CliResult>;
  /** Starts test/fixtures/http-server.mjs in the namespace and waits until it listens. */
  startServer(args: readonly string[]): Promise<ChildProcess>;
  close(): void;
}

function ip(...args: string[]): boolean {
  return spawnSync('ip', args, { stdio: 'ignore' }).status === 0;
}

/** A fresh namespace with loopback up, or undefined where namespaces cannot be made (not root). */
export function createNetns(): Netns | undefined {
  const name = `pa-test-${randomBytes(4).toString('hex')}`;
  if (!ip('netns', 'add', name)) return undefined;
  ip('-n', name, 'link', 'set', 'lo', 'up');
  const prefix = ['ip', 'netns', 'exec', name];
  const children: ChildProcess[] = [];
  return {
    name,
    prefix,
    runCli: (args, opts = {}) => runCli(args, { ...opts, prefix }),
    startServer(args) {
      const child = spawn('ip', ['netns', 'exec', name, process.execPath,
        join(repoRoot, 'test', 'fixtures', 'http-server.mjs'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(child);
      return new Promise((resolve, reject) => {
        child.once('error', reject);
        child.once('exit', (code) => reject(new Error(`fixture server exited with ${code}`)));
        child.stdout!.setEncoding('utf8').once('data', (line: string) => {
          if (line.startsWith('listening')) resolve(child);
          else reject(new Error(`fixture server said: ${line}`));
        });
      });
    },
    close() {
      for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
      ip('netns', 'del', name);
    },
  };
}
