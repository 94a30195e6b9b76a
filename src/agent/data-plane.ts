// The part of the proxy that carries requests, built once per worker (--concurrency): the capture
// listeners (sidecar) or the Gateway listeners (router), the JWT and policy checks, the mesh
// resources they follow, and the counters and decisions they keep. The primary worker also runs the
// agent's surfaces (src/agent.ts); the others (src/worker-main.ts) report their counters to it.
import { Authorizers } from '../security/ext-authz/authorizers.js';
import { hostname } from 'node:os';
import { getHeapStatistics } from 'node:v8';
import type { Counter } from 'prom-client';
import { PORTS } from '../config/ports.js';
import { MeshResources } from './resources.js';
import { localAddresses } from '../net/local-addresses.js';
import type { EnvValues } from '../config/env/registry.js';
import type { MeshConfig } from '../config/mesh-config.js';
import { readWorkload, serviceEntriesFor, workloadLocality } from '../config/resources/workload.js';
import { outboundTrafficMode, scopeSnapshot } from '../traffic/sidecar-scope.js';
import { accessLogChoices, type AccessLogChoice } from '../config/resources/telemetry-scope.js';
import { SwitchedAccessLog } from '../log/switched-access-log.js';
import { compileAccessLogFormat } from '../log/access-format.js';
import type { DestinationRule, ServiceEntry, Workload } from '../config/resources/types.js';
import { AgentError } from '../errors/agent-error.js';
import { DecisionLog, type Decision, type DecisionStage } from '../gateway/decisions.js';
import { GatewayRouter } from '../gateway/router.js';
import { AccessLog } from '../log/access-log.js';
import { OutlierLog } from '../log/outlier-log.js';
import { scope } from '../log/logger.js';
import type { RequestDecider } from '../proxy/decider.js';
import type { Http1Settings } from '../proxy/http1/connection.js';
import { DEFAULT_REQUEST_LIMITS } from '../proxy/http1/request-parser.js';
import type { ConnectionBudget } from '../proxy/connection-budget.js';
import { CaptureListener } from '../proxy/listener.js';
import type { ProxyOptions } from '../proxy/options.js';
import { canSwitchSocketOwner } from '../proxy/socket-options.js';
import { ProxyStats } from '../proxy/stats.js';
import { TRANSPARENT_OWNER } from '../proxy/upstream.js';
import { inboundDecider } from '../security/inbound-decider.js';
import { JwtAuthenticator, type FetchOutcome } from '../security/jwt/authenticator.js';
import { RequestSecurity } from '../security/request-security.js';
import type { WorkloadCertificate } from '../identity/workload-certificate.js';
import { MeshCredentials } from '../proxy/tls/mesh-credentials.js';
import type { InboundMeshTls, MtlsMode } from '../proxy/tls/inbound-mtls.js';
import type { ResourceSnapshot } from '../config/resources/types.js';
import { createDestinationTlsResolver, type ConnectionFacts as DestinationFacts, type OriginationPlan } from '../security/mtls/destination-tls.js';
import { inboundMtls, inboundMtlsMode, type InboundMtls } from '../security/mtls/peer-authentication.js';
import { outboundDecider, upstreamTls, type UpstreamTlsResolvers } from '../security/mtls/outbound-decider.js';
import { parseIp } from '../security/authz/cidr.js';
import { ClusterManager } from '../traffic/cluster-manager.js';
import { buildClusters, clusterName } from '../traffic/clusters.js';
import { MeshEndpointSource } from '../traffic/endpoint-sources/mesh-source.js';
import { selectedWorkloadEntries } from '../traffic/endpoint-sources/workload-entry-source.js';
import { nodeDnsResolve } from '../traffic/endpoint-sources/node-dns-resolver.js';
import { gatewayClusters, gatewayConnectionClusters, meshRouter, outboundTrafficDecider, type MeshTraffic } from '../traffic/outbound-decider.js';
import { hostNames, ServiceIndex } from '../traffic/service-index.js';
import { meshVirtualServices } from '../traffic/mesh-routes.js';
import { buildL4RouteTable } from '../traffic/l4-routes.js';
import { buildMeshRouteTable } from '../routing/index.js';
import { TrafficStore } from '../traffic/shared-state.js';
import { peerExchangeOf, type PeerExchange } from '../proxy/peer-exchange.js';
import { ownMetadata, type OwnMetadata } from '../metrics/peer-metadata.js';

