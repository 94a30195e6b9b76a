import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AccessLogFormatError, compileAccessLogFormat, DEFAULT_JSON_FORMAT, EMPTY_OPERATORS, FILLED_OPERATORS, ISTIO_TEXT_FORMAT,
} from '../../src/log/access-format.js';
import { connectionRecord, FLAG, type AccessRecord, type DecisionNote } from '../../src/log/access-record.js';

const START = Date.UTC(2026, 10, 21, 10, 0, 0, 123) + 0.5;

/** An outbound request to 10.0.0.1:8080 that the upstream answered 200; a case is a tweak of it. */
const HTTP: AccessRecord = {
  kind: 'http', role: 'outbound', startMs: START, durationMs: 12.9, method: 'GET', path: '/api?q=1', originalPath: undefined,
  protocol: 'HTTP/1.1', status: 200, flags: 0, details: 'via_upstream', terminationDetails: undefined,
  bytesReceived: 5, bytesSent: 42, upstreamServiceMs: 10.7, responseMs: 11.2, attempts: 1,
  requestHeaders: { raw: ['Host', 'shop:8080', 'User-Agent', 'curl/8', 'X-Request-Id', 'abc', 'Accept', 'a', 'accept', 'b'] },
  responseHeaders: ['content-type', 'text/plain'],
  upstreamHost: '10.0.0.1:8080', upstreamCluster: 'PassthroughCluster', upstreamLocal: '10.0.0.2:40000',
  downstreamLocal: '10.0.0.1:8080', downstreamRemote: '10.0.0.2:39999', serverName: undefined, routeName: 'allow_any', decision: undefined,
};
const rec = (tweak: Partial<AccessRecord>): AccessRecord => ({ ...HTTP, ...tweak });

const DECISION: DecisionNote = {
  jwt: 'absent', authz: 'allowed: no policies', route: 'no route: no rule of mesh-system/app matched', flag: 'NR', details: 'route_not_found',
};

const text = (format: string | undefined, r: AccessRecord = HTTP): string => compileAccessLogFormat('TEXT', format).format(r);
const json = (format: string | undefined, r: AccessRecord = HTTP): Record<string, unknown> =>
  JSON.parse(compileAccessLogFormat('JSON', format).format(r)) as Record<string, unknown>;

describe('the default TEXT format', () => {
  it('is Istio\'s EnvoyTextLogFormat, filled from the record', () => {
    assert.equal(text(undefined), '[2026-11-21T10:00:00.123Z] "GET /api?q=1 HTTP/1.1" 200 - via_upstream - "-" 5 42 12 10 "-" "curl/8" "abc" '
      + '"shop:8080" "10.0.0.1:8080" PassthroughCluster 10.0.0.2:40000 10.0.0.1:8080 10.0.0.2:39999 - allow_any\n');
    assert.equal(compileAccessLogFormat('TEXT', '').format(HTTP), text(undefined), "'' is the default too");
  });

  it('ends with the decision fields when a decision was taken (and only then)', () => {
    const line = text(undefined, rec({
      role: 'gateway', status: 404, flags: FLAG.NR, details: 'route_not_found', decision: DECISION, routeName: undefined,
      upstreamHost: undefined, upstreamCluster: undefined, upstreamLocal: undefined, upstreamServiceMs: undefined,
    }));
    assert.match(line, / 404 NR route_not_found - "-" 5 42 12 - /);
    assert.ok(line.endsWith(' - - jwt="absent" principal=- authz="allowed: no policies" route="no route: no rule of mesh-system/app matched"\n'), line);
  });

  it('prints a connection as Envoy\'s TCP proxy does: "- - -", code 0, bytes both ways, its duration', () => {
    const tcp = connectionRecord({
      role: 'inbound', startMs: START, durationMs: 1500.2, flags: FLAG.UF, terminationDetails: 'ECONNREFUSED', bytesReceived: 5, bytesSent: 0,
      upstreamHost: '10.0.0.2:9081', upstreamCluster: 'InboundPassthroughCluster', downstreamLocal: '10.0.0.2:9081', downstreamRemote: '10.0.0.9:5000',
    });
    assert.equal(text(undefined, tcp), '[2026-11-21T10:00:00.123Z] "- - -" 0 UF - ECONNREFUSED "-" 5 0 1500 - "-" "-" "-" "-" '
      + '"10.0.0.2:9081" InboundPassthroughCluster - 10.0.0.2:9081 10.0.0.9:5000 - -\n');
  });

  it('ends with grpc_status=<CAMEL_STRING> for a gRPC call (before the decision fields), and only then', () => {
    const grpc = rec({ protocol: 'HTTP/2', grpcStatus: 14 });
    const line = text(undefined, grpc);
    assert.ok(line.endsWith(' 10.0.0.2:39999 - allow_any grpc_status=Unavailable\n'), line);
    assert.ok(line.includes('"GET /api?q=1 HTTP/2" 200 '), line);
    assert.ok(text(undefined, rec({ grpcStatus: 0 })).endsWith(' allow_any grpc_status=OK\n'));
    assert.ok(text(undefined, rec({ grpcStatus: 1 })).endsWith(' allow_any grpc_status=Canceled\n'));
    assert.ok(!text(undefined, rec({ grpcStatus: undefined })).includes('grpc_status'));
    const both = text(undefined, rec({ grpcStatus: 7, status: 200, decision: { jwt: 'valid', principal: 'i/s', authz: 'denied: by DENY policy ns/p rule 0' } }));
    assert.ok(both.endsWith(' allow_any grpc_status=PermissionDenied jwt="valid" principal="i/s" authz="denied: by DENY policy ns/p rule 0" route=-\n'), both);
  });

  it('a custom TEXT format gets no grpc_status suffix (only the default does)', () => {
    assert.equal(text('%RESPONSE_CODE%', rec({ grpcStatus: 14 })), '200\n');
  });

  it('is exactly Istio\'s string', () => {
    assert.ok(ISTIO_TEXT_FORMAT.startsWith('[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% '));
    assert.ok(ISTIO_TEXT_FORMAT.endsWith('%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n'));
  });
});

