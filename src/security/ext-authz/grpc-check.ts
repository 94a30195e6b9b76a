// A gRPC authorizer (`envoyExtAuthzGrpc`): the CheckRequest's attribute context made from a
// CheckInput, and a CheckResponse read into a CheckAnswer, as Envoy's ext_authz filter does. Pure.
import { PARTIAL_BODY_HEADER, type CheckAnswer, type CheckInput, type CheckPeer, type UpstreamHeaderEdit } from './check.js';
import type { WireCheckRequest, WireCheckResponse, WireHeaderValueOption, WirePeer } from './grpc-messages.js';

function peer(p: CheckPeer): WirePeer {
  return { address: { socket_address: { address: p.address, port_value: p.port } }, ...(p.principal ? { principal: p.principal } : {}) };
}

/**
 * `now` in ms since the epoch (the request's time). `asBytes`: a held body goes as `raw_body`, else
 * as the text `body` (read as UTF-8: bytes that are not UTF-8 are replaced, as a proto string must be).
 */
export function checkRequest(input: CheckInput, now: number, asBytes = false): WireCheckRequest {
  const headers: Record<string, string> = {};
  // Repeated lines are joined with ',' (Envoy's header map does the same); pseudo-headers as Envoy sends them.
  for (const [n, lines] of input.headers) if (n !== 'host' && n !== PARTIAL_BODY_HEADER) headers[n] = lines.join(',');
  const body = input.body;
  if (body !== undefined) headers[PARTIAL_BODY_HEADER] = body.partial ? 'true' : 'false';
  headers[':authority'] = input.host;
  headers[':method'] = input.method;
  headers[':path'] = input.path;
  headers[':scheme'] = input.scheme;
  const q = input.path.indexOf('?');
  const length = input.headers.get('content-length');
  return {
    attributes: {
      source: peer(input.source),
      destination: peer(input.destination),
      request: {
        time: { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1_000_000 },
        http: {
          method: input.method, headers, path: input.path, host: input.host, scheme: input.scheme, protocol: input.protocol,
          ...(q >= 0 ? { query: input.path.slice(q + 1) } : {}),
          // Envoy's size: the Content-Length when there is one, else -1.
          size: length?.length === 1 && /^[0-9]+$/.test(length[0]!) ? length[0]! : '-1',
          ...(body === undefined ? {} : asBytes ? { raw_body: body.bytes } : { body: body.bytes.toString('utf8') }),
        },
      },
    },
  };
}

/** Envoy's HeaderAppendAction values. */
const ADD_IF_ABSENT = 1;
const OVERWRITE_IF_EXISTS = 3;

function edit(o: WireHeaderValueOption): UpstreamHeaderEdit | undefined {
  const name = o.header?.key?.toLowerCase();
  if (!name) return undefined;
  const value = o.header?.value || (o.header?.raw_value ? o.header.raw_value.toString('utf8') : '');
  // In ext_authz answers `append` defaults to false (replace); when it is unset the append_action says.
  if (o.append?.value === true) return { name, value, action: 'append' };
  if (o.append == null && o.append_action === ADD_IF_ABSENT) return { name, value, action: 'if-absent' };
  if (o.append == null && o.append_action === OVERWRITE_IF_EXISTS) return { name, value, action: 'if-present' };
  return { name, value, action: 'set' };
}

const pairs = (list: readonly WireHeaderValueOption[] | undefined): [string, string][] =>
  (list ?? []).map(edit).filter((e): e is UpstreamHeaderEdit => e !== undefined).map((e) => [e.name, e.value]);

/** gRPC OK (code 0) allows; any other code refuses, with the denied response's status (403 when unset), headers and body. */
export function checkAnswer(res: WireCheckResponse): CheckAnswer {
  if ((res.status?.code ?? 0) === 0) {
    const ok = res.ok_response ?? {};
    return {
      kind: 'allow',
      upstream: (ok.headers ?? []).map(edit).filter((e): e is UpstreamHeaderEdit => e !== undefined),
      remove: (ok.headers_to_remove ?? []).map((n) => n.toLowerCase()),
      downstream: pairs(ok.response_headers_to_add),
    };
  }
  const denied = res.denied_response ?? {};
  const code = denied.status?.code;
  return {
    kind: 'deny', status: code !== undefined && code >= 200 && code <= 599 ? code : 403,
    body: denied.body ?? '', headers: pairs(denied.headers),
  };
}
