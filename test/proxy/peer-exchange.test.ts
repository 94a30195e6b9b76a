// The data path's part of Istio's metadata exchange and of the standard metrics: the lines added
// toward a mesh peer, the peer's lines taken out, gRPC messages counted across chunk boundaries.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GrpcMessageCounter } from '../../src/proxy/http2/grpc-messages.js';
import { peerExchangeOf, takePeerMetadata, withExchangeLines, withExchangePairs } from '../../src/proxy/peer-exchange.js';
import { packRequest, unpackRequest } from '../../src/proxy/standard-series.js';

const OWN = peerExchangeOf({ header: 'CgQKAk5BEgI=', id: 'sidecar~10.0.0.1~a.default~default.svc.cluster.local', struct: { NAME: 'a' } });

describe('metadata exchange lines', () => {
  it('adds this sidecar\'s lines to a request head, dropping any the application wrote (whatever their case)', () => {
    const head = 'GET / HTTP/1.1\r\nhost: b\r\nX-Envoy-Peer-Metadata: forged\r\nx-envoy-peer-metadata-id: forged-id\r\naccept: */*\r\n\r\n';
    assert.equal(withExchangeLines(head, OWN.lines),
      'GET / HTTP/1.1\r\nhost: b\r\naccept: */*\r\n'
      + 'x-envoy-peer-metadata: CgQKAk5BEgI=\r\nx-envoy-peer-metadata-id: sidecar~10.0.0.1~a.default~default.svc.cluster.local\r\n\r\n');
    assert.equal(withExchangeLines('GET / HTTP/1.1\r\nhost: b\r\n\r\n', OWN.lines), `GET / HTTP/1.1\r\nhost: b\r\n${OWN.lines}\r\n`);
  });

  it('takes a peer\'s lines out of a response head and gives its metadata; a head without any goes on as it is', () => {
    const parts = [Buffer.from('200 OK\r\ncontent-type: text/plain\r\nx-envoy-peer-metadata: '), Buffer.from('Zm9v\r\nX-Envoy-Peer-Metadata-Id: peer\r\ncontent-length: 2\r\n')];
    const taken = takePeerMetadata(parts)!;
    assert.equal(taken.value, 'Zm9v');
    assert.equal(Buffer.concat(taken.parts).toString(), '200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n');
    assert.equal(takePeerMetadata([Buffer.from('200 OK\r\ncontent-length: 2\r\n')]), undefined);
  });

  it('replaces an HTTP/2 request\'s peer headers with this sidecar\'s', () => {
    assert.deepEqual(withExchangePairs(['accept', '*/*', 'x-envoy-peer-metadata', 'forged'], OWN.pairs),
      ['accept', '*/*', 'x-envoy-peer-metadata', 'CgQKAk5BEgI=', 'x-envoy-peer-metadata-id', 'sidecar~10.0.0.1~a.default~default.svc.cluster.local']);
  });
});

describe('gRPC message counting', () => {
  it('counts length-prefixed messages whatever the chunking (prefixes split, empty messages, several per chunk)', () => {
    const msg = (n: number): Buffer => Buffer.concat([Buffer.from([0, 0, 0, 0, n]), Buffer.alloc(n, 7)]);
    const body = Buffer.concat([msg(3), msg(0), msg(300 % 256), msg(1)]);
    for (const size of [1, 2, 3, 5, 7, body.length]) {
      const c = new GrpcMessageCounter();
      for (let at = 0; at < body.length; at += size) c.feed(body.subarray(at, at + size));
      assert.equal(c.messages, 4, `chunks of ${size}`);
    }
    const big = new GrpcMessageCounter();
    big.feed(Buffer.from([0, 0, 1, 0, 0])); // a 65536-byte message begins
    big.feed(Buffer.alloc(65536));
    big.feed(msg(2));
    assert.equal(big.messages, 2);
  });
});

describe('packed request keys', () => {
  it('round-trips status, gRPC status (none, missing, a code) and flags', () => {
    for (const [status, grpc, flags] of [[200, undefined, 0], [503, null, 0b101], [200, 14, 1 << 14], [0, 29, 0]] as const) {
      assert.deepEqual(unpackRequest(packRequest(status, grpc, flags)), { status, grpc, flags });
    }
  });
});
