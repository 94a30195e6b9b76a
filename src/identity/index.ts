// The identity API the agent and the data plane use; the modules behind it are free to change.
export type { IdentitySource, IdentityState, WorkloadCertificate } from './workload-certificate.js';
export {
  identitySourceFrom, chooseIdentitySource, noIdentitySource, tokenFileFor,
  type IdentityChoice, type IdentityEnvValues,
} from './provider.js';
export { createFileSource, type FileSourceOptions } from './file-source.js';
export { createCaSource, type CaSourceOptions } from './ca-source.js';
export { requestCertificate, parseCaAddress, type CaClientOptions, type CertificateRequest } from './ca-client.js';
export { checkCertificateSet, type CertificateSetText, type CertificateSetNames } from './check.js';
export { generateKeyAndCsr, keyOptionsFromEnv, type KeyOptions, type KeyAlgorithm } from './csr.js';
export { formatSpiffeId, parseSpiffeId, principalOf, workloadSpiffeId, type SpiffeIdentity } from './spiffe.js';
export { renewalDelayMs, renewalTimeMs, jitteredGraceRatio, backoffDelayMs, type RotationPolicy, type BackoffPolicy } from './rotation.js';
export { writeOutputCerts } from './output-certs.js';
export { CERT_CHAIN_FILE, KEY_FILE, ROOT_CERT_FILE, certFilePaths } from './cert-files.js';
