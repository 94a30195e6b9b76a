// Istio's certificate service, `istio.v1.auth.IstioCertificateService` (security/proto/pb in Istio),
// as the JSON form protobufjs reads: three request fields and one answer field are all we use, so the
// description lives here instead of a .proto file the build would have to copy into dist/.
// Shared by the client and by the test CA, so both speak exactly the same messages.
import * as protoLoader from '@grpc/proto-loader';
import type { ServiceDefinition } from '@grpc/grpc-js';

const descriptor: Parameters<typeof protoLoader.fromJSON>[0] = {
  nested: {
    istio: { nested: { v1: { nested: { auth: { nested: {
      IstioCertificateRequest: {
        fields: {
          csr: { type: 'string', id: 1 },
          subject_id: { type: 'string', id: 2 },
          validity_duration: { type: 'int64', id: 3 },
        },
      },
      IstioCertificateResponse: {
        fields: { cert_chain: { rule: 'repeated', type: 'string', id: 1 } },
      },
      IstioCertificateService: {
        methods: {
          CreateCertificate: { requestType: 'IstioCertificateRequest', responseType: 'IstioCertificateResponse', comment: 'Signs the CSR; answers leaf first, root last.' },
        },
      },
    } } } } } },
  },
};

/** Fully-qualified service name, for logs. */
export const CA_SERVICE_NAME = 'istio.v1.auth.IstioCertificateService';

/** Request as grpc-js hands it over: field names as in the .proto, int64 as a decimal string. */
export interface IstioCertificateRequest {
  csr: string;
  subject_id: string;
  /** Seconds. */
  validity_duration: string | number;
}

export interface IstioCertificateResponse {
  cert_chain: string[];
}

const packageDefinition = protoLoader.fromJSON(descriptor, { keepCase: true, longs: String, defaults: true });

/** The service definition for `client.makeGenericClientConstructor` and `server.addService`. */
export const certificateService = packageDefinition[CA_SERVICE_NAME] as unknown as ServiceDefinition;