const log = scope('default');

/**
 * A gateway without a labels file (run by hand, outside Kubernetes) carries the label the spec's
 * ingress gateway has, so the usual Gateway selector `mesh: ingressgateway` picks it.
 */
export const DEFAULT_GATEWAY_LABELS: Readonly<Record<string, string>> = { mesh: 'ingressgateway' };

export interface DataPlaneOptions {
  readonly options: ProxyOptions;
  readonly env: EnvValues;
  readonly mesh: MeshConfig;
  readonly cwd: string;
  /** More than one worker: every listener binds with SO_REUSEPORT. */
  readonly reusePort: boolean;
  /** The process's downstream connections, shared by every worker (connection-budget.ts). */
  readonly connections: ConnectionBudget;
  /** The traffic memory every worker shares (createTrafficMemory) and this worker's place in it (0: the primary). */
  readonly traffic: { readonly memory: SharedArrayBuffer; readonly worker: number };
  /** The primary logs and counts rejected resources and watch failures; the other workers stay quiet. */
  readonly primary?: {
    readonly rejects: Counter<'kind'>;
    readonly onWatchFailure: () => void;
    readonly dns?: { setServiceEntries(entries: readonly ServiceEntry[]): void };
    readonly onJwksFetch?: (fetch: FetchOutcome) => void;
  };
}

/** What a worker reports to the primary: the numbers and decisions behind /stats and the metrics. */
export interface DataPlaneSnapshot {
  readonly stats: ProxyStats;
  readonly counts: ReadonlyMap<DecisionStage, ReadonlyMap<string, number>>;
  readonly decisions: readonly Decision[];
  readonly activeConnections: number;
  readonly unbound: readonly string[];
  /** This thread's V8 heap, bytes (every thread has its own: the process's is their sum). */
  readonly heap: ThreadHeap;
}

export interface ThreadHeap {
  readonly used: number;
  readonly total: number;
}

export function threadHeap(): ThreadHeap {
  const h = getHeapStatistics();
  return { used: h.used_heap_size, total: h.total_heap_size };
}

/** This pod's addresses, re-read at most every few seconds (interfaces rarely change). */
function localAddressCache(): () => ReadonlySet<string> {
  let cached = new Set<string>();
  let at = 0;
  return () => {
    if (Date.now() - at > 5_000) {
      cached = new Set(localAddresses());
      at = Date.now();
    }
    return cached;
  };
}

/** How the data plane reads HTTP/1 requests, from the environment and the mesh config. */
function http1Settings(env: EnvValues, mesh: MeshConfig): Partial<Http1Settings> {
  return {
    forward100Continue: env.ENABLE_100_CONTINUE_HEADERS,
    allowHttp10: env.PILOT_HTTP10,
    normalization: mesh.pathNormalization,
    limits: { ...DEFAULT_REQUEST_LIMITS, maxHeadBytes: env.MESH_MAX_HEADERS_KB * 1024 },
    // 0 turns it off: a timer that never fires.
    headTimeoutMs: env.MESH_REQUEST_HEADERS_TIMEOUT > 0 ? env.MESH_REQUEST_HEADERS_TIMEOUT : 2 ** 31 - 1,
  };
}

/** What the capture listeners are given beside the options: the deciders and mutual TLS. */
interface CaptureParts {
  readonly stats: ProxyStats;
  readonly inbound: RequestDecider;
  readonly outbound?: RequestDecider | undefined;
  readonly meshTls: InboundMeshTls;
  /** Per direction: a Telemetry resource may turn one on or off. */
  readonly accessLogs: AccessLogSwitches | undefined;
  readonly peerExchange: PeerExchange;
}