describe('command operators (TEXT)', () => {
  const cases: [string, string, Partial<AccessRecord>, string][] = [
    ['method, path, protocol', '%REQ(:METHOD)% %REQ(:PATH)% %PROTOCOL%', {}, 'GET /api?q=1 HTTP/1.1'],
    ['a header, case-insensitive', '%REQ(user-agent)%', {}, 'curl/8'],
    ['repeated lines joined with a comma', '%REQ(ACCEPT)%', {}, 'a,b'],
    ['absent: -', '%REQ(X-FORWARDED-FOR)%', {}, '-'],
    ['X?Y falls back to Y', '%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%', {}, '/api?q=1'],
    ['X?Y takes X when there', '%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%', { path: '/v2/api', originalPath: '/api' }, '/api'],
    ['max length', '%REQ(USER-AGENT):4%', {}, 'curl'],
    ['without the query', '%REQ_WITHOUT_QUERY(:PATH)%', {}, '/api'],
    ['the headers as forwarded: set wins', '%REQ(:AUTHORITY)% %REQ(X-FORWARDED-FOR)%',
      { requestHeaders: { raw: ['Host', 'shop'], set: [['host', 'rewritten'], ['x-forwarded-for', '1.2.3.4']] } }, 'rewritten 1.2.3.4'],
    ['the headers as forwarded: removed is absent', '%REQ(AUTHORIZATION)%',
      { requestHeaders: { raw: ['Authorization', 'Bearer x'], remove: ['authorization'] } }, '-'],
    ['scheme', '%REQ(:SCHEME)%', {}, 'http'],
    ['a response header', '%RESP(CONTENT-TYPE)%', {}, 'text/plain'],
    ['the upstream service time (not a header here)', '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%', {}, '10'],
    ['trailers are not relayed', '%TRAILER(GRPC-STATUS)%', {}, '-'],
    ['status, bytes, duration (ms, truncated)', '%RESPONSE_CODE% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESPONSE_DURATION%', {}, '200 5 42 12 11'],
    ['no answer: code 0', '%RESPONSE_CODE% %RESPONSE_FLAGS%', { status: 0, flags: FLAG.DC }, '0 DC'],
    ['flags in Envoy\'s order, comma-separated', '%RESPONSE_FLAGS%', { flags: FLAG.DPE | FLAG.UF | FLAG.UH }, 'UH,UF,DPE'],
    ['long flag names', '%RESPONSE_FLAGS_LONG%', { flags: FLAG.UF | FLAG.RBAC }, 'UpstreamConnectionFailure,RbacAccessDenied'],
    ['details', '%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%', {}, 'via_upstream -'],
    ['addresses and ports', '%UPSTREAM_HOST% %UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT% %UPSTREAM_LOCAL_PORT% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_REMOTE_PORT% %DOWNSTREAM_LOCAL_PORT%',
      {}, '10.0.0.1:8080 10.0.0.2 40000 10.0.0.2 39999 8080'],
    ['IPv6 addresses without port lose their brackets', '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_REMOTE_ADDRESS%',
      { downstreamRemote: '[2001:db8::1]:5000' }, '2001:db8::1 [2001:db8::1]:5000'],
    ['cluster (raw too), route, SNI, attempts', '%UPSTREAM_CLUSTER% %UPSTREAM_CLUSTER_RAW% %ROUTE_NAME% %REQUESTED_SERVER_NAME% %UPSTREAM_REQUEST_ATTEMPT_COUNT%',
      { serverName: 'shop.example', attempts: 2 }, 'PassthroughCluster PassthroughCluster allow_any shop.example 2'],
    ['what has no value here', '%UPSTREAM_TRANSPORT_FAILURE_REASON% %GRPC_STATUS% %DYNAMIC_METADATA(istio.mixer:status)% %DOWNSTREAM_PEER_URI_SAN%', {}, '- - - -'],
    ['the decision, whole and by field', '%MESH_DECISION% | %MESH_DECISION(AUTHZ)% | %MESH_DECISION(jwt)% | %MESH_DECISION(PRINCIPAL)%',
      { decision: { jwt: 'valid', principal: 'iss/sub', authz: 'allowed: by x' } },
      'jwt="valid" principal="iss/sub" authz="allowed: by x" route=- | allowed: by x | valid | iss/sub'],
    ['no decision', '%MESH_DECISION% %MESH_DECISION(ROUTE)%', {}, '- -'],
    ['START_TIME, Envoy\'s default', '%START_TIME%', {}, '2026-11-21T10:00:00.123Z'],
    ['START_TIME, strftime', '%START_TIME(%Y/%m/%d %H:%M:%S.%3f %z %s)%', {}, '2026/11/21 10:00:00.123 +0000 1795255200'],
    ['START_TIME, fractions', '%START_TIME(%6f|%f|%E3S|%Ez|%T|%F|%j|%b %a %e|%y|%Z|%%)%', {}, '123500|123500000|00.123|+00:00|10:00:00|2026-11-21|325|Nov Sat 21|26|UTC|%'],
    ['literal text around operators', 'code=%RESPONSE_CODE%; "%REQ(:METHOD)%"', {}, 'code=200; "GET"'],
  ];
  for (const [name, format, tweak, expected] of cases) {
    it(name, () => assert.equal(text(format, rec(tweak)), `${expected}\n`));
  }

  describe('GRPC_STATUS', () => {
    const grpcCases: [string, string, number | undefined, string][] = [
      ['no argument: CAMEL_STRING', '%GRPC_STATUS%', 7, 'PermissionDenied'],
      ['CAMEL_STRING', '%GRPC_STATUS(CAMEL_STRING)%', 4, 'DeadlineExceeded'],
      ['CAMEL_STRING of OK and CANCELLED (Envoy spells it Canceled)', '%GRPC_STATUS% %GRPC_STATUS(CAMEL_STRING)%', 1, 'Canceled Canceled'],
      ['NUMBER', '%GRPC_STATUS(NUMBER)%', 7, '7'],
      ['NUMBER of OK is 0, not -', '%GRPC_STATUS(NUMBER)% %GRPC_STATUS%', 0, '0 OK'],
      ['SNAKE_STRING', '%GRPC_STATUS(SNAKE_STRING)%', 16, 'UNAUTHENTICATED'],
      ['GRPC_STATUS_NUMBER', '%GRPC_STATUS_NUMBER%', 14, '14'],
      ['GRPC_STATUS_NUMBER of OK', '%GRPC_STATUS_NUMBER%', 0, '0'],
      ['a status without a name: its number', '%GRPC_STATUS% %GRPC_STATUS(SNAKE_STRING)% %GRPC_STATUS_NUMBER%', 42, '42 42 42'],
      ['not a gRPC call: -', '%GRPC_STATUS% %GRPC_STATUS(NUMBER)% %GRPC_STATUS(SNAKE_STRING)% %GRPC_STATUS_NUMBER%', undefined, '- - - -'],
    ];
    for (const [name, format, grpcStatus, expected] of grpcCases) {
      it(name, () => assert.equal(text(format, rec({ grpcStatus })), `${expected}\n`));
    }

    it('in JSON: the forms as strings, GRPC_STATUS_NUMBER as a number, null when absent; the default\'s grpc_status', () => {
      const format = '{"camel": "%GRPC_STATUS%", "snake": "%GRPC_STATUS(SNAKE_STRING)%", "num": "%GRPC_STATUS(NUMBER)%", "n": "%GRPC_STATUS_NUMBER%"}';
      assert.deepEqual(json(format, rec({ grpcStatus: 7 })), { camel: 'PermissionDenied', snake: 'PERMISSION_DENIED', num: '7', n: 7 });
      assert.deepEqual(json(format), { camel: null, snake: null, num: null, n: null });
      assert.equal(json(undefined, rec({ grpcStatus: 14 }))['grpc_status'], 'Unavailable');
      assert.equal(json(undefined)['grpc_status'], null);
    });
  });

  it('HOSTNAME is the one given', () => {
    assert.equal(compileAccessLogFormat('TEXT', '%HOSTNAME%', { hostname: 'pod-1' }).format(HTTP), 'pod-1\n');
    assert.equal(text('%HOSTNAME%'), '-\n');
  });

  it('adds the newline a format lacks (one line per record), keeps the one it has', () => {
    assert.equal(text('%RESPONSE_CODE%'), '200\n');
    assert.equal(text('%RESPONSE_CODE%\n'), '200\n');
  });

  it('lists the response headers the format reads (the engine keeps only those)', () => {
    assert.deepEqual(compileAccessLogFormat('TEXT', '%RESP(Content-Type?X-Other)% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%').responseHeaders, ['content-type', 'x-other']);
    assert.deepEqual(compileAccessLogFormat('TEXT', undefined).responseHeaders, []);
  });

  it('knows every operator it lists, filled or not', () => {
    for (const op of [...FILLED_OPERATORS, ...EMPTY_OPERATORS]) {
      const arg = ['REQ', 'REQ_WITHOUT_QUERY', 'RESP', 'TRAILER', 'DYNAMIC_METADATA', 'CLUSTER_METADATA', 'UPSTREAM_METADATA', 'FILTER_STATE', 'UPSTREAM_FILTER_STATE'].includes(op) ? '(X)' : '';
      assert.doesNotThrow(() => compileAccessLogFormat('TEXT', `%${op}${arg}%`), op);
    }
    for (const op of EMPTY_OPERATORS) {
      const arg = op.endsWith('METADATA') || op.endsWith('FILTER_STATE') ? '(X)' : '';
      assert.equal(text(`%${op}${arg}%`), '-\n', op);
    }
  });
});

