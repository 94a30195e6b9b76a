// Istio's metadata exchange: the Struct codec checked against protobufjs's google.protobuf.Struct
// (an independent implementation of the same wire format), and the metadata read as Istio reads it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import protobuf from 'protobufjs';
import {
  metadataOfHeader, metadataOfStruct, ownMetadata, UNKNOWN_WORKLOAD, workloadOfPod, type OwnMetadataSource,
} from '../../src/metrics/peer-metadata.js';
import { decodeStruct, encodeStruct, StructDecodeError } from '../../src/metrics/proto-struct.js';

const root = protobuf.Root.fromJSON(protobuf.common.get('google/protobuf/struct.proto')!);
const StructType = root.lookupType('google.protobuf.Struct');

const ENV: OwnMetadataSource = {
  POD_NAME: 'reviews-v2-5b9d8c7f6d-x7k2p', POD_NAMESPACE: 'bookinfo', CLUSTER_ID: 'Kubernetes', MESH_META_CLUSTER_ID: '',
  MESH_META_WORKLOAD_NAME: '', SERVICE_ACCOUNT: 'reviews', INSTANCE_IP: '10.0.0.7',
};

describe('google.protobuf.Struct by hand', () => {
  it('writes what protobufjs reads, nested structs included', () => {
    const bytes = encodeStruct({ NAME: 'pod-1', LABELS: { app: 'reviews', 'service.istio.io/canonical-name': 'reviews' }, EMPTY: '' });
    const decoded = StructType.toObject(StructType.decode(bytes)) as { fields: Record<string, { stringValue?: string; structValue?: { fields: Record<string, { stringValue: string }> } }> };
    assert.equal(decoded.fields['NAME']!.stringValue, 'pod-1');
    assert.equal(decoded.fields['LABELS']!.structValue!.fields['app']!.stringValue, 'reviews');
    assert.equal(decoded.fields['LABELS']!.structValue!.fields['service.istio.io/canonical-name']!.stringValue, 'reviews');
  });

  it('reads what protobufjs writes, skipping the value kinds the exchange does not use', () => {
    const message = StructType.fromObject({
      fields: {
        NAMESPACE: { stringValue: 'default' },
        COUNT: { numberValue: 3 },
        ON: { boolValue: true },
        NOTHING: { nullValue: 0 },
        LIST: { listValue: { values: [{ stringValue: 'a' }] } },
        LABELS: { structValue: { fields: { version: { stringValue: 'v1' } } } },
      },
    });
    const bytes = Buffer.from(StructType.encode(message).finish());
    assert.equal(JSON.stringify(decodeStruct(bytes)), JSON.stringify({ NAMESPACE: 'default', LABELS: { version: 'v1' } }));
  });

  it('refuses bytes that are not a Struct (truncated, a field running past the end, nested too deep)', () => {
    const good = encodeStruct({ NAME: 'x' });
    assert.throws(() => decodeStruct(good.subarray(0, good.length - 1)), StructDecodeError);
    assert.throws(() => decodeStruct(Buffer.from([0x0a, 0x7f, 0x00])), StructDecodeError);
    let deep: Record<string, unknown> = { k: 'v' };
    for (let i = 0; i < 8; i++) deep = { k: deep };
    assert.throws(() => decodeStruct(encodeStruct(deep as never)), StructDecodeError);
  });
});

describe('workload metadata', () => {
  it('names a pod\'s workload from its name when the injector gave none', () => {
    assert.equal(workloadOfPod('reviews-v2-5b9d8c7f6d-x7k2p'), 'reviews-v2');
    assert.equal(workloadOfPod('db-0'), 'db');
    assert.equal(workloadOfPod('standalone'), 'standalone');
  });

  it('reads this pod from its environment and labels, and what it sends decodes to the same', () => {
    const own = ownMetadata(ENV, { app: 'reviews', version: 'v2', 'pod-template-hash': '5b9d8c7f6d', secret: 'not sent' });
    assert.deepEqual(own.metadata, {
      workload: 'reviews-v2', namespace: 'bookinfo', app: 'reviews', version: 'v2', canonicalService: 'reviews', canonicalRevision: 'v2', cluster: 'Kubernetes',
    });
    assert.equal(own.id, 'sidecar~10.0.0.7~reviews-v2-5b9d8c7f6d-x7k2p.bookinfo~bookinfo.svc.cluster.local');
    assert.deepEqual(metadataOfHeader(own.header), own.metadata);
    const sent = decodeStruct(Buffer.from(own.header, 'base64'));
    assert.equal(sent['WORKLOAD_NAME'], 'reviews-v2');
    assert.equal(sent['NAME'], ENV.POD_NAME);
    assert.equal(sent['CLUSTER_ID'], 'Kubernetes');
    assert.equal(JSON.stringify(sent).includes('not sent'), false, 'only the labels the metrics read leave the pod');
  });

  it('prefers the canonical labels and MESH_META_* when set', () => {
    const own = ownMetadata({ ...ENV, MESH_META_WORKLOAD_NAME: 'reviews', MESH_META_CLUSTER_ID: 'east' },
      { 'app.kubernetes.io/name': 'rev', 'service.istio.io/canonical-name': 'reviews-svc', 'service.istio.io/canonical-revision': '7' });
    assert.deepEqual(own.metadata, {
      workload: 'reviews', namespace: 'bookinfo', app: 'rev', version: 'unknown', canonicalService: 'reviews-svc', canonicalRevision: '7', cluster: 'east',
    });
  });

  it('reads a peer that Istio\'s Envoy describes (its keys), and is unknown for what does not decode', () => {
    const envoy = encodeStruct({
      APP_CONTAINERS: 'productpage', CLUSTER_ID: 'Kubernetes', INSTANCE_IPS: '10.1.0.4', ISTIO_VERSION: '1.22.0',
      LABELS: { app: 'productpage', 'security.istio.io/tlsMode': 'istio', 'service.istio.io/canonical-name': 'productpage', 'service.istio.io/canonical-revision': 'v1', version: 'v1' },
      MESH_ID: 'cluster.local', NAME: 'productpage-v1-6b746f74dc-9stvs', NAMESPACE: 'default',
      OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/productpage-v1', SERVICE_ACCOUNT: 'bookinfo-productpage', WORKLOAD_NAME: 'productpage-v1',
    }).toString('base64');
    assert.deepEqual(metadataOfHeader(envoy), {
      workload: 'productpage-v1', namespace: 'default', app: 'productpage', version: 'v1', canonicalService: 'productpage', canonicalRevision: 'v1', cluster: 'Kubernetes',
    });
    assert.equal(metadataOfHeader('!!not base64 of a struct!!'), undefined);
    assert.equal(metadataOfHeader('A'.repeat(9000)), undefined);
    assert.deepEqual(metadataOfStruct({}), { ...UNKNOWN_WORKLOAD, canonicalRevision: 'latest' });
  });
});
