// A worker thread of `--concurrency N`: its own data plane on the shared ports (SO_REUSEPORT),
// following the same mesh resources; it answers the primary's requests for its counters and
// drains or stops when told (src/workers.ts).
import { parentPort, workerData } from 'node:worker_threads';
import { DataPlane } from './data-plane.js';
import { configureLogging, scope } from '../log/logger.js';
import { ConnectionBudget } from '../proxy/connection-budget.js';
import { releasePooled } from '../proxy/read-buffers.js';
import { trimThread } from './memory-trim.js';
import type { FromWorker, ToWorker, WorkerData } from './workers.js';

const log = scope('default');
const init = workerData as WorkerData;
const port = parentPort!;
configureLogging(init.logOptions);

const connections = new ConnectionBudget({ ...init.connections, worker: init.worker, warn: (message) => log.warn(message) });
const plane = new DataPlane({
  options: init.options, env: init.env, mesh: init.mesh, cwd: init.cwd, reusePort: true, connections, traffic: { memory: init.traffic, worker: init.worker },
});
// As in the primary: one odd socket error must not take this worker's connections down.
process.on('uncaughtException', (err) => {
  plane.stats.uncaughtErrors++;
  log.error(`uncaught error in a worker (it goes on): ${err.message}`, { stack: err.stack });
});
process.on('unhandledRejection', (reason) => {
  plane.stats.uncaughtErrors++;
  log.error(`unhandled rejection in a worker (it goes on): ${String((reason as Error)?.message ?? reason)}`);
});

port.on('message', (m: ToWorker) => {
  switch (m.type) {
    case 'snapshot':
      port.postMessage({ type: 'snapshot', id: m.id, snapshot: plane.snapshot() } satisfies FromWorker);
      break;
    case 'drainInbound':
      plane.drainInbound();
      break;
    case 'drainAll':
      plane.drainAll();
      break;
    case 'closeIdle':
      plane.closeIdle();
      break;
    case 'certificate':
      plane.setCertificate(m.certificate);
      break;
    case 'dnsNames':
      plane.addDnsNames(m.name, m.addresses);
      break;
    case 'trim':
      // The process is quiet after a burst (the primary watches): this isolate's pools, heap and
      // freed pages go back as the primary's do.
      trimThread(releasePooled, m.collect);
      break;
    case 'close':
      void plane.close().then(() => process.exit(0));
      break;
  }
});

try {
  await plane.loadConfiguration();
  await plane.listen();
  port.postMessage({ type: 'ready' } satisfies FromWorker);
} catch (err) {
  port.postMessage({ type: 'failed', message: (err as Error).message } satisfies FromWorker);
  process.exit(1);
}