describe('JSON', () => {
  it('the default: Istio\'s keys and the decision\'s, in key order; numbers typed, absent values null', () => {
    const line = compileAccessLogFormat('JSON', undefined).format(HTTP);
    assert.ok(line.endsWith('}\n') && !line.slice(0, -1).includes('\n'));
    const o = JSON.parse(line) as Record<string, unknown>;
    assert.deepEqual(Object.keys(o), Object.keys(DEFAULT_JSON_FORMAT));
    assert.deepEqual(Object.keys(o), [...Object.keys(o)].sort());
    assert.equal(o['response_code'], 200);
    assert.equal(o['duration'], 12);
    assert.equal(o['bytes_sent'], 42);
    assert.equal(o['upstream_service_time'], '10', 'a header: a string, as in Istio');
    assert.equal(o['method'], 'GET');
    assert.equal(o['x_forwarded_for'], null);
    assert.equal(o['response_flags'], null);
    assert.equal(o['jwt'], null);
    assert.equal(o['start_time'], '2026-11-21T10:00:00.123Z');
  });

  it('the default with a decision and a flag', () => {
    const o = json(undefined, rec({ status: 403, flags: FLAG.RBAC, decision: { jwt: 'valid', principal: 'i/s', authz: 'denied: by DENY policy ns/p rule 0' } }));
    assert.deepEqual([o['response_flags'], o['jwt'], o['principal'], o['authz'], o['route']], ['RBAC', 'valid', 'i/s', 'denied: by DENY policy ns/p rule 0', null]);
  });

  it('a custom object: operators typed when alone, text when mixed; literals kept; objects nested', () => {
    const o = json('{"code": "%RESPONSE_CODE%", "line": "%REQ(:METHOD)% %REQ(:PATH)%", "ua": "%REQ(USER-AGENT):3%", "none": "%REQ(X-NONE)%", '
      + '"mixed_none": "x=%REQ(X-NONE)%", "team": "shop", "n": 7, "on": true, "nil": null, "up": {"host": "%UPSTREAM_HOST%", "ms": "%DURATION%"}}');
    assert.deepEqual(o, {
      code: 200, line: 'GET /api?q=1', ua: 'cur', none: null, mixed_none: 'x=-', team: 'shop', n: 7, on: true, nil: null,
      up: { host: '10.0.0.1:8080', ms: 12 },
    });
  });

  it('escapes what a value holds (quotes, non-ASCII)', () => {
    const o = json('{"ua": "%REQ(USER-AGENT)%"}', rec({ requestHeaders: { raw: ['User-Agent', 'a "b" \\ c'] } }));
    assert.equal(o['ua'], 'a "b" \\ c');
  });

  it('{} is Istio\'s default keys', () => {
    assert.deepEqual(Object.keys(json('{}')), Object.keys(DEFAULT_JSON_FORMAT));
  });

  it('TEXT encoding takes a JSON-looking format as text (as Istio does)', () => {
    assert.equal(text('{"code": "%RESPONSE_CODE%"}'), '{"code": "200"}\n');
  });
});

