// What every command gets from main: the environment read once, and where to write.
import type { Environment } from '../config/env/registry.js';

export interface Output {
  write(chunk: string | Uint8Array): unknown;
}

export interface CliContext {
  readonly env: Environment;
  readonly stdout: Output;
  readonly stderr: Output;
  /** Reads a file of the machine (/etc/passwd for the proxy uid); injectable for tests. */
  readonly readFile: (path: string) => string | undefined;
}