function captureListeners(o: DataPlaneOptions, { stats, inbound, outbound, meshTls, accessLogs, peerExchange }: CaptureParts): CaptureListener[] {
  const { env, mesh, reusePort, connections } = o;
  const tproxy = env.INBOUND_INTERCEPTION_MODE === 'TPROXY';
  const mark = Number(env.INBOUND_TPROXY_MARK || '1337');
  // 15001 and 15006 draw on one budget: the process's.
  const common = {
    stats,
    connections,
    ownPorts: new Set<number>([...Object.values(PORTS), env.PROXY_STATUS_PORT]),
    localAddresses: localAddressCache(),
    http: http1Settings(env, mesh),
    reusePort,
    peerExchange,
  };
  const outboundLog = { accessLog: accessLogs?.client };
  const inboundLog = { accessLog: accessLogs?.server };
  const listeners = [
    new CaptureListener({ ...common, ...outboundLog, direction: 'outbound', port: PORTS.outbound, host: '::', transparent: false, upstream: { kind: 'direct' }, ...(outbound ? { decider: outbound } : {}) }),
  ];
  if (tproxy) {
    if (process.getuid?.() !== 0 && !canSwitchSocketOwner(TRANSPARENT_OWNER)) {
      log.warn('TPROXY: this sidecar can neither run as root nor create sockets as root (CAP_SETUID, CAP_SETGID): '
        + 'its connections to the app will be captured again by the inbound rules; run it as uid 0 / gid 1337 '
        + '(as Istio does) or grant NET_ADMIN, SETUID and SETGID');
    }
    // One IP_TRANSPARENT socket per family; the IPv6 one only where the kernel has IPv6.
    listeners.push(new CaptureListener({ ...common, ...inboundLog, direction: 'inbound', port: PORTS.inbound, host: '0.0.0.0', transparent: true, upstream: { kind: 'transparent', mark }, decider: inbound, meshTls }));
    listeners.push(new CaptureListener({ ...common, ...inboundLog, direction: 'inbound', port: PORTS.inbound, host: '::', transparent: true, upstream: { kind: 'transparent', mark }, decider: inbound, meshTls }));
  } else {
    listeners.push(new CaptureListener({ ...common, ...inboundLog, direction: 'inbound', port: PORTS.inbound, host: '::', transparent: false, upstream: { kind: 'passthrough' }, decider: inbound, meshTls }));
  }
  return listeners;
}

async function listenAll(listeners: CaptureListener[]): Promise<CaptureListener[]> {
  const bound: CaptureListener[] = [];
  for (const listener of listeners) {
    try {
      await listener.listen();
      bound.push(listener);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // No IPv6 in this kernel or namespace: the IPv4 listeners do.
      if (code === 'EAFNOSUPPORT' || code === 'EADDRNOTAVAIL' || (err as { errno?: number }).errno === 97) {
        log.info(`listener ${listener.name}: IPv6 unavailable, skipped`);
        continue;
      }
      throw new AgentError('ERR_LISTEN', `cannot listen on ${listener.name}: ${(err as Error).message}`, { cause: err });
    }
  }
  return bound;
}

/**
 * The access log: the mesh config's `accessLogFile`; when unset, a gateway logs to stdout (its
 * line is where an operator reads why a request got 401, 403 or 404) and a sidecar does not (as
 * Istio's default mesh config: no cost per request unless asked for).
 */
function accessLogOf(mesh: MeshConfig, type: ProxyOptions['type'], cwd: string): AccessLog | undefined {
  const path = meshLogPath(mesh, type);
  if (path === '') return undefined;
  return new AccessLog({ path, encoding: mesh.accessLogEncoding, format: mesh.accessLogFormat, cwd, hostname: hostname() });
}

function meshLogPath(mesh: MeshConfig, type: ProxyOptions['type']): string {
  return mesh.accessLogFile ?? (type === 'router' ? '/dev/stdout' : '');
}

/**
 * Where a Telemetry's `envoy` provider writes: Istio's built-in provider is a file log on
 * /dev/stdout with the mesh config's accessLogFormat and accessLogEncoding, whatever accessLogFile says.
 */
const ENVOY_PROVIDER_PATH = '/dev/stdout';

/**
 * The access log per Telemetry direction: CLIENT (a sidecar's outbound, and all of a gateway's
 * traffic, as Istio reads the mode for gateways) and SERVER (a sidecar's inbound).
 */
interface AccessLogSwitches {
  readonly client: SwitchedAccessLog;
  readonly server: SwitchedAccessLog;
}

/** Mutual TLS as one configuration version says it. */
interface MtlsInForce {
  readonly snapshot: ResourceSnapshot | undefined;
  readonly inbound: InboundMtls;
  readonly plan: (facts: DestinationFacts) => OriginationPlan;
  /** ServiceEntry hosts that list the address (as an address or an endpoint). */
  hostsFor(address: string): readonly string[];
  /** `DestinationRule ns/name` of a rule that asks for ISTIO_MUTUAL, if any. */
  readonly istioMutualRule: string | undefined;
}

