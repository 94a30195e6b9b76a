// src/proxy/http2/grpc.ts, pure: which requests are gRPC calls, the status a call ended with, the
// gRPC status a local HTTP answer stands for, grpc-message's encoding, and Envoy's GRPC_STATUS forms.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GRPC, GRPC_STATUS_NAMES, grpcMessage, grpcStatusForHttp, grpcStatusOf, grpcStatusText, isGrpc } from '../../../src/proxy/http2/grpc.js';

describe('isGrpc', () => {
  it('application/grpc, with a +subtype or parameters, any case', () => {
    for (const t of ['application/grpc', 'application/grpc+proto', 'application/grpc+json', 'application/grpc;charset=utf-8', 'Application/GRPC', 'APPLICATION/GRPC+PROTO']) {
      assert.equal(isGrpc(t), true, t);
    }
  });

  it('not another type that starts the same, nor none', () => {
    for (const t of ['application/grpcx', 'application/grpc-web', 'application/grpc-web+proto', 'application/grp', 'application/json', 'text/grpc', '', ' application/grpc']) {
      assert.equal(isGrpc(t), false, JSON.stringify(t));
    }
    assert.equal(isGrpc(undefined), false);
  });
});

describe('grpcStatusOf', () => {
  it('a number of up to three digits, the first of repeated values', () => {
    assert.equal(grpcStatusOf('0'), 0);
    assert.equal(grpcStatusOf('14'), 14);
    assert.equal(grpcStatusOf(['7', '2']), 7);
  });

  it('absent or not a number: undefined', () => {
    for (const v of [undefined, '', 'OK', '-1', '1.5', ' 1', '1234']) assert.equal(grpcStatusOf(v), undefined, JSON.stringify(v));
    assert.equal(grpcStatusOf([]), undefined);
  });
});

describe('grpcStatusForHttp (gRPC\'s http-grpc-status-mapping)', () => {
  const cases: [number, number][] = [
    [200, GRPC.OK], [400, GRPC.INTERNAL], [401, GRPC.UNAUTHENTICATED], [403, GRPC.PERMISSION_DENIED], [404, GRPC.UNIMPLEMENTED],
    [429, GRPC.UNAVAILABLE], [502, GRPC.UNAVAILABLE], [503, GRPC.UNAVAILABLE], [504, GRPC.UNAVAILABLE],
    [500, GRPC.UNKNOWN], [501, GRPC.UNKNOWN], [418, GRPC.UNKNOWN], [301, GRPC.UNKNOWN], [204, GRPC.UNKNOWN],
  ];
  for (const [http, grpc] of cases) it(`${http} → ${GRPC_STATUS_NAMES[grpc]}`, () => assert.equal(grpcStatusForHttp(http), grpc));

  it('the codes are gRPC\'s numbers', () => {
    assert.deepEqual([GRPC.OK, GRPC.CANCELLED, GRPC.UNKNOWN, GRPC.DEADLINE_EXCEEDED, GRPC.PERMISSION_DENIED, GRPC.UNIMPLEMENTED, GRPC.INTERNAL, GRPC.UNAVAILABLE, GRPC.UNAUTHENTICATED],
      [0, 1, 2, 4, 7, 12, 13, 14, 16]);
    assert.equal(GRPC_STATUS_NAMES.length, 17);
    for (const [name, n] of Object.entries(GRPC)) assert.equal(GRPC_STATUS_NAMES[n], name);
  });
});

describe('grpcMessage (percent-encoding of the gRPC spec)', () => {
  it('printable ASCII but % as it is', () => {
    assert.equal(grpcMessage('RBAC: access denied'), 'RBAC: access denied');
    assert.equal(grpcMessage(' !"#$&\'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~'), '!"#$&\'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~', 'trimmed');
  });

  it('%, controls and non-ASCII (as UTF-8 bytes) encoded, upper-case hex', () => {
    assert.equal(grpcMessage('100%'), '100%25');
    assert.equal(grpcMessage('a\nb\tc\x7f'), 'a%0Ab%09c%7F');
    assert.equal(grpcMessage('café ✓'), 'caf%C3%A9 %E2%9C%93');
  });

  it('the surrounding whitespace (a body\'s final newline) is trimmed', () => {
    assert.equal(grpcMessage('upstream connect error\n'), 'upstream connect error');
    assert.equal(grpcMessage('\n'), '');
  });

  it('decodes back to the trimmed text', () => {
    for (const t of ['x%y', 'ü/ß ✓', 'a\r\nb']) assert.equal(decodeURIComponent(grpcMessage(t)), t);
  });
});

describe('grpcStatusText (Envoy\'s GRPC_STATUS forms)', () => {
  it('CAMEL_STRING (the default): Envoy\'s names, Canceled with one l', () => {
    const cases: [number, string][] = [
      [0, 'OK'], [1, 'Canceled'], [2, 'Unknown'], [3, 'InvalidArgument'], [4, 'DeadlineExceeded'], [5, 'NotFound'], [6, 'AlreadyExists'],
      [7, 'PermissionDenied'], [8, 'ResourceExhausted'], [9, 'FailedPrecondition'], [10, 'Aborted'], [11, 'OutOfRange'], [12, 'Unimplemented'],
      [13, 'Internal'], [14, 'Unavailable'], [15, 'DataLoss'], [16, 'Unauthenticated'],
    ];
    for (const [n, text] of cases) {
      assert.equal(grpcStatusText(n), text, String(n));
      assert.equal(grpcStatusText(n, 'CAMEL_STRING'), text, String(n));
    }
  });

  it('SNAKE_STRING and NUMBER', () => {
    assert.equal(grpcStatusText(0, 'SNAKE_STRING'), 'OK');
    assert.equal(grpcStatusText(1, 'SNAKE_STRING'), 'CANCELLED');
    assert.equal(grpcStatusText(7, 'SNAKE_STRING'), 'PERMISSION_DENIED');
    assert.equal(grpcStatusText(16, 'SNAKE_STRING'), 'UNAUTHENTICATED');
    assert.equal(grpcStatusText(7, 'NUMBER'), '7');
    assert.equal(grpcStatusText(0, 'NUMBER'), '0');
  });

  it('a status gRPC has no name for: its number in every form', () => {
    for (const form of ['CAMEL_STRING', 'SNAKE_STRING', 'NUMBER'] as const) assert.equal(grpcStatusText(17, form), '17', form);
    assert.equal(grpcStatusText(99), '99');
  });
});
