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
  | 'ERR_NOT_IMPLEMENTED'  // a command whose capability has not landed yet
  | 'ERR_REQUEST_FAILED'   // `request`: transport error or unsuccessful status
  | 'ERR_WAIT_TIMEOUT'     // `wait`: the proxy did not become ready in time
  | 'ERR_IPTABLES_VALIDATION';

const exitCodes: Record<ErrorCode, ExitCode> = {
  ERR_USAGE: ExitCode.usage,
  ERR_ENV_VALUE: ExitCode.usage,
  ERR_NOT_IMPLEMENTED: ExitCode.failure,
  ERR_REQUEST_FAILED: ExitCode.failure,
  ERR_WAIT_TIMEOUT: ExitCode.failure,
  ERR_IPTABLES_VALIDATION: ExitCode.validationFailed,
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
