// Sends gRPC checks (grpc-check.ts) over one grpc-js channel per authorizer (plaintext HTTP/2).
import * as grpc from '@grpc/grpc-js';
import type { GrpcAuthzProvider } from '../../config/ext-authz-providers.js';
import type { Authorizer, CheckAnswer, CheckInput } from './check.js';
import { checkAnswer, checkRequest } from './grpc-check.js';
import { CHECK_PATH, checkMethod } from './grpc-messages.js';

export function grpcAuthorizer(p: GrpcAuthzProvider, now: () => number = Date.now): Authorizer {
  const target = p.host.includes(':') ? `[${p.host}]:${p.port}` : `${p.host}:${p.port}`;
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  return {
    check: (input: CheckInput, signal: AbortSignal) => new Promise<CheckAnswer>((resolve) => {
      const call = client.makeUnaryRequest(CHECK_PATH, checkMethod.requestSerialize, checkMethod.responseDeserialize, checkRequest(input, now(), p.body?.asBytes === true),
        new grpc.Metadata(), {}, (err, res) => {
          signal.removeEventListener('abort', cancel);
          if (err) resolve({ kind: 'error', reason: `${target}: ${err.details || err.message}` });
          else if (!res) resolve({ kind: 'error', reason: `${target}: no answer` });
          else resolve(checkAnswer(res));
        });
      function cancel(): void { call.cancel(); }
      signal.addEventListener('abort', cancel, { once: true });
    }),
    close: () => client.close(),
  };
}
