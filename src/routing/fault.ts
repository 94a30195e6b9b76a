// Fault injection as Envoy's fault filter does it, the pure part: whether this request is delayed,
// whether it is aborted, and the local answer an abort gives. A share is per million (Envoy's
// FractionalPercent); each request rolls on its own (`random` is passed in: seeded in tests).
// The delay itself (a timer) is the engine side's: src/proxy/fault-delay.ts.
import type { HttpFault } from '../config/resources/types.js';
import { grpcMessage, httpStatusForGrpc } from '../proxy/http2/grpc.js';

/** Envoy's RESPONSE_CODE_DETAILS and body for an injected abort. */
export const FAULT_ABORT_DETAILS = 'fault_filter_abort';
const FAULT_ABORT_BODY = 'fault filter abort';

/** True for a share `perMillion` of the calls: 0 never, 1 000 000 always. */
export function rolls(perMillion: number, random: () => number): boolean {
  return perMillion >= 1_000_000 || (perMillion > 0 && Math.floor(random() * 1_000_000) < perMillion);
}

/** The delay this request gets (ms), or 0. */
export function faultDelayMs(fault: HttpFault, random: () => number): number {
  const d = fault.delay;
  return d !== undefined && rolls(d.perMillion, random) ? d.fixedDelayMs : 0;
}

/** What an aborted request is answered: status, body, headers (a gRPC call gets a trailers-only answer). */
export interface FaultAbortReply {
  readonly status: number;
  readonly body: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly grpcStatus?: number;
}

/**
 * The answer when this request is aborted, else undefined. `grpc`: the request is a gRPC call. A
 * grpcStatus abort answers a gRPC call with `:status 200` and that grpc-status (trailers-only, as
 * Envoy does), any other request with the HTTP status gRPC maps the code to; an httpStatus abort
 * answers a gRPC call with the gRPC status that HTTP status maps to (the engine's gRPC reply).
 */
export function faultAbort(fault: HttpFault, grpc: boolean, random: () => number): FaultAbortReply | undefined {
  const a = fault.abort;
  if (a === undefined || !rolls(a.perMillion, random)) return undefined;
  if (a.grpcStatus === undefined) return { status: a.httpStatus!, body: FAULT_ABORT_BODY };
  if (!grpc) return { status: httpStatusForGrpc(a.grpcStatus), body: FAULT_ABORT_BODY };
  return {
    status: 200, body: '', grpcStatus: a.grpcStatus,
    headers: { 'content-type': 'application/grpc', 'grpc-status': String(a.grpcStatus), 'grpc-message': grpcMessage(FAULT_ABORT_BODY) },
  };
}