const NO_HOSTS: readonly string[] = Object.freeze([]);
/** Addresses whose DNS names are kept, and names per address: a pod resolving without end cannot grow them. */
const MAX_ANSWERED_ADDRESSES = 4096;
const MAX_NAMES_PER_ADDRESS = 8;

/** One spelling per address (`::ffff:10.0.0.1` and `10.0.0.1` alike, IPv6 in full). */
function addressKey(address: string): string {
  return parseIp(address)?.join('.') ?? address;
}

/** Whether a rule asks for ISTIO_MUTUAL anywhere: its policy, a port of it, a subset or a subset's port. */
function asksIstioMutual(r: DestinationRule): boolean {
  const policies = [r.trafficPolicy, ...r.subsets.map((s) => s.trafficPolicy)];
  return policies.some((p) => p !== undefined && [p, ...p.portLevelSettings].some((s) => s.tls?.mode === 'ISTIO_MUTUAL'));
}

function mtlsOf(snapshot: ResourceSnapshot | undefined, o: DataPlaneOptions, workload: Workload): MtlsInForce {
  const empty = { destinationRules: [], serviceEntries: [], peerAuthentications: [], workloadEntries: [] };
  const snap = snapshot ?? empty;
  const plan = createDestinationTlsResolver({
    workload, snapshot: snap, mesh: o.mesh, cwd: o.cwd, autoSni: o.env.ENABLE_AUTO_SNI,
    trustDomain: o.mesh.trustDomain ?? (o.env.TRUST_DOMAIN || 'cluster.local'), clusterDomain: o.options.domain.replace(/^[^.]*\.svc\./, '') || 'cluster.local',
  });
  const byAddress = new Map<string, string[]>();
  // The entries this workload sees (exportTo), and their endpoints' addresses, WorkloadEntries' included.
  for (const se of serviceEntriesFor(snap.serviceEntries, workload.namespace)) {
    const endpoints = se.workloadSelector !== undefined ? selectedWorkloadEntries(se, snap.workloadEntries) : se.endpoints;
    for (const a of [...se.addresses, ...endpoints.map((e) => e.address)]) {
      const key = addressKey(a);
      const list = byAddress.get(key) ?? [];
      for (const h of se.hosts) if (!list.includes(h)) list.push(h);
      byAddress.set(key, list);
    }
  }
  const mutual = snap.destinationRules.find(asksIstioMutual);
  return {
    snapshot, plan,
    inbound: inboundMtls(snap.peerAuthentications, workload),
    hostsFor: (address) => (byAddress.size === 0 ? NO_HOSTS : byAddress.get(addressKey(address)) ?? NO_HOSTS),
    istioMutualRule: mutual ? `DestinationRule ${mutual.meta.namespace}/${mutual.meta.name} (ISTIO_MUTUAL)` : undefined,
  };
}

export class DataPlane {
  readonly stats = new ProxyStats();
  readonly decisions = new DecisionLog();
  readonly authenticator: JwtAuthenticator;
  readonly security: RequestSecurity;
  /** The mesh config's external authorizers (AuthorizationPolicy CUSTOM). */
  private readonly authorizers: Authorizers;
  readonly router: GatewayRouter | undefined;
  readonly resources: MeshResources;
  /** The mesh config's access log (accessLogFile; a gateway's stdout by default); undefined: none. */
  private readonly meshLog: AccessLog | undefined;
  /** The `envoy` provider's log, opened the first time a Telemetry turns the log on. */
  private envoyLog: AccessLog | undefined;
  /** The log of each direction, switched by the Telemetries in force (undefined: DISABLE_PROXY). */
  private readonly accessLogs: AccessLogSwitches | undefined;
  /** What the Telemetries last made of the log ("client/server from ..."), said once per change. */
  private accessLogSaid = '';
  /** The workload certificate in force in this worker (the primary's identity source sends it). */
  readonly credentials: MeshCredentials;
  private captures: CaptureListener[] = [];
  /** What the resources in force say of mutual TLS, made again when they change. */
  private mtls: MtlsInForce | undefined;
  private readonly warned = new Set<string>();
  /** TLS to upstreams (the sidecar's outbound side, the gateway's routes), as the resources say. */
  private readonly upstreamTls: UpstreamTlsResolvers;
  /** Names the DNS proxy answered for each address (forwarded A/AAAA answers), most recent last. */
  private readonly dnsNames = new Map<string, string[]>();
  /** Replaced whenever what decides an upstream's TLS changes (resources, DNS names): plans made before are forgotten. */
  private tlsGeneration: object = {};
  /** Traffic management: this worker's view of the shared counts, limits and ejections, and the clusters in force. */
  readonly trafficStore: TrafficStore;
  readonly clusters: ClusterManager;
  private readonly outlierLog: OutlierLog | undefined;
  /** Who this pod is, for Istio's standard metrics and the metadata exchange (from its labels and environment, read at start). */
  readonly ownMetadata: OwnMetadata;
  /** What the configuration in force says of outbound traffic (services, their clusters). */
  private traffic: MeshTraffic | undefined;
  readonly clusterDomain: string;