describe('formats refused (named operator, where)', () => {
  const cases: [string, 'TEXT' | 'JSON', string, RegExp][] = [
    ['an unknown operator', 'TEXT', '[%START_TIME%] %NOPE%', /unknown command operator %NOPE% at character 16/],
    ['a typo in a known one', 'TEXT', '%RESPONSE_CODES%', /unknown command operator %RESPONSE_CODES%/],
    ['an argument where none is taken', 'TEXT', '%PROTOCOL(X)%', /%PROTOCOL% at character 1 takes no argument/],
    ['a missing argument', 'TEXT', '%REQ%', /%REQ% at character 1 needs an argument/],
    ['an empty header', 'TEXT', '%REQ()%', /%REQ% at character 1 needs an argument/],
    ['three header names', 'TEXT', '%REQ(A?B?C)%', /%REQ\(A\?B\?C\)% at character 1: expected a header name, or two as X\?Y/],
    ['a lone %', 'TEXT', '100% of %RESPONSE_CODE%', /no valid command operator at character 4/],
    ['lower case', 'TEXT', '%response_code%', /no valid command operator at character 1: "%response_code%"/],
    ['an unclosed operator', 'TEXT', '%RESPONSE_CODE', /no valid command operator at character 1/],
    ['a zero length', 'TEXT', '%REQ(X):0%', /a maximum length must be above 0/],
    ['a time specifier not supported', 'TEXT', '%START_TIME(%Y %Q)%', /START_TIME: unsupported time specifier %Q at character 16/],
    ['a decision field unknown', 'TEXT', '%MESH_DECISION(SCORE)%', /expected one of JWT, PRINCIPAL, AUTHZ, ROUTE/],
    ['a GRPC_STATUS form unknown', 'TEXT', 'x %GRPC_STATUS(KEBAB_STRING)%', /%GRPC_STATUS\(KEBAB_STRING\)% at character 3: expected CAMEL_STRING, SNAKE_STRING or NUMBER/],
    ['a GRPC_STATUS form in lower case', 'TEXT', '%GRPC_STATUS(number)%', /%GRPC_STATUS\(number\)% at character 1: expected CAMEL_STRING, SNAKE_STRING or NUMBER/],
    ['an argument to GRPC_STATUS_NUMBER', 'TEXT', '%GRPC_STATUS_NUMBER(NUMBER)%', /%GRPC_STATUS_NUMBER% at character 1 takes no argument/],
    ['a GRPC_STATUS form unknown in JSON, with its key', 'JSON', '{"g": "%GRPC_STATUS(TEXT)%"}', /key "g": %GRPC_STATUS\(TEXT\)% at character 1: expected CAMEL_STRING, SNAKE_STRING or NUMBER/],
    ['JSON that is not JSON', 'JSON', '[%START_TIME%] %PROTOCOL%', /with accessLogEncoding JSON, expected a JSON object/],
    ['JSON that is not an object', 'JSON', '["%PROTOCOL%"]', /expected a JSON object/],
    ['a JSON list value', 'JSON', '{"a": ["%PROTOCOL%"]}', /key "a": a list is not a format value/],
    ['an unknown operator in JSON, with its key', 'JSON', '{"a": {"b": "%NOPE%"}}', /key "a\.b": unknown command operator %NOPE%/],
  ];
  for (const [name, encoding, format, message] of cases) {
    it(name, () => assert.throws(() => compileAccessLogFormat(encoding, format), (err: unknown) => err instanceof AccessLogFormatError && message.test(err.message)));
  }
});
