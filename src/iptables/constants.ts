// Names and numbers of the capture rules, in one place. Every mesh rule lives in a MESH_ chain or is
// a jump into one from a built-in chain: that is what clean-up and drift detection rely on.

export const CHAIN = {
  inbound: 'MESH_INBOUND',
  redirect: 'MESH_REDIRECT',
  inRedirect: 'MESH_IN_REDIRECT',
  output: 'MESH_OUTPUT',
  outputDns: 'MESH_OUTPUT_DNS',
  divert: 'MESH_DIVERT',
  tproxy: 'MESH_TPROXY',
  drop: 'MESH_DROP',
  /**
   * ip6tables filter, this agent's own (not in Istio): refuses the inbound TCP the IPv4 capture
   * would take when no IPv6 capture rules are written (`--block-inbound-ipv6`, inbound-block.ts).
   */
  inboundBlock: 'MESH_INBOUND_BLOCK',
} as const;

export const MESH_CHAIN_PREFIX = 'MESH_';

export const BUILTIN_CHAINS: ReadonlySet<string> = new Set(['INPUT', 'OUTPUT', 'FORWARD', 'PREROUTING', 'POSTROUTING']);

/** Tables in the order the restore input lists them. */
export const TABLES = ['filter', 'mangle', 'nat', 'raw'] as const;
export type Table = (typeof TABLES)[number];

/** Where the agent's DNS proxy listens; captured DNS is redirected here. */
export const DNS_PROXY_PORT = 15053;
/**
 * Source of the proxy's (and its probes') connections to the app in REDIRECT mode: the rules exempt
 * it, so those connections are not captured again. The rules use the CIDR forms.
 */
export const INBOUND_PASSTHROUGH_ADDR_V4 = '127.0.0.6';
export const INBOUND_PASSTHROUGH_ADDR_V6 = '::6';
export const INBOUND_PASSTHROUGH_V4 = `${INBOUND_PASSTHROUGH_ADDR_V4}/32`;
export const INBOUND_PASSTHROUGH_V6 = `${INBOUND_PASSTHROUGH_ADDR_V6}/128`;
export const LOCALHOST_V4 = '127.0.0.1/32';
export const LOCALHOST_V6 = '::1/128';