  constructor(private readonly o: DataPlaneOptions) {
    const { env, options, mesh } = o;
    this.credentials = new MeshCredentials(env.COMPLIANCE_POLICY);
    this.meshLog = env.DISABLE_PROXY ? undefined : accessLogOf(mesh, options.type, o.cwd);
    if (!env.DISABLE_PROXY) {
      // Every sink a switch takes has the mesh config's format: the response headers it reads are known now.
      const headers = this.meshLog?.responseHeaders ?? compileAccessLogFormat(mesh.accessLogEncoding, mesh.accessLogFormat).responseHeaders;
      this.accessLogs = { client: new SwitchedAccessLog(headers), server: new SwitchedAccessLog(headers) };
      // Until the resources are read, the mesh config's setting (off: the engines build nothing).
      const initial = this.sinkFor(mesh.defaultAccessLog ? 'on' : 'mesh');
      this.accessLogs.client.set(initial);
      this.accessLogs.server.set(initial);
    }
    this.authenticator = new JwtAuthenticator({
      refreshIntervalMs: env.PILOT_JWT_PUB_KEY_REFRESH_INTERVAL,
      insecureSkipVerify: env.JWKS_RESOLVER_INSECURE_SKIP_VERIFY,
      followSameSchemeRedirects: env.MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS,
      compliancePolicy: env.COMPLIANCE_POLICY,
      log: (level, message) => log[level](`jwks: ${message}`),
      ...(o.primary?.onJwksFetch ? { onFetch: o.primary.onJwksFetch } : {}),
    });
    this.authorizers = new Authorizers(mesh.extAuthzProviders);
    this.security = new RequestSecurity(this.authenticator, this.decisions, this.authorizers, () => this.credentials.current?.certificate.spiffeId);
    this.upstreamTls = upstreamTls({
      plan: (facts) => this.mtlsInForce().plan(facts),
      generation: () => {
        this.mtlsInForce();
        return this.tlsGeneration;
      },
      hostsFor: (address) => {
        const declared = this.mtlsInForce().hostsFor(address);
        const answered = this.dnsNames.get(addressKey(address));
        return answered ? [...declared, ...answered.filter((n) => !declared.includes(n))] : declared;
      },
      contexts: () => this.credentials.current,
      cwd: o.cwd, stats: this.stats.outbound, compliancePolicy: env.COMPLIANCE_POLICY,
      warn: (message) => {
        if (this.warned.has(message)) return;
        this.warned.add(message);
        log.warn(message);
      },
    });
    const workload = readWorkload(o.cwd, env.POD_NAMESPACE || 'default', options.type === 'router' ? DEFAULT_GATEWAY_LABELS : {});
    this.ownMetadata = ownMetadata(env, workload.labels);
    this.router = options.type === 'router' && !env.DISABLE_PROXY
      ? new GatewayRouter({
        peerExchange: peerExchangeOf(this.ownMetadata, !env.PILOT_DISABLE_MX_ALPN),
        stats: this.stats, security: this.security, decisions: this.decisions, http: http1Settings(env, mesh),
        numTrustedProxies: mesh.defaultConfig.numTrustedProxies, host: '::', reusePort: o.reusePort, drainMs: mesh.defaultConfig.drainDurationMs,
        connections: o.connections, tlsHandshakeTimeoutMs: env.MESH_TLS_HANDSHAKE_TIMEOUT, compliancePolicy: env.COMPLIANCE_POLICY, accessLog: this.accessLogs?.client,
        upstreamTls: this.upstreamTls.destination, clusterFor: gatewayClusters(() => this.traffic, this.upstreamTls.cluster),
        connectionClusterFor: gatewayConnectionClusters(() => this.traffic, this.upstreamTls.cluster),
      })
      : undefined;
    this.clusterDomain = o.options.domain.replace(/^[^.]*\.svc\./, '') || 'cluster.local';
    this.trafficStore = new TrafficStore({ memory: o.traffic.memory, worker: o.traffic.worker, warn: (message) => log.warn(message) });
    this.outlierLog = options.outlierLogPath ? new OutlierLog(options.outlierLogPath, o.cwd) : undefined;
    const outlierLog = this.outlierLog;
    this.clusters = new ClusterManager({
      store: this.trafficStore,
      source: new MeshEndpointSource({
        dns: {
          resolve: nodeDnsResolve(),
          log: (e) => {
            if (!o.primary) return;
            if (e.kind === 'failed') log.warn(`DNS: ${e.name}: ${e.error}; the last answer (${e.kept.join(', ') || 'none'}) is kept, asked again in ${Math.round(e.nextMs / 1000)}s`);
            else log.debug(`DNS: ${e.name}: ${e.addresses.join(', ') || 'no address'}, asked again in ${Math.round(e.nextMs / 1000)}s`);
          },
        },
        ...(o.primary ? { log: (message: string) => log.warn(message) } : {}),
      }),
      ...(outlierLog ? { onOutlierEvent: (e: Parameters<OutlierLog['write']>[0]) => outlierLog.write(e) } : {}),
    });
    this.resources = new MeshResources({
      cwd: o.cwd, configSources: mesh.configSources, workload,
      debounceMs: env.FILE_DEBOUNCE_DURATION, security: this.security,
      ...(this.router ? { router: this.router } : {}),
      ...(o.primary ? { rejects: o.primary.rejects, onWatchFailure: o.primary.onWatchFailure } : { quiet: true }),
      ...(o.primary?.dns ? { dns: o.primary.dns } : {}),
      onApplied: (snapshot) => this.applyTraffic(snapshot),
      // A sidecar sees what its Sidecar resource's egress hosts let it see; a gateway is not scoped (Istio).
      ...(this.router ? {} : { scope: (snapshot: ResourceSnapshot) => scopeSnapshot(snapshot, this.resources.workload, this.clusterDomain) }),
    });
  }

