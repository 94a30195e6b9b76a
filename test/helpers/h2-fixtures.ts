// The HTTP/2 end-to-end fixtures as the tests use them: where test/fixtures/h2-apps.mjs and
// h2-clients.mjs are, what a gRPC call asks and answers, and the grpc-js client run inside a
// namespace (one channel, the calls in order).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { Namespace } from './pod-netns.js';
import { repoRoot } from './repo.js';

export const H2_APPS = join(repoRoot, 'test', 'fixtures', 'h2-apps.mjs');
export const H2_CLIENTS = join(repoRoot, 'test', 'fixtures', 'h2-clients.mjs');

/** One call of test.Echo (test/fixtures/echo.proto). */
export interface GrpcCall {
  readonly method: 'Ping' | 'Stream' | 'Fail' | 'Admin';
  readonly text?: string;
  readonly count?: number;
  /** A message of that many bytes as `data`. */
  readonly bytes?: number;
  /** Sent as `authorization: Bearer <token>`. */
  readonly token?: string;
}

/** One call's outcome as h2-clients.mjs prints it. */
export interface GrpcResult {
  readonly code: number;
  readonly details: string;
  readonly texts: string[];
  readonly bytes: number;
  readonly intact: boolean;
  readonly ms: number;
}

/** The h2-clients.mjs arguments of gRPC calls to `target` (`host:port`), over TLS when `tls` is given. */
export function grpcArgs(target: string, calls: readonly GrpcCall[], tls?: { ca: string; serverName: string }): string[] {
  return [H2_CLIENTS, 'grpc', target, JSON.stringify(calls), ...(tls ? [JSON.stringify(tls)] : [])];
}

/** The calls' outcomes from h2-clients.mjs's output (it must have exited 0). */
export function grpcResults(exitCode: number | null, stdout: string, stderr: string): GrpcResult[] {
  assert.equal(exitCode, 0, `${stdout}${stderr}`);
  return JSON.parse(stdout) as GrpcResult[];
}

/** gRPC calls over one grpc-js channel (one connection) from inside `ns`, waiting for them. */
export function grpcCallsIn(ns: Pick<Namespace, 'exec'>, target: string, calls: readonly GrpcCall[]): GrpcResult[] {
  const r = ns.exec(process.execPath, grpcArgs(target, calls), { allowFailure: true });
  return grpcResults(r.exitCode, r.stdout, r.stderr);
}
