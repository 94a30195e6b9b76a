// The agent's view of the mesh resources: read from the configSources directories, watched, and
// applied to what uses them — the JWT and policy checks (sidecar and gateway), the gateway's
// listeners and routes, the DNS proxy's names. A rejected resource never displaces the last good one.
import type { Counter } from 'prom-client';
import { formatRejection, formatWarning } from '../config/resources/format.js';
import { isResourceKind } from '../config/resources/validate.js';
import { sourceDirectories, watchResources } from '../config/resources/watcher.js';
import { authorizationPoliciesFor, gatewaysFor, requestAuthenticationsFor, serviceEntriesFor } from '../config/resources/workload.js';
import type { Rejection, ResourceSnapshot, ServiceEntry, Workload } from '../config/resources/types.js';
import { planListeners } from '../gateway/listener-plan.js';
import type { GatewayRouter } from '../gateway/router.js';
import { buildRouteTable } from '../routing/index.js';
import { buildGatewayL4Table } from '../routing/gateway-l4-table.js';
import { scope } from '../log/logger.js';
import type { RequestSecurity } from '../security/request-security.js';

const log = scope('default');

/** The last rejections kept for /config_dump. */
const KEPT_REJECTIONS = 50;

export interface MeshResourcesOptions {
  readonly cwd: string;
  readonly configSources: readonly string[];
  readonly workload: Workload;
  readonly debounceMs: number;
  readonly security: RequestSecurity;
  readonly router?: GatewayRouter;
  readonly dns?: { setServiceEntries(entries: readonly ServiceEntry[]): void };
  /** Counts rejections (the primary worker); the others neither count nor log them. */
  readonly rejects?: Counter<'kind'>;
  readonly onWatchFailure?: () => void;
  readonly quiet?: boolean;
  /** After each configuration version is in force (the traffic clusters are built from it), as `scope` made it. */
  readonly onApplied?: (snapshot: ResourceSnapshot) => void;
  /**
   * What this workload sees of a snapshot (a sidecar: its Sidecar resource's egress hosts); absent:
   * all of it. Everything but /config_dump's list of loaded resources reads the scoped snapshot.
   */
  readonly scope?: (snapshot: ResourceSnapshot) => ResourceSnapshot;
}

export class MeshResources {
  private current: ResourceSnapshot | undefined;
  private loadedSnapshot: ResourceSnapshot | undefined;
  private readonly rejections: Rejection[] = [];
  /** Rejections by kind since start (/stats `config.rejects.<kind>`). */
  readonly rejectCounts = new Map<string, number>();
  private watcher: { close(): void } | undefined;
  private applying: Promise<void> = Promise.resolve();
  /** Warnings of the policies in force already logged (not repeated at each version). */
  private readonly saidOnce = new Set<string>();
  readonly directories: readonly string[];

  constructor(private readonly o: MeshResourcesOptions) {
    this.directories = sourceDirectories(o.configSources, o.cwd);
  }

  /** Reads every source, applies it, then watches for changes. Resolves once the first state is in force. */
  async start(): Promise<void> {
    const watcher = await watchResources({
      directories: [...this.directories],
      cwd: this.o.cwd,
      defaultNamespace: this.o.workload.namespace,
      debounceMs: this.o.debounceMs,
      onChange: (snapshot) => { void this.apply(snapshot); },
      onRejection: (r) => this.reject(r),
      // Accepted with a warning (a field Istio ignores too, a route to a subset nobody defines...): said once.
      onWarning: (w) => { if (!this.o.quiet) log.warn(`configuration: ${formatWarning(w)}`); },
      onWatchFailure: (dir, err) => {
        this.o.onWatchFailure?.();
        if (!this.o.quiet) log.warn(`cannot watch ${dir} (${err.message}): polling it instead`);
      },
    });
    this.watcher = watcher;
    await this.apply(watcher.snapshot());
  }

  /** The resources in force for this workload (scoped). */
  get snapshot(): ResourceSnapshot | undefined {
    return this.current;
  }

  /** Every resource loaded, before scoping (for /config_dump). */
  get loaded(): ResourceSnapshot | undefined {
    return this.loadedSnapshot;
  }

  /** The ServiceEntries in force that this workload sees (exportTo): the DNS proxy answers their names only. */
  get visibleServiceEntries(): readonly ServiceEntry[] {
    return this.current ? serviceEntriesFor(this.current.serviceEntries, this.o.workload.namespace) : [];
  }

