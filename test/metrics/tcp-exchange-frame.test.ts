// The frame of Istio's TCP metadata exchange: read and written as Envoy's metadata_exchange filter
// does (checked against protobufjs's Any and Struct, an independent implementation of the wire
// format), and bytes that are not a frame, or not a whole one, or too large, never taken for one.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { metadataOfHeader, ownMetadata, type OwnMetadataSource } from '../../src/metrics/peer-metadata.js';
import {
  encodeExchangeFrame, EXCHANGE_MAGIC, MAX_EXCHANGE_DATA_BYTES, readExchangeFrame,
} from '../../src/metrics/tcp-exchange-frame.js';
import { AnyType, envoyFrame, StructType } from '../helpers/exchange-frames.js';
import { seeded } from '../helpers/seeded.js';

const ENV: OwnMetadataSource = {
  POD_NAME: 'reviews-v2-5b9d8c7f6d-x7k2p', POD_NAMESPACE: 'bookinfo', CLUSTER_ID: 'Kubernetes', MESH_META_CLUSTER_ID: '',
  MESH_META_WORKLOAD_NAME: '', SERVICE_ACCOUNT: 'reviews', INSTANCE_IP: '10.0.0.7',
};
const OWN = ownMetadata(ENV, { app: 'reviews', version: 'v2' });

const ENVOY_PEER = {
  'x-envoy-peer-metadata': {
    structValue: {
      fields: {
        NAME: { stringValue: 'ratings-v1-7dc98c7588-kx2l9' }, NAMESPACE: { stringValue: 'bookinfo' }, WORKLOAD_NAME: { stringValue: 'ratings-v1' },
        CLUSTER_ID: { stringValue: 'Kubernetes' }, OWNER: { stringValue: 'kubernetes://apis/apps/v1/namespaces/bookinfo/deployments/ratings-v1' },
        LABELS: {
          structValue: {
            fields: {
              app: { stringValue: 'ratings' }, version: { stringValue: 'v1' },
              'service.istio.io/canonical-name': { stringValue: 'ratings' }, 'service.istio.io/canonical-revision': { stringValue: 'v1' },
            },
          },
        },
      },
    },
  },
  'x-envoy-peer-metadata-id': { stringValue: 'sidecar~10.0.0.9~ratings-v1-7dc98c7588-kx2l9.bookinfo~bookinfo.svc.cluster.local' },
};