  /** The workload's locality (`region/zone/subzone`, '' unknown), from its pod labels. */
  private locality: string | undefined;

  /** Builds the clusters a configuration version asks for, and puts them in force. */
  private applyTraffic(snapshot: ResourceSnapshot): void {
    const workload = this.resources.workload;
    this.applyAccessLog(snapshot, workload);
    if (this.locality === undefined) {
      // The pod's labels are read once: so is its locality, said once at start.
      this.locality = workloadLocality(workload.labels);
      if (this.o.primary) log.info(`locality: ${this.locality === '' ? 'none (no istio-locality or topology label on the pod)' : this.locality}`);
    }
    const set = buildClusters(snapshot, {
      workload, clusterDomain: this.clusterDomain, connectTimeoutMs: this.o.mesh.connectTimeoutMs,
      localityLbSetting: this.o.mesh.localityLbSetting, locality: this.locality,
    });
    const domain = this.clusterDomain;
    // A VirtualService's host is reached by its names and by its service's addresses (Istio lists the VIPs among the virtual host's domains).
    const addresses = new Map<string, string[]>();
    for (const svc of set.services) addresses.set(svc.host, svc.entry.addresses.filter((a) => !a.includes('/')).map((a) => (a.includes(':') ? `[${a}]` : a)));
    const routes = buildMeshRouteTable(meshVirtualServices(snapshot.virtualServices, { workload, clusterDomain: domain }), {
      hostNames: (host) => [...hostNames(host, workload.namespace, domain), ...addresses.get(host) ?? []],
    });
    const l4 = buildL4RouteTable(snapshot.virtualServices, set, { workload, clusterDomain: domain });
    if (this.o.primary) for (const w of [...set.warnings, ...routes.warnings, ...l4?.warnings ?? []]) log.warn(`traffic: ${w}`);
    this.clusters.update(set, snapshot.workloadEntries);
    const clusters = this.clusters;
    // EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY (default true): false puts 503 back into Istio's default retry policy.
    const retry503 = !this.o.env.EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY;
    // REGISTRY_ONLY is a sidecar's (a gateway routes by VirtualService only): its Sidecar's mode, else the mesh config's.
    const registryOnly = !this.router && outboundTrafficMode(snapshot, workload, this.o.mesh.outboundTrafficPolicy) === 'REGISTRY_ONLY';
    this.traffic = {
      set, clusters, retry503, registryOnly,
      index: ServiceIndex.build(set, {
        namespace: workload.namespace, clusterDomain: domain,
        // A service without addresses: a connection to one of its endpoints now takes its port's protocol.
        endpointsOf: (service) => clusters.get(clusterName(service.port.number, undefined, service.host))?.endpoints,
      }),
      route: meshRouter(routes, set, domain, { retry503 }),
      l4,
    };
  }

