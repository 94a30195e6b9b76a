// The external authorizers of the mesh config, by provider name: one client each, made on first
// use; every check bounded by the provider's time-out and ended early when the client leaves.
import type { ExtAuthzProvider } from '../../config/ext-authz-providers.js';
import type { Authorizer, CheckAnswer, CheckInput } from './check.js';
import { grpcAuthorizer } from './grpc-client.js';
import { httpAuthorizer } from './http-client.js';

export class Authorizers {
  private readonly byName = new Map<string, ExtAuthzProvider>();
  private readonly clients = new Map<string, Authorizer>();

  constructor(providers: readonly ExtAuthzProvider[], private readonly make: (p: ExtAuthzProvider) => Authorizer = defaultClient) {
    for (const p of providers) this.byName.set(p.name, p);
  }

  provider(name: string): ExtAuthzProvider | undefined {
    return this.byName.get(name);
  }

  /** Asks provider `name`; `gone` aborts the check (the client left). Never rejects. */
  check(p: ExtAuthzProvider, input: CheckInput, gone?: AbortSignal): Promise<CheckAnswer> {
    let client = this.clients.get(p.name);
    if (!client) this.clients.set(p.name, (client = this.make(p)));
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), p.timeoutMs);
    const signal = gone ? AbortSignal.any([timeout.signal, gone]) : timeout.signal;
    return client.check(input, signal).then((answer) => {
      clearTimeout(timer);
      if (timeout.signal.aborted) return { kind: 'error', reason: `no answer within ${p.timeoutMs}ms (timeout)` };
      return answer;
    }, (err: Error) => {
      clearTimeout(timer);
      return { kind: 'error', reason: err.message };
    });
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

function defaultClient(p: ExtAuthzProvider): Authorizer {
  return p.kind === 'http' ? httpAuthorizer(p) : grpcAuthorizer(p);
}