  /** The workload the resources are selected for (namespace, labels). */
  get workload(): Workload {
    return this.o.workload;
  }

  get lastRejections(): readonly Rejection[] {
    return this.rejections;
  }

  close(): void {
    this.watcher?.close();
  }

  private reject(r: Rejection): void {
    if (this.o.quiet) return;
    log.warn(`configuration rejected: ${formatRejection(r)}`);
    // Only known kinds become labels: a file cannot mint new metric series.
    const kind = r.kind !== undefined && isResourceKind(r.kind) ? r.kind : 'unknown';
    this.o.rejects?.inc({ kind });
    this.rejectCounts.set(kind, (this.rejectCounts.get(kind) ?? 0) + 1);
    this.rejections.push(r);
    if (this.rejections.length > KEPT_REJECTIONS) this.rejections.shift();
  }

  /** Applies snapshots one after the other (a listener change takes a moment). */
  private apply(snapshot: ResourceSnapshot): Promise<void> {
    this.applying = this.applying.then(() => this.applyNow(snapshot)).catch((err: Error) => {
      log.error(`applying configuration version ${snapshot.version} failed: ${err.message}`, { stack: err.stack });
    });
    return this.applying;
  }

  private async applyNow(loaded: ResourceSnapshot): Promise<void> {
    const { workload } = this.o;
    const snapshot = this.o.scope ? this.o.scope(loaded) : loaded;
    const rules = requestAuthenticationsFor(snapshot, workload).flatMap((r) => r.jwtRules);
    const policies = authorizationPoliciesFor(snapshot, workload);
    // A CUSTOM policy whose provider cannot be used...: said once, by the primary worker.
    for (const warning of this.o.security.configure(rules, policies)) {
      if (!this.o.quiet && !this.saidOnce.has(warning)) log.warn(`authorization: ${warning}`);
      this.saidOnce.add(warning);
    }
    // Istio's DNS table holds the services visible to the proxy's namespace only.
    this.o.dns?.setServiceEntries(serviceEntriesFor(snapshot.serviceEntries, workload.namespace));
    if (this.o.router) {
      const gateways = gatewaysFor(snapshot, workload);
      const plan = planListeners(gateways, this.o.cwd);
      const table = buildRouteTable(gateways, snapshot.virtualServices);
      const l4 = buildGatewayL4Table(gateways, snapshot.virtualServices);
      for (const warning of [...plan.warnings, ...table.warnings, ...l4.warnings]) log.warn(`gateway: ${warning}`);
      await this.o.router.update(table, plan.ports, l4);
    }
    this.current = snapshot;
    this.loadedSnapshot = loaded;
    this.o.onApplied?.(snapshot);
    if (this.o.quiet) return;
    log.info(`configuration version ${snapshot.version} in force: ${summary(loaded)}; `
      + `${rules.length} JWT rule(s) and ${policies.length} authorization policy(ies) select this workload`);
  }
}

function summary(s: ResourceSnapshot): string {
  return `${s.gateways.length} Gateway, ${s.virtualServices.length} VirtualService, ${s.serviceEntries.length} ServiceEntry, `
    + `${s.workloadEntries.length} WorkloadEntry, ${s.destinationRules.length} DestinationRule, ${s.requestAuthentications.length} RequestAuthentication, `
    + `${s.authorizationPolicies.length} AuthorizationPolicy, ${s.peerAuthentications.length} PeerAuthentication, ${s.sidecars.length} Sidecar, ${s.telemetries.length} Telemetry`;
}

/** The loaded resources as /config_dump lists them. */
export function loadedResources(s: ResourceSnapshot | undefined): { kind: string; namespace: string; name: string; file: string }[] {
  if (!s) return [];
  return [...s.gateways, ...s.virtualServices, ...s.serviceEntries, ...s.workloadEntries, ...s.destinationRules, ...s.requestAuthentications,
    ...s.authorizationPolicies, ...s.peerAuthentications, ...s.sidecars, ...s.telemetries]
    .map((r) => ({ kind: r.meta.kind, namespace: r.meta.namespace, name: r.meta.name, file: `${r.meta.origin.file}[${r.meta.origin.index}]` }));
}
