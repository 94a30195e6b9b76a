// A real Istio-compatible CA for tests: gRPC over TLS serving `istio.v1.auth.IstioCertificateService/
// CreateCertificate`. It checks the bearer token, signs the CSR's public key with a test root (copying
// the CSR's URI SAN, signing through mesh-certs.ts), and answers [leaf, root] as Istio's CA does.
// Tests can count calls, make it fail, override the validity, stop it and start it again on the same
// port. test/fixtures/test-ca.mjs runs the same thing as a standalone process.
//
// Usage:
//   const ca = await startTestCa({ token: 'pod-token' });   // 127.0.0.1, a free port
//   env CA_ADDR=ca.address, CA_ROOT_CA=<file with ca.rootPem>, token file holding 'pod-token'
//   ...
//   await ca.close();
import * as grpc from '@grpc/grpc-js';
import * as x509 from '@peculiar/x509';
import { isIP } from 'node:net';
import {
  certificateService, type IstioCertificateRequest, type IstioCertificateResponse,
} from '../../src/identity/ca-proto.js';
import { createRootCa, generateTestKey, signCertificate, type TestCa } from './mesh-certs.js';

export const DEFAULT_TEST_TOKEN = 'test-token';

export interface TestCaOptions {
  /** The signing root; default a new ECDSA P-256 root. */
  readonly root?: TestCa;
  /** The bearer token accepted; default `test-token`. */
  readonly token?: string;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 0 (a free port). */
  readonly port?: number;
  /** Issue certificates for this long whatever the request asks. */
  readonly validityMs?: number;
  /** Names in the CA's own serving certificate; default localhost, 127.0.0.1, ::1 and `host`. */
  readonly serverNames?: readonly string[];
}

/** What one call carried, for assertions. */
export interface RecordedRequest {
  readonly authorization: string | undefined;
  readonly clusterId: string | undefined;
  readonly subjectId: string;
  readonly validitySeconds: number;
  /** The URI SANs of the CSR. */
  readonly uris: readonly string[];
  /** Serial (upper-case hex) of the certificate issued, if any. */
  readonly serial?: string;
  /** gRPC status name when the call failed. */
  readonly failed?: string;
}

