// The access log (mesh config `accessLogFile`, `accessLogEncoding`): one line per request with the
// decisions that shaped its answer, so `kubectl logs` alone tells why a request got 401, 403 or 404.
// Lines are batched and written once per event-loop turn: one write per burst, not per request.
import { createWriteStream, type WriteStream } from 'node:fs';
import type { Decision } from '../gateway/decisions.js';

export type AccessLogEncoding = 'TEXT' | 'JSON';

/** Envoy's response flags for the outcomes an operator looks for first. */
function responseFlag(d: Decision): string {
  if (d.authz.startsWith('denied') && d.status !== 401) return 'RBAC'; // a refused TCP connection has no status
  if (d.status === undefined) return 'DC';
  if (d.route?.startsWith('no ')) return 'NR';
  if (d.jwt.startsWith('invalid')) return 'UAEX';
  if (d.status === 504) return 'UT';
  if (d.status === 503 && d.upstream) return 'UF';
  return '-';
}

const q = (s: string | undefined): string => (s === undefined ? '-' : JSON.stringify(s));

export function formatText(d: Decision): string {
  return `[${d.time}] "${d.method} ${d.path}" ${d.status ?? 0} ${responseFlag(d)} ${Math.round(d.durationMs)}ms `
    + `authority=${q(d.authority)} upstream=${d.upstream ?? '-'} listener=${d.listener} `
    + `jwt=${q(d.jwt)} principal=${q(d.principal)} authz=${q(d.authz)} route=${q(d.route)}\n`;
}

export function formatJson(d: Decision): string {
  return `${JSON.stringify({ ...d, response_flags: responseFlag(d), durationMs: Math.round(d.durationMs * 1000) / 1000 })}\n`;
}

export class AccessLog {
  private pending = '';
  private scheduled = false;
  private readonly out: NodeJS.WritableStream;
  private readonly format: (d: Decision) => string;

  constructor(path: string, encoding: AccessLogEncoding) {
    const file: WriteStream | undefined = path === '/dev/stdout' || path === '/dev/stderr' ? undefined : createWriteStream(path, { flags: 'a' });
    this.out = file ?? (path === '/dev/stdout' ? process.stdout : process.stderr);
    this.out.on('error', () => undefined);
    this.format = encoding === 'JSON' ? formatJson : formatText;
  }

  write(d: Decision): void {
    this.pending += this.format(d);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.scheduled = false;
    if (this.pending === '') return;
    this.out.write(this.pending);
    this.pending = '';
  }
}
