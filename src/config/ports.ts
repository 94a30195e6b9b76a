// The agent's fixed ports (DESIGN.md "Ports"); the status port and the proxy metrics port come from
// PROXY_STATUS_PORT and PROXY_METRICS_PORT.
export const PORTS = {
  admin: 15000,
  outbound: 15001,
  inbound: 15006,
  tunnel: 15008,
  debug: 15004,
  agentMetrics: 15020,
  dns: 15053,
  proxyMetrics: 15090,
} as const;