describe('the TCP metadata exchange frame', () => {
  it('starts with the magic and the data size, big-endian, then an Any of a Struct that protobufjs reads', () => {
    const frame = encodeExchangeFrame(OWN.struct, OWN.id);
    assert.equal(frame.readUInt32BE(0), EXCHANGE_MAGIC);
    assert.equal(frame.readUInt32BE(0), 1025705063);
    assert.equal(frame.readUInt32BE(4), frame.length - 8);
    const any = AnyType.toObject(AnyType.decode(frame.subarray(8))) as { type_url: string; value: Uint8Array };
    assert.equal(any.type_url, 'type.googleapis.com/google.protobuf.Struct');
    const data = StructType.toObject(StructType.decode(any.value)) as { fields: Record<string, { stringValue?: string; structValue?: { fields: Record<string, { stringValue?: string }> } }> };
    assert.deepEqual(Object.keys(data.fields).sort(), ['x-envoy-peer-metadata', 'x-envoy-peer-metadata-id']);
    assert.equal(data.fields['x-envoy-peer-metadata-id']!.stringValue, 'sidecar~10.0.0.7~reviews-v2-5b9d8c7f6d-x7k2p.bookinfo~bookinfo.svc.cluster.local');
    const meta = data.fields['x-envoy-peer-metadata']!.structValue!.fields;
    assert.equal(meta['WORKLOAD_NAME']!.stringValue, 'reviews-v2');
    assert.equal(meta['NAMESPACE']!.stringValue, 'bookinfo');
  });

  it('reads back what it writes: the peer key is the HTTP header\'s value, the same labels', () => {
    const frame = encodeExchangeFrame(OWN.struct, OWN.id);
    const read = readExchangeFrame(frame);
    assert.equal(read.kind, 'frame');
    if (read.kind !== 'frame') return;
    assert.equal(read.frameBytes, frame.length);
    assert.equal(read.peerKey, OWN.header);
    assert.equal(read.id, OWN.id);
    assert.deepEqual(metadataOfHeader(read.peerKey!), OWN.metadata);
  });

  it('reads a frame made by hand from the documented format (an Envoy sidecar\'s), with the application\'s bytes after it', () => {
    const frame = envoyFrame(ENVOY_PEER);
    const read = readExchangeFrame(Buffer.concat([frame, Buffer.from('GET / HTTP/1.1\r\n')]));
    assert.equal(read.kind, 'frame');
    if (read.kind !== 'frame') return;
    assert.equal(read.frameBytes, frame.length, 'only the frame is taken: what follows is the application\'s');
    assert.equal(read.id, 'sidecar~10.0.0.9~ratings-v1-7dc98c7588-kx2l9.bookinfo~bookinfo.svc.cluster.local');
    assert.deepEqual(metadataOfHeader(read.peerKey!), {
      workload: 'ratings-v1', namespace: 'bookinfo', app: 'ratings', version: 'v1', canonicalService: 'ratings', canonicalRevision: 'v1', cluster: 'Kubernetes',
    });
  });

  it('waits for a frame that is not whole yet, byte by byte', () => {
    const frame = encodeExchangeFrame(OWN.struct, OWN.id);
    for (let n = 0; n < frame.length; n++) assert.equal(readExchangeFrame(frame.subarray(0, n)).kind, 'incomplete', `${n} bytes`);
  });

  it('takes bytes that do not start with the magic for the application\'s, from the first byte that differs', () => {
    assert.equal(readExchangeFrame(Buffer.from('G')).kind, 'not-exchange');
    assert.equal(readExchangeFrame(Buffer.from('GET / HTTP/1.1\r\n\r\n')).kind, 'not-exchange');
    assert.equal(readExchangeFrame(Buffer.from([0x3d, 0x23, 0x05])).kind, 'not-exchange');
    assert.equal(readExchangeFrame(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x10])).kind, 'not-exchange', 'a TLS record inside');
  });

  it('skips a frame larger than the limit without reading it', () => {
    const big = Buffer.from([0x3d, 0x23, 0x04, 0x67, 0, 0, 0, 0]);
    big.writeUInt32BE(MAX_EXCHANGE_DATA_BYTES + 1, 4);
    assert.deepEqual(readExchangeFrame(big), { kind: 'oversized', frameBytes: 8 + MAX_EXCHANGE_DATA_BYTES + 1 });
    big.writeUInt32BE(0xffffffff, 4);
    assert.deepEqual(readExchangeFrame(big), { kind: 'oversized', frameBytes: 8 + 0xffffffff });
  });

  it('drops a whole frame whose data is not an Any of a Struct holding the metadata: no peer, no crash', () => {
    const cases: [string, Buffer][] = [
      ['another type', envoyFrame(ENVOY_PEER, 'type.googleapis.com/google.protobuf.Value')],
      ['no metadata field', envoyFrame({ other: { stringValue: 'x' } })],
      ['metadata as a string', envoyFrame({ 'x-envoy-peer-metadata': { stringValue: 'ratings' } })],
      ['garbage', (() => { const f = Buffer.from([0x3d, 0x23, 0x04, 0x67, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff]); return f; })()],
      ['a field running past the end', Buffer.from([0x3d, 0x23, 0x04, 0x67, 0, 0, 0, 3, 0x12, 0x7f, 0x00])],
      ['empty', Buffer.from([0x3d, 0x23, 0x04, 0x67, 0, 0, 0, 0])],
    ];
    for (const [name, frame] of cases) {
      const read = readExchangeFrame(frame);
      assert.equal(read.kind, 'frame', name);
      if (read.kind !== 'frame') continue;
      assert.equal(read.frameBytes, frame.length, name);
      assert.equal(read.peerKey, undefined, name);
    }
  });

  it('never throws on random bytes after a valid prefix (seeded: the same 2000 inputs every run)', () => {
    const random = seeded(31);
    for (let i = 0; i < 2000; i++) {
      const size = Math.floor(random() * 64);
      const body = Buffer.from(Array.from({ length: size }, () => Math.floor(random() * 256)));
      const prefix = Buffer.from([0x3d, 0x23, 0x04, 0x67, 0, 0, 0, 0]);
      prefix.writeUInt32BE(size, 4);
      const read = readExchangeFrame(Buffer.concat([prefix, body]));
      assert.equal(read.kind, 'frame');
    }
  });
});
