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
  | 'ERR_IPTABLES_DRIFT';       // mesh rules that differ from the expected ones are already present

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
