// Sends HTTP checks (http-check.ts) over node:http, connections kept alive per authorizer.
import { Agent, request } from 'node:http';
import type { HttpAuthzProvider } from '../../config/ext-authz-providers.js';
import type { Authorizer, CheckAnswer, CheckInput } from './check.js';
import { httpAnswer, httpCheckRequest, MAX_DENIED_BODY } from './http-check.js';

export function httpAuthorizer(p: HttpAuthzProvider): Authorizer {
  const agent = new Agent({ keepAlive: true, maxFreeSockets: 16 });
  return {
    check: (input: CheckInput, signal: AbortSignal) => new Promise<CheckAnswer>((resolve) => {
      const c = httpCheckRequest(p, input);
      const headers: string[] = [];
      for (const [n, v] of c.headers) headers.push(n, v);
      let settled = false;
      const done = (a: CheckAnswer): void => {
        if (settled) return;
        settled = true;
        resolve(a);
      };
      const req = request({ host: p.host, port: p.port, method: c.method, path: c.path, headers, agent, signal, setHost: false }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          if (size < MAX_DENIED_BODY) chunks.push(chunk.subarray(0, MAX_DENIED_BODY - size));
          size += chunk.length;
        });
        res.on('end', () => done(httpAnswer(p, res.statusCode ?? 0, res.rawHeaders, Buffer.concat(chunks).toString('utf8'))));
        res.on('error', (err) => done({ kind: 'error', reason: `the authorizer's answer broke off: ${err.message}` }));
      });
      req.on('error', (err) => done({ kind: 'error', reason: `${p.host}:${p.port}: ${err.message}` }));
      req.end(c.body);
    }),
    close: () => agent.destroy(),
  };
}