  /** Puts in force what the Telemetries make of each direction's access log. */
  private applyAccessLog(snapshot: ResourceSnapshot, workload: Workload): void {
    const logs = this.accessLogs;
    if (!logs) return;
    const choices = accessLogChoices(snapshot.telemetries, workload, this.o.mesh.defaultAccessLog);
    logs.client.set(this.sinkFor(choices.client));
    logs.server.set(this.sinkFor(choices.server));
    const where = (c: AccessLogChoice, sink: SwitchedAccessLog): string => (c === 'mesh' ? `${sink.on ? 'on' : 'off'} (mesh config)` : c);
    const said = `access log: client ${where(choices.client, logs.client)}, server ${where(choices.server, logs.server)}`
      + (choices.from.length > 0 ? `, from Telemetry ${choices.from.join(', ')}` : '');
    // Said when a Telemetry decides, and when that changes (not at every start without one).
    if (said !== this.accessLogSaid && (this.accessLogSaid !== '' || choices.from.length > 0) && this.o.primary) log.info(said);
    this.accessLogSaid = said;
  }

  private sinkFor(choice: AccessLogChoice): AccessLog | undefined {
    if (choice === 'off') return undefined;
    if (choice === 'mesh') return this.meshLog;
    // The envoy provider: stdout with the mesh config's format (the mesh config's log when that is stdout too).
    if (this.meshLog !== undefined && meshLogPath(this.o.mesh, this.o.options.type) === ENVOY_PROVIDER_PATH) return this.meshLog;
    this.envoyLog ??= new AccessLog({ path: ENVOY_PROVIDER_PATH, encoding: this.o.mesh.accessLogEncoding, format: this.o.mesh.accessLogFormat, cwd: this.o.cwd, hostname: hostname() });
    return this.envoyLog;
  }

  /** The traffic the configuration in force manages (undefined before the first one). */
  get meshTraffic(): MeshTraffic | undefined {
    return this.traffic;
  }

  /** Reads the mesh resources and applies them (the gateway's listeners open here). */
  loadConfiguration(): Promise<void> {
    return this.resources.start();
  }

  /** The sidecar's capture listeners (a gateway has none: its ports come with the configuration). */
  async listen(): Promise<void> {
    if (this.router) return;
    const self = (): string | undefined => this.credentials.current?.certificate.spiffeId;
    const meshTls: InboundMeshTls = {
      contexts: () => this.credentials.current,
      modeFor: (port) => this.inboundMtlsMode(port),
      handshakeTimeoutMs: this.o.env.MESH_TLS_HANDSHAKE_TIMEOUT,
    };
    const outbound = outboundTrafficDecider({
      base: outboundDecider(this.upstreamTls.destination), traffic: () => this.traffic, tlsFor: this.upstreamTls.cluster, decisions: this.decisions,
    });
    this.captures = await listenAll(captureListeners(this.o, {
      stats: this.stats, inbound: inboundDecider(this.security, this.decisions, self), outbound, meshTls, accessLogs: this.accessLogs,
      peerExchange: peerExchangeOf(this.ownMetadata, !this.o.env.PILOT_DISABLE_MX_ALPN),
    }));
  }

  /** The mutual TLS the resources in force ask for (made once per configuration version). */
  private mtlsInForce(): MtlsInForce {
    const snapshot = this.resources.snapshot;
    if (!this.mtls || this.mtls.snapshot !== snapshot) {
      this.mtls = mtlsOf(snapshot, this.o, this.resources.workload);
      this.tlsGeneration = {};
    }
    return this.mtls;
  }

