// The TLS under the CA client's gRPC channel. grpc-js's own TLS credentials send the target's host as
// SNI even when CA_ADDR is an IP address (RFC 6066 forbids it; node warns DEP0123) and have no option
// to stop it, so the channel's TLS is made here, through grpc-js's `experimental.SecureConnector`:
// SNI only for a DNS name (net/server-name.ts), and the CA's certificate always checked, against the
// chain's root and against the expected name (MESHD_SAN, else CA_ADDR's host: a name, or the address
// itself as an IP SAN), whatever was sent.
import type { Socket } from 'node:net';
import type { PeerCertificate, SecureContext } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { serverNameIndication } from '../net/server-name.js';
import { compliantTls } from '../security/compliance.js';

type SecureConnector = grpc.experimental.SecureConnector;
type SecureConnectResult = grpc.experimental.SecureConnectResult;

class CaChannelCredentials extends grpc.ChannelCredentials {
  readonly #context: SecureContext;
  readonly #name: string;

  constructor(rootPem: Buffer, name: string, compliancePolicy: string) {
    super();
    this.#context = process.getBuiltinModule('node:tls').createSecureContext(compliantTls(compliancePolicy, { ca: rootPem }));
    this.#name = name;
  }

  override _isSecure(): boolean {
    return true;
  }

  override _equals(other: grpc.ChannelCredentials): boolean {
    return other === this;
  }

  override _createSecureConnector(_target: grpc.experimental.GrpcUri, _options: grpc.ChannelOptions,
    callCredentials?: grpc.CallCredentials): SecureConnector {
    const tls = process.getBuiltinModule('node:tls');
    const name = this.#name;
    const servername = serverNameIndication(name);
    const calls = callCredentials ?? grpc.CallCredentials.createEmpty();
    const connect = (socket: Socket): Promise<SecureConnectResult> => new Promise((resolve, reject) => {
      const secured = tls.connect({
        socket, secureContext: this.#context, ALPNProtocols: ['h2'],
        ...(servername !== undefined ? { servername } : {}),
        // Node would check `servername || host`; the expected name is said here, SNI or not.
        checkServerIdentity: (_host: string, cert: PeerCertificate) => tls.checkServerIdentity(name, cert),
      }, () => resolve({ socket: secured, secure: true }));
      // A chain or name that does not verify ends the handshake with an error (rejectUnauthorized);
      // later errors reach grpc-js's session too, so this listener only keeps them from being unhandled.
      secured.on('error', reject);
    });
    return { connect, waitForReady: async () => {}, getCallCredentials: () => calls, destroy: () => {} };
  }
}

/**
 * Credentials for a channel to the CA: trust `rootPem`, expect `name` in the CA's certificate; the
 * TLS as COMPLIANCE_POLICY allows (Istio restricts its agent's gRPC clients too).
 */
export function caChannelCredentials(rootPem: Buffer, name: string, compliancePolicy = ''): grpc.ChannelCredentials {
  return new CaChannelCredentials(rootPem, name, compliancePolicy);
}
