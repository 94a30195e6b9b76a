// One error base for the whole agent. `code` is a closed set so callers and tests can branch on it;
// `exitCode` is what the CLI returns when the error reaches it.

/** Process exit codes of every command (README "Exit codes"). */
export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 2,
  validationFailed: 126,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export type ErrorCode =
  | 'ERR_USAGE'            // unknown command or flag, bad flag value
  | 'ERR_ENV_VALUE'        // an environment variable that does not parse, where it is fatal
  | 'ERR_REQUEST_FAILED'   // `request`: transport error or unsuccessful status
  | 'ERR_WAIT_TIMEOUT'     // `wait`: the proxy did not become ready in time
  | 'ERR_IPTABLES_VALIDATION'
  | 'ERR_CONFIG'                // the mesh config or PROXY_CONFIG does not parse
  | 'ERR_LISTEN'                // a listener could not bind its port
  | 'ERR_COMMAND_NOT_FOUND'     // an external program (iptables, ip, nsenter) is not installed
  | 'ERR_COMMAND_FAILED'        // an external program exited non-zero
  | 'ERR_IPTABLES_UNAVAILABLE'  // no iptables binary for the family/backend
  | 'ERR_IPTABLES_PERMISSION'   // no CAP_NET_ADMIN (not root, or the capability was dropped)
  | 'ERR_IPTABLES_KERNEL'       // a table, match or target the kernel does not provide (module missing)
  | 'ERR_IPTABLES_APPLY'        // a restore or policy route failed; what this call added was rolled back
  | 'ERR_IPTABLES_DRIFT'        // mesh rules that differ from the expected ones are already present
  | 'ERR_SPIFFE_ID'             // a SPIFFE id that is malformed or cannot be formed from the environment
  | 'ERR_CERT_FILE'             // a certificate or key file that cannot be read
  | 'ERR_CERT_PEM'              // text that is not the PEM it should be (certificate, key)
  | 'ERR_CERT_KEY_MISMATCH'     // the private key does not belong to the leaf certificate
  | 'ERR_CERT_EXPIRED'          // a certificate past its notAfter
  | 'ERR_CERT_NOT_YET_VALID'    // a certificate before its notBefore
  | 'ERR_CERT_UNTRUSTED'        // the chain does not lead to a root of the trust bundle
  | 'ERR_CERT_NO_SPIFFE_ID'     // the leaf has no (or more than one) spiffe:// URI SAN
  | 'ERR_KEY_OPTIONS'           // key algorithm, curve or size variables that cannot be honoured
  | 'ERR_CA_TOKEN'              // the token file for the CA cannot be read
  | 'ERR_CA_UNREACHABLE'        // no answer from the CA (connection, TLS, time-out)
  | 'ERR_CA_REFUSED'            // the CA answered with a gRPC error status
  | 'ERR_CA_EMPTY_CHAIN';       // the CA answered without a certificate

const exitCodes: Record<ErrorCode, ExitCode> = {
  ERR_USAGE: ExitCode.usage,
  ERR_ENV_VALUE: ExitCode.usage,
  ERR_REQUEST_FAILED: ExitCode.failure,
  ERR_WAIT_TIMEOUT: ExitCode.failure,
  ERR_IPTABLES_VALIDATION: ExitCode.validationFailed,
  ERR_CONFIG: ExitCode.failure,
  ERR_LISTEN: ExitCode.failure,
  ERR_COMMAND_NOT_FOUND: ExitCode.failure,
  ERR_COMMAND_FAILED: ExitCode.failure,
  ERR_IPTABLES_UNAVAILABLE: ExitCode.failure,
  ERR_IPTABLES_PERMISSION: ExitCode.failure,
  ERR_IPTABLES_KERNEL: ExitCode.failure,
  ERR_IPTABLES_APPLY: ExitCode.failure,
  ERR_IPTABLES_DRIFT: ExitCode.failure,
  ERR_SPIFFE_ID: ExitCode.failure,
  ERR_CERT_FILE: ExitCode.failure,
  ERR_CERT_PEM: ExitCode.failure,
  ERR_CERT_KEY_MISMATCH: ExitCode.failure,
  ERR_CERT_EXPIRED: ExitCode.failure,
  ERR_CERT_NOT_YET_VALID: ExitCode.failure,
  ERR_CERT_UNTRUSTED: ExitCode.failure,
  ERR_CERT_NO_SPIFFE_ID: ExitCode.failure,
  ERR_KEY_OPTIONS: ExitCode.usage,
  ERR_CA_TOKEN: ExitCode.failure,
  ERR_CA_UNREACHABLE: ExitCode.failure,
  ERR_CA_REFUSED: ExitCode.failure,
  ERR_CA_EMPTY_CHAIN: ExitCode.failure,
};

export class AgentError extends Error {
  readonly code: ErrorCode;
  readonly exitCode: ExitCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AgentError';
    this.code = code;
    this.exitCode = exitCodes[code];
  }
}

/** A caller's mistake on the command line: names the flag, the value and what is accepted. */
export function usageError(message: string): AgentError {
  return new AgentError('ERR_USAGE', message);
}
