// The shape of one environment variable's declaration, and the TypeScript types derived from the table.

export type VarType = 'bool' | 'string' | 'int' | 'duration' | 'float';

/**
 * What this agent does with a variable:
 * - `honoured`: read under src/ (outside src/config/env) and acted on;
 * - `istiod`: a control-plane setting (controllers, caches, webhooks, the CA server, xDS pushes)
 *   that Istio's own pilot-agent ignores too;
 * - `not-applicable`: it configures machinery this agent does not have (Envoy, xDS, a Go runtime);
 * - `not-supported`: in Istio it changes what the proxy does; this agent does not implement it (yet).
 */
export type VarEffect = 'honoured' | 'istiod' | 'not-applicable' | 'not-supported';

/** A declaration as written in variables.ts. Durations are written in Go syntax (`5m0s`). */
export interface VarSpec {
  readonly name: string;
  readonly type: VarType;
  readonly default: boolean | string | number;
  readonly description: string;
  /** The only values accepted (string variables whose spec lists them). */
  readonly allowed?: readonly string[];
  /** Comma-separated list whose every item must be one of these. */
  readonly allowedList?: readonly string[];
  /** The smallest and largest value accepted (int and float variables). */
  readonly range?: readonly [number, number];
  /**
   * This agent's own addition, in neither spec 2.3 nor Istio (the docs mark it so). Such variables
   * add behaviour behind an opt-in, or bound what Envoy bounds by other means (a time-out, a limit
   * on connections): their defaults keep what Istio does or what Envoy would do.
   */
  readonly agentOwn?: true;
  /** What this agent does with it. */
  readonly here: VarEffect;
  /** Honoured: how, where the Meaning column (Istio's) does not say it all. */
  readonly note?: string;
  /** Not honoured: why, as it ends the warning "X is set but has no effect here: ..." (required but for `istiod`). */
  readonly why?: string;
  /**
   * Not honoured: the value that asks for exactly what this agent does anyway; set to it, the
   * variable is as good as honoured and no warning is given.
   */
  readonly matches?: boolean | string | number;
}

/** The run-time value of each type. Durations are milliseconds. */
export interface ValueOf {
  bool: boolean;
  string: string;
  int: number;
  duration: number;
  float: number;
}

type Checked<T extends VarSpec> = T & (T['type'] extends 'bool' ? { default: boolean }
  : T['type'] extends 'int' | 'float' ? { default: number } : { default: string });

/** Identity function whose only job is to check each declaration's default against its type. */
export function defineVariables<const T extends readonly VarSpec[]>(
  specs: { [K in keyof T]: Checked<T[K]> },
): T {
  return specs as unknown as T;
}
