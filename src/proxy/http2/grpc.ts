// gRPC as the proxy sees it: which requests are gRPC, the status a call ended with, and the answer
// the proxy gives a gRPC client itself. A gRPC client reads the outcome from `grpc-status`, not
// from the HTTP status, so a local answer (403 from policy, 503 from a failed upstream) is sent as
// gRPC does it: `:status 200` and a trailers-only response carrying the status (as Envoy does).
// Pure.

/** gRPC status codes by number (the canonical names; snake case as Envoy's SNAKE_STRING prints them). */
export const GRPC_STATUS_NAMES: readonly string[] = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS',
  'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED',
  'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED',
];

export const GRPC = {
  OK: 0, CANCELLED: 1, UNKNOWN: 2, DEADLINE_EXCEEDED: 4, PERMISSION_DENIED: 7, UNIMPLEMENTED: 12, INTERNAL: 13,
  UNAVAILABLE: 14, UNAUTHENTICATED: 16,
} as const;

/** Whether a request is a gRPC call (its content-type is `application/grpc` or `application/grpc+proto`...). */
export function isGrpc(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.length >= 16 && contentType.slice(0, 16).toLowerCase() === 'application/grpc'
    && (contentType.length === 16 || contentType[16] === '+' || contentType[16] === ';');
}

/** The status a `grpc-status` value names; undefined when it is absent or not a number. */
export function grpcStatusOf(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || !/^\d{1,3}$/.test(text)) return undefined;
  return Number(text);
}

/** The gRPC status an HTTP status stands for (gRPC's own mapping: doc/http-grpc-status-mapping.md). */
export function grpcStatusForHttp(status: number): number {
  switch (status) {
    case 200: return GRPC.OK;
    case 400: return GRPC.INTERNAL;
    case 401: return GRPC.UNAUTHENTICATED;
    case 403: return GRPC.PERMISSION_DENIED;
    case 404: return GRPC.UNIMPLEMENTED;
    case 429: case 502: case 503: case 504: return GRPC.UNAVAILABLE;
    default: return GRPC.UNKNOWN;
  }
}

/** The HTTP status a gRPC status stands for, for a client that is not gRPC (Envoy's grpcToHttpStatus). */
export function httpStatusForGrpc(code: number): number {
  switch (code) {
    case 0: return 200;
    case 1: return 499;
    case 3: case 9: case 11: return 400;
    case 4: return 504;
    case 5: return 404;
    case 12: return 501;
    case 6: case 10: return 409;
    case 7: return 403;
    case 8: return 429;
    case 14: return 503;
    case 16: return 401;
    default: return 500;
  }
}

/** `grpc-message` as the gRPC spec encodes it: percent-encoding for every byte outside printable ASCII and `%`. */
export function grpcMessage(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text.trim(), 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Envoy's GRPC_STATUS operator: CAMEL_STRING (default), SNAKE_STRING or NUMBER. */
export function grpcStatusText(status: number, form: 'CAMEL_STRING' | 'SNAKE_STRING' | 'NUMBER' = 'CAMEL_STRING'): string {
  if (form === 'NUMBER') return String(status);
  const snake = GRPC_STATUS_NAMES[status];
  if (snake === undefined) return String(status);
  if (form === 'SNAKE_STRING') return snake;
  if (status === 0) return 'OK';
  if (status === GRPC.CANCELLED) return 'Canceled';
  return snake.split('_').map((w) => w[0] + w.slice(1).toLowerCase()).join('');
}
