// The child-process side of --run-validation (see validation.ts), started with a JSON argument:
//   validate {options}  runs the whole check here (e.g. inside `ip netns exec NAME`), prints one
//                       JSON line {ok, result} or {ok: false, code, message}; exit 0, or 126 on failure;
//   connect {host,port,token,localAddress?}  connects (from localAddress) and sends the token (run as
//                       the proxy's uid/gid); exit 0 once sent.
import { connect } from 'node:net';
import { AgentError } from '../errors/agent-error.js';
import { validateRedirect, type ValidationOptions } from './validation.js';

async function main(mode: string | undefined, json: string | undefined): Promise<number> {
  if (mode === 'connect') {
    const { host, port, token, localAddress } = JSON.parse(json ?? '{}') as { host: string; port: number; token: string; localAddress?: string };
    await new Promise<void>((resolve, reject) => {
      const s = connect({ host, port, ...(localAddress ? { localAddress } : {}) });
      s.on('error', reject);
      s.on('connect', () => s.end(`${token}\n`, () => resolve()));
    });
    return 0;
  }
  if (mode === 'validate') {
    try {
      const result = await validateRedirect(JSON.parse(json ?? '{}') as ValidationOptions);
      process.stdout.write(`${JSON.stringify({ ok: true, result })}\n`);
      return 0;
    } catch (err) {
      const e = err instanceof AgentError ? err : new AgentError('ERR_IPTABLES_VALIDATION', String(err));
      process.stdout.write(`${JSON.stringify({ ok: false, code: e.code, message: e.message })}\n`);
      return e.exitCode;
    }
  }
  process.stderr.write('usage: validation-child.js validate|connect JSON\n');
  return 2;
}

main(process.argv[2], process.argv[3]).then((code) => { process.exitCode = code; }, (err: NodeJS.ErrnoException) => {
  process.stderr.write(`${err.code ?? ''} ${err.message}\n`);
  process.exitCode = 1;
});