  /** PeerAuthentication's mode for an inbound connection to `port`. */
  private inboundMtlsMode(port: number): MtlsMode {
    return inboundMtlsMode(this.mtlsInForce().inbound, port);
  }

  /** What asks for a workload certificate (readiness waits for one then): a STRICT PeerAuthentication, an ISTIO_MUTUAL DestinationRule. */
  identityRequiredBy(): string | undefined {
    const m = this.mtlsInForce();
    if (!this.router && m.inbound.anyStrict) return `${m.inbound.decidedBy} (STRICT)`;
    return m.istioMutualRule;
  }

  /** Mutual TLS for /config_dump: inbound modes, the destination rules' TLS, the certificate's identity. */
  mtlsDump(): Record<string, unknown> {
    const m = this.mtlsInForce();
    return {
      inbound: m.inbound,
      identity_required_by: this.identityRequiredBy() ?? null,
      certificate_in_force: this.credentials.current ? this.credentials.current.certificate.spiffeId : null,
    };
  }

  /**
   * A forwarded DNS answer (the primary's DNS proxy): `name` resolved to `addresses`. Those names then
   * meet DestinationRule hosts for connections to the addresses. False: nothing new.
   */
  addDnsNames(name: string, addresses: readonly string[]): boolean {
    const host = name.toLowerCase().replace(/\.$/, '');
    let added = false;
    for (const address of addresses) {
      const key = addressKey(address);
      const names = this.dnsNames.get(key) ?? [];
      if (names.includes(host)) continue;
      names.push(host);
      if (names.length > MAX_NAMES_PER_ADDRESS) names.shift();
      this.dnsNames.delete(key); // most recent last: the first key is the one to forget
      this.dnsNames.set(key, names);
      if (this.dnsNames.size > MAX_ANSWERED_ADDRESSES) this.dnsNames.delete(this.dnsNames.keys().next().value!);
      added = true;
    }
    if (added) this.tlsGeneration = {};
    return added;
  }

  /** Puts a workload certificate in force for new connections (one OpenSSL refuses: logged, the last one kept). */
  setCertificate(certificate: WorkloadCertificate | undefined): void {
    try {
      this.credentials.set(certificate);
    } catch (err) {
      log.error(`workload certificate ${certificate?.serial ?? ''} from ${certificate?.source ?? '?'} not put in force: ${(err as Error).message}`);
    }
  }

  get listeners(): readonly CaptureListener[] {
    return this.captures;
  }

  get activeConnections(): number {
    return this.captures.reduce((n, l) => n + l.activeConnections, this.router?.activeConnections ?? 0);
  }

  /** Gateway ports not bound (readiness). */
  unbound(): string[] {
    return this.router?.unbound() ?? [];
  }

  /** SIGTERM: inbound (and the gateway) stop accepting, idle keep-alive connections close; outbound goes on. */
  drainInbound(): void {
    for (const l of this.captures.filter((x) => x.name.startsWith('inbound'))) {
      void l.stopAccepting();
      l.drainHttp();
    }
    void this.router?.close();
  }

  /** /drain_listeners: every listener stops accepting. */
  drainAll(): void {
    for (const l of this.captures) {
      void l.stopAccepting();
      l.drainHttp();
    }
    void this.router?.close();
  }

  /** Closes idle connections everywhere (EXIT_ON_ZERO_ACTIVE_CONNECTIONS, after MINIMUM_DRAIN_DURATION). */
  closeIdle(): void {
    for (const l of this.captures) l.closeIdle();
    this.router?.closeIdle();
  }

  /** Shutdown: stop accepting, end every connection now (the drain is over). */
  async close(): Promise<void> {
    this.resources.close();
    this.clusters.close();
    this.authenticator.close();
    this.authorizers.close();
    const stopped = Promise.allSettled([...this.captures.map((l) => l.stopAccepting()), this.router?.shutdown()]);
    for (const l of this.captures) l.closeAll();
    await stopped;
    // After the connections: the lines of the requests they ended are written too.
    this.meshLog?.close();
    this.envoyLog?.close();
    this.outlierLog?.close();
  }

  snapshot(): DataPlaneSnapshot {
    return {
      stats: this.stats, counts: this.decisions.counts, decisions: this.decisions.recent(),
      activeConnections: this.activeConnections, unbound: this.unbound(), heap: threadHeap(),
    };
  }
}
