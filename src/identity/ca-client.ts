// One call to Istio's CA (`CreateCertificate` over gRPC with TLS): the CSR goes out with the pod's
// service-account token, the signed chain comes back. Each call opens its own channel and closes it:
// renewals are hours apart, and a fresh channel re-reads the CA's root and the token (both rotate)
// and carries no reconnect back-off from an earlier outage.
import { readFile } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import { AgentError } from '../errors/agent-error.js';
import { parseCaAddress } from './ca-address.js';
import { caChannelCredentials } from './ca-credentials.js';
import { certificateService, type IstioCertificateRequest, type IstioCertificateResponse } from './ca-proto.js';

export interface CaClientOptions {
  /** CA_ADDR: `host:port`, `[v6]:port`. */
  readonly address: string;
  /** PEM file with the root(s) the CA's serving certificate must lead to. */
  readonly rootCertFile: string;
  /**
   * MESHD_SAN: the name the CA's certificate must hold; default the host of `address` (an address is
   * then checked as an IP SAN). Sent as SNI only when it is a DNS name (net/server-name.ts).
   */
  readonly serverName?: string;
  /** The service-account token sent as `authorization: Bearer`; re-read on every call. */
  readonly tokenFile: string;
  /** Sent as `ClusterID` metadata (CLUSTER_ID). */
  readonly clusterId: string;
  /** Deadline of one call, connection included. Default 15 s. */
  readonly timeoutMs?: number;
  /** MESH_GPRC_MAXRECVMSGSIZE: the largest response accepted (a certificate chain is a few KiB). */
  readonly maxReceiveMessageBytes?: number;
  /** COMPLIANCE_POLICY, laid over the channel's TLS (security/compliance.ts). */
  readonly compliancePolicy?: string;
}

export interface CertificateRequest {
  readonly csrPem: string;
  readonly validitySeconds: number;
  /** Optional subject id; Istio's agent leaves it empty (the CA takes the identity from the token). */
  readonly subjectId?: string;
}

async function readToken(file: string): Promise<string> {
  let token: string;
  try {
    token = (await readFile(file, 'utf8')).trim();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'does not exist' : `cannot be read (${(err as Error).message})`;
    throw new AgentError('ERR_CA_TOKEN', `token file ${file} ${why}; the CA needs the pod's service-account token (JWT_POLICY chooses the file)`, { cause: err });
  }
  if (token === '') throw new AgentError('ERR_CA_TOKEN', `token file ${file} is empty`);
  return token;
}

async function readCaRoot(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'does not exist' : `cannot be read (${(err as Error).message})`;
    throw new AgentError('ERR_CERT_FILE', `the CA's root certificate ${file} ${why} (CA_ROOT_CA names another file)`, { cause: err });
  }
}

/** The method the generic client constructor adds, typed. */
interface CertificateClient {
  CreateCertificate(request: IstioCertificateRequest, metadata: grpc.Metadata, options: grpc.CallOptions,
    callback: grpc.requestCallback<IstioCertificateResponse>): grpc.ClientUnaryCall;
}

const statusName = (code: number): string => grpc.status[code] ?? `status ${code}`;

/** A gRPC failure as the operator should read it: the address, and whether the CA answered at all. */
function callError(address: string, rootCertFile: string, name: string, err: grpc.ServiceError): AgentError {
  const status = `${statusName(err.code)}: ${err.details || err.message}`;
  if (err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED) {
    return new AgentError('ERR_CA_UNREACHABLE',
      `CA ${address} unreachable (${status}); its certificate is checked against ${rootCertFile} and must name ${name}`, { cause: err });
  }
  if (err.code === grpc.status.RESOURCE_EXHAUSTED && /received message larger than max/i.test(err.details)) {
    return new AgentError('ERR_CA_REFUSED', `CA ${address} answered more than MESH_GPRC_MAXRECVMSGSIZE allows (${status})`, { cause: err });
  }
  return new AgentError('ERR_CA_REFUSED', `CA ${address} refused the certificate request (${status})`, { cause: err });
}

/** Asks the CA to sign `request.csrPem`; resolves with cert_chain as sent (leaf first, root last). */
export async function requestCertificate(options: CaClientOptions, request: CertificateRequest): Promise<string[]> {
  const { host } = parseCaAddress(options.address);
  const [token, root] = await Promise.all([readToken(options.tokenFile), readCaRoot(options.rootCertFile)]);
  const Client = grpc.makeGenericClientConstructor(certificateService, 'IstioCertificateService');
  const name = options.serverName || host;
  const client = new Client(options.address, caChannelCredentials(root, name, options.compliancePolicy ?? ''),
    options.maxReceiveMessageBytes !== undefined ? { 'grpc.max_receive_message_length': options.maxReceiveMessageBytes } : {});
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  metadata.set('ClusterID', options.clusterId);
  const message: IstioCertificateRequest = {
    csr: request.csrPem,
    subject_id: request.subjectId ?? '',
    validity_duration: String(Math.max(1, Math.round(request.validitySeconds))),
  };
  try {
    const response = await new Promise<IstioCertificateResponse>((resolve, reject) => {
      const deadline = Date.now() + (options.timeoutMs ?? 15_000);
      (client as unknown as CertificateClient).CreateCertificate(message, metadata, { deadline }, (err, value) => {
        if (err) reject(callError(options.address, options.rootCertFile, name, err));
        else resolve(value ?? { cert_chain: [] });
      });
    });
    const chain = (response.cert_chain ?? []).filter((pem) => pem.trim() !== '');
    if (chain.length === 0) {
      throw new AgentError('ERR_CA_EMPTY_CHAIN', `CA ${options.address} answered without a certificate (empty cert_chain)`);
    }
    return chain;
  } finally {
    client.close();
  }
}
