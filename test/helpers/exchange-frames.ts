// Frames of Istio's TCP metadata exchange made as its documented format says, with protobufjs for
// the Any and the Struct (an implementation independent of the agent's encoder): what an Envoy
// sidecar would send.
import protobuf from 'protobufjs';

const StructType = protobuf.Root.fromJSON(protobuf.common.get('google/protobuf/struct.proto')!).lookupType('google.protobuf.Struct');
// google.protobuf.Any as its .proto declares it (protobufjs ships no JSON of it).
const AnyType = new protobuf.Type('Any').add(new protobuf.Field('type_url', 1, 'string')).add(new protobuf.Field('value', 2, 'bytes'));
new protobuf.Root().define('google.protobuf').add(AnyType);

export { AnyType, StructType };

/** magic 0x3D230467, data size (both big-endian), an Any of a Struct of `fields` (protobufjs's JSON form). */
export function envoyFrame(fields: Record<string, unknown>, typeUrl = 'type.googleapis.com/google.protobuf.Struct'): Buffer {
  const value = Buffer.from(StructType.encode(StructType.fromObject({ fields })).finish());
  const any = Buffer.from(AnyType.encode(AnyType.fromObject({ type_url: typeUrl, value })).finish());
  const prefix = Buffer.from([0x3d, 0x23, 0x04, 0x67, 0, 0, 0, 0]);
  prefix.writeUInt32BE(any.length, 4);
  return Buffer.concat([prefix, any]);
}

/** The fields of an Istio sidecar's frame for a workload (its node metadata and id). */
export function sidecarFields(w: { pod: string; namespace: string; workload: string; app: string; version: string; ip: string }): Record<string, unknown> {
  const s = (v: string): { stringValue: string } => ({ stringValue: v });
  return {
    'x-envoy-peer-metadata': {
      structValue: {
        fields: {
          NAME: s(w.pod), NAMESPACE: s(w.namespace), WORKLOAD_NAME: s(w.workload), CLUSTER_ID: s('Kubernetes'),
          OWNER: s(`kubernetes://apis/apps/v1/namespaces/${w.namespace}/deployments/${w.workload}`),
          LABELS: {
            structValue: {
              fields: {
                app: s(w.app), version: s(w.version), 'service.istio.io/canonical-name': s(w.app), 'service.istio.io/canonical-revision': s(w.version),
              },
            },
          },
        },
      },
    },
    'x-envoy-peer-metadata-id': s(`sidecar~${w.ip}~${w.pod}.${w.namespace}~${w.namespace}.svc.cluster.local`),
  };
}
