// A child process for the namespace test: the admin API on its real port (15000 by default) with
// stand-in hooks, so `pilot-agent request` (which only talks to 15000/15004/15020/15021) can reach
// it. Prints `listening <port>` once bound; POST /quitquitquit makes it exit 0.
import { Registry } from 'prom-client';
import { startAdminServer } from '../../../src/admin/server.js';
import { configureLogging, defaultLogOptions } from '../../../src/log/logger.js';
import { registerProxyMetrics } from '../../../src/metrics/proxy-metrics.js';
import { ProxyStats } from '../../../src/proxy/stats.js';
import { packRequest } from '../../../src/proxy/standard-series.js';

configureLogging({ ...defaultLogOptions, targets: ['stderr'] });
const stats = new ProxyStats();
stats.outbound.cxTotal = 3;
stats.outbound.recordResponse(200, 2);
stats.outbound.standard.recordHttp('', '', '', packRequest(200, undefined, 0), 2, 0, 0, 0, 0);
const proxyRegistry = new Registry();
registerProxyMetrics(proxyRegistry, stats);
const port = Number(process.argv[2] ?? 15000);
const server = await startAdminServer({
  port,
  enabled: true,
  hooks: {
    stats,
    proxyRegistry,
    state: () => 'LIVE',
    serverInfo: () => ({ version: 'test' }),
    configDump: () => ({}),
    listeners: () => [{ name: 'virtualOutbound', address: '0.0.0.0', port: 15001 }],
    clusters: () => [],
    drainListeners: () => undefined,
    setHealthcheckFailed: () => undefined,
    decisions: () => [],
    extraStats: () => [],
    quit: () => {
      void server?.close().then(() => process.exit(0));
    },
  },
});
process.stdout.write(`listening ${server?.port ?? 'nowhere'}\n`);