export interface RunningTestCa {
  /** `host:port` for CA_ADDR (IPv6 in brackets). */
  readonly address: string;
  readonly host: string;
  readonly port: number;
  readonly root: TestCa;
  /** PEM of the root: write it where CA_ROOT_CA points. */
  readonly rootPem: string;
  /** Calls answered since start (successful or not), across restarts. */
  readonly calls: number;
  readonly requests: readonly RecordedRequest[];
  /** The bearer token accepted from now on. */
  token: string;
  /** Validity of issued certificates from now on (undefined: what the request asks). */
  validityMs: number | undefined;
  /** Answer every call with this status (e.g. grpc.status.UNAVAILABLE) until set back to undefined. */
  failWith(code: grpc.status | undefined, message?: string): void;
  /** Answer every successful call with this cert_chain instead of [leaf, root] (undefined: normal answers). */
  answerWith(chain: string[] | undefined): void;
  /** Whether the port is being served. */
  readonly running: boolean;
  /** Stops serving (connections are cut); the port is free until restart(). */
  stop(): Promise<void>;
  /** Serves again on the same host and port. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** Signs the CSR in `csrPem` with `issuer`: same public key and URI SANs, the given validity. */
export async function signCsr(issuer: TestCa, csrPem: string, validityMs: number): Promise<x509.X509Certificate> {
  const csr = new x509.Pkcs10CertificateRequest(csrPem);
  if (!await csr.verify()) throw new Error('the CSR signature does not verify');
  const uris = uriSans(csr);
  // Whole seconds, as X.509 stores them, so notAfter - notBefore is exactly the validity asked for.
  const notBefore = new Date(Math.floor(Date.now() / 1000) * 1000);
  return signCertificate(csr.publicKey, issuer, { notBefore, notAfter: new Date(notBefore.getTime() + validityMs), uris });
}

function uriSans(csr: x509.Pkcs10CertificateRequest): string[] {
  const san = csr.extensions.find((e): e is x509.SubjectAlternativeNameExtension => e instanceof x509.SubjectAlternativeNameExtension);
  return (san?.names.toJSON() ?? []).filter((n) => n.type === 'url').map((n) => n.value);
}

function csrUris(csrPem: string): string[] {
  try {
    return uriSans(new x509.Pkcs10CertificateRequest(csrPem));
  } catch {
    return [];
  }
}

const bracket = (host: string): string => (isIP(host) === 6 ? `[${host}]` : host);

export async function startTestCa(options: TestCaOptions = {}): Promise<RunningTestCa> {
  const root = options.root ?? await createRootCa();
  const host = options.host ?? '127.0.0.1';
  const names = options.serverNames ?? [...new Set(['localhost', '127.0.0.1', '::1', host])];
  const serverKey = await generateTestKey('ecdsa-p256');
  const serverCert = await signCertificate(serverKey.keys.publicKey, root, {
    subject: 'CN=test-ca', validityMs: 30 * 24 * 3_600_000,
    dnsNames: names.filter((n) => isIP(n) === 0), ipAddresses: names.filter((n) => isIP(n) !== 0),
  });
  const credentials = grpc.ServerCredentials.createSsl(null, [{
    cert_chain: Buffer.from(`${serverCert.toString('pem')}\n${root.certPem}`), private_key: Buffer.from(serverKey.keyPem),
  }], false);

  const requests: RecordedRequest[] = [];
  let failure: { code: grpc.status; message: string } | undefined;
  let fixedAnswer: string[] | undefined;
  let server: grpc.Server | undefined;
  let port = options.port ?? 0;

  const state = {
    token: options.token ?? DEFAULT_TEST_TOKEN,
    validityMs: options.validityMs,
  };

  const createCertificate: grpc.handleUnaryCall<IstioCertificateRequest, IstioCertificateResponse> = (call, callback) => {
    const request = call.request;
    const base = {
      authorization: call.metadata.get('authorization')[0]?.toString(),
      clusterId: call.metadata.get('clusterid')[0]?.toString(),
      subjectId: request.subject_id,
      validitySeconds: Number(request.validity_duration),
      uris: csrUris(request.csr),
    };
    const fail = (code: grpc.status, details: string): void => {
      requests.push({ ...base, failed: grpc.status[code] });
      callback({ code, details, name: 'TestCaError', message: details });
    };
    if (failure) return fail(failure.code, failure.message);
    if (base.authorization !== `Bearer ${state.token}`) return fail(grpc.status.UNAUTHENTICATED, 'the bearer token is not the one this test CA expects');
    const validityMs = state.validityMs ?? base.validitySeconds * 1000;
    if (!(validityMs > 0)) return fail(grpc.status.INVALID_ARGUMENT, `validity_duration ${request.validity_duration} is not positive`);
    signCsr(root, request.csr, validityMs).then((leaf) => {
      requests.push({ ...base, serial: leaf.serialNumber.toUpperCase() });
      callback(null, { cert_chain: fixedAnswer ?? [leaf.toString('pem'), root.certPem] });
    }, (err: Error) => fail(grpc.status.INVALID_ARGUMENT, `cannot sign the CSR: ${err.message}`));
  };

  async function serve(): Promise<void> {
    const next = new grpc.Server();
    next.addService(certificateService, { CreateCertificate: createCertificate });
    port = await new Promise<number>((resolve, reject) => {
      next.bindAsync(`${bracket(host)}:${port}`, credentials, (err, bound) => (err ? reject(err) : resolve(bound)));
    });
    server = next;
  }

  async function stop(): Promise<void> {
    const current = server;
    server = undefined;
    if (!current) return;
    // tryShutdown waits for calls in flight; forceShutdown after a moment so a test never hangs here.
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => { current.forceShutdown(); resolve(); }, 500);
      current.tryShutdown(() => { clearTimeout(force); resolve(); });
    });
  }

  await serve();
  return {
    get address() { return `${bracket(host)}:${port}`; },
    host,
    get port() { return port; },
    root,
    rootPem: root.certPem,
    get calls() { return requests.length; },
    requests,
    get token() { return state.token; },
    set token(value: string) { state.token = value; },
    get validityMs() { return state.validityMs; },
    set validityMs(value: number | undefined) { state.validityMs = value; },
    failWith(code, message) { failure = code === undefined ? undefined : { code, message: message ?? `test CA told to fail with ${grpc.status[code]}` }; },
    answerWith(chain) { fixedAnswer = chain; },
    get running() { return server !== undefined; },
    stop,
    async restart() { if (!server) await serve(); },
    close: stop,
  };
}
