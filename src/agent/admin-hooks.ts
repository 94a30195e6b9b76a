// What the admin API (15000) shows and does, read from the running agent: Istio's node id,
// listeners and clusters under the names operators' dashboards expect, the config dump with the
// loaded resources, the request decisions.
import type { Registry } from 'prom-client';
import type { AdminHooks, StatValue } from '../admin/server.js';
import type { Agent } from './running-agent.js';
import { PORTS } from '../config/ports.js';
import { loadedResources } from './resources.js';
import { buildInfo } from '../version/build-info.js';
import { certsDump } from '../admin/certs.js';
import { clusterConfigDump } from '../traffic/cluster-dump.js';
import { meshVirtualServices } from '../traffic/mesh-routes.js';

/** Istio's node id: `sidecar~<ip>~<pod>.<namespace>~<domain>`. */
function nodeId(agent: Agent): string {
  const e = agent.env;
  return `${agent.options.type}~${e.INSTANCE_IP}~${e.POD_NAME}.${e.POD_NAMESPACE}~${agent.options.domain}`;
}

/** The Kubernetes cluster domain of the proxy's `--domain` (`ns.svc.cluster.local` → `cluster.local`), as the data plane reads it. */
function clusterDomainOf(domain: string): string {
  return domain.replace(/^[^.]*\.svc\./, '') || 'cluster.local';
}

/**
 * The routes in force for /config_dump: a gateway's VirtualServices as loaded; a sidecar's, the mesh
 * VirtualServices as it applies them (bound to `mesh`, exported to its namespace, hosts expanded,
 * matches narrowed to those that can apply to this workload).
 */
function routesInForce(agent: Agent): readonly unknown[] {
  const snapshot = agent.plane.resources.snapshot;
  if (snapshot === undefined) return [];
  if (agent.plane.router) return snapshot.virtualServices;
  return meshVirtualServices(snapshot.virtualServices, { workload: agent.plane.resources.workload, clusterDomain: clusterDomainOf(agent.options.domain) });
}

/** The traffic clusters in force for /config_dump: spec, resolved policy, endpoints and their health. */
function trafficClustersDump(agent: Agent): Record<string, unknown>[] {
  return agent.plane.clusters.all().map((c) => clusterConfigDump(c.spec, c.endpoints.map((e) => e.spec), c.status()));
}

/** What the admin API shows and does, read from the running agent. */
export function adminHooks(agent: Agent, proxyRegistry: Registry): AdminHooks {
  // The dual-stack `::` listeners are shown as Istio's virtualOutbound/virtualInbound (0.0.0.0_15001),
  // the names operators' dashboards and `/stats` filters expect.
  const listenerInfo = () => [
    ...agent.plane.listeners.map((l) => ({ name: l.name, address: l.address === '::' ? '0.0.0.0' : l.address, port: l.port })),
    ...(agent.plane.router?.info() ?? []).map((l) => ({ name: l.name, address: l.address, port: l.port })),
  ];
  const clusterInfo = () => (['outbound', 'inbound'] as const).map((direction) => {
    const s = agent.stats.of(direction);
    return {
      name: direction === 'outbound' ? 'PassthroughCluster' : 'InboundPassthroughCluster',
      address: direction === 'outbound' ? 'original destination' : agent.env.INBOUND_INTERCEPTION_MODE === 'TPROXY' ? 'client address (TPROXY)' : '127.0.0.6',
      // What went to traffic clusters is theirs (their own lines): the passthrough cluster has the rest.
      port: 0, cxActive: s.upstreamCxActive - s.routedCxActive, cxTotal: s.upstreamCxTotal - s.routedCxTotal,
      rqTotal: s.rqTotal - s.routedRqTotal, connectFail: s.upstreamCxConnectFail - s.routedCxConnectFail,
    };
  });
  return {
    stats: agent.stats,
    proxyRegistry,
    state: agent.state,
    serverInfo: () => ({
      version: buildInfo().version,
      state: agent.state(),
      uptime_current_epoch: `${Math.round((performance.timeOrigin + performance.now() - agent.startedAt) / 1000)}s`,
      node: { id: nodeId(agent), cluster: agent.options.serviceCluster },
      command_line_options: {
        concurrency: agent.concurrency, log_level: agent.options.logLevels.level,
        component_log_level: Object.fromEntries(agent.options.logLevels.components), drain_time: `${agent.mesh.defaultConfig.drainDurationMs / 1000}s`,
        termination_drain_time: `${agent.mesh.defaultConfig.terminationDrainDurationMs / 1000}s`,
      },
    }),
    configDump: () => ({
      bootstrap: {
        node: { id: nodeId(agent), cluster: agent.options.serviceCluster },
        admin: { port: PORTS.admin }, proxy_type: agent.options.type, domain: agent.options.domain,
        mesh_config_source: agent.mesh.source, proxy_config: agent.mesh.defaultConfig,
        interception_mode: agent.env.INBOUND_INTERCEPTION_MODE || 'REDIRECT',
      },
      listeners: listenerInfo(),
      routes: routesInForce(agent),
      // The passthrough clusters (original destination), then the traffic clusters in force.
      clusters: [...clusterInfo().map((c) => ({ ...c, type: 'ORIGINAL_DST' })), ...trafficClustersDump(agent)],
      loaded_resources: loadedResources(agent.plane.resources.loaded),
      configuration_version: agent.plane.resources.snapshot?.version ?? 0,
      rejected_resources: agent.plane.resources.lastRejections,
      jwks: agent.plane.authenticator.keyStatus(),
      identity: identityDump(agent),
      mtls: agent.plane.mtlsDump(),
      mesh_config: agent.mesh.raw,
    }),
    listeners: listenerInfo,
    clusters: clusterInfo,
    trafficClusters: () => agent.plane.clusters.statuses(),
    drainListeners: agent.drainListeners,
    setHealthcheckFailed: agent.setHealthcheckFailed,
    quit: agent.quit,
    decisions: () => agent.decisions.recent(),
    extraStats: () => extraStats(agent),
    refresh: agent.refresh,
    heap: agent.heap,
    certs: () => certsDump(agent.identity.state(), Date.now()),
  };
}

/** Decision counts (`http.<listener kind>.decisions.<stage>.<outcome>`) for /stats. */
/** The identity in /config_dump: where it comes from, what is held, until when. */
function identityDump(agent: Agent): Record<string, unknown> {
  const s = agent.identity.state();
  const held = s.state === 'ready' || s.state === 'error' ? s.certificate : undefined;
  return {
    state: s.state,
    ...(s.state === 'pending' || s.state === 'error' ? { message: s.message } : {}),
    ...(held ? {
      spiffe_id: held.spiffeId, serial: held.serial, source: held.source,
      not_before: new Date(held.notBeforeMs).toISOString(), not_after: new Date(held.notAfterMs).toISOString(),
    } : {}),
  };
}

function extraStats(agent: Agent): StatValue[] {
  const out: StatValue[] = [];
  const kind = agent.plane.router ? 'gateway' : 'inbound';
  for (const [stage, byOutcome] of agent.decisions.counts) {
    for (const [outcome, value] of byOutcome) out.push({ name: `http.${kind}.decisions.${stage}.${outcome}`, value });
  }
  for (const [kind, value] of agent.plane.resources.rejectCounts) out.push({ name: `config.rejects.${kind}`, value });
  return out;
}
