// How a connection from this workload to a destination is originated: plain text, mesh mTLS
// (ISTIO_MUTUAL) or TLS with given certificates, from the DestinationRules, the ServiceEntries and
// the mesh config, by Istio's rules (docs/MTLS-CONFIG.md). Pure: a plan is plain data naming files,
// and its `key` groups connections that may share an upstream pool. Only the ServiceEntries this
// workload sees (exportTo) count, their endpoints being their own or the WorkloadEntries they select.
import { resolve } from 'node:path';
import type { MeshConfig } from '../../config/mesh-config.js';
import { credentialFiles } from '../../config/resources/credentials.js';
import type { ClientTls, ResourceSnapshot, ServiceEntry, ServiceEntryEndpoint, Workload } from '../../config/resources/types.js';
import { hasMeshTlsLabel, ROOT_NAMESPACE, TLS_MODE_LABEL, TLS_MODE_MESH } from '../../config/resources/types.js';
import { serviceEntriesFor } from '../../config/resources/workload.js';
import { mergeTrafficPolicy } from '../../traffic/clusters.js';
import { selectedWorkloadEntries } from '../../traffic/endpoint-sources/workload-entry-source.js';
import { cidrContains, parseCidr, parseIp, type Cidr } from '../authz/cidr.js';
import { destinationRuleFor, type RuleMatch } from './destination-rules.js';
import { connectionNames, DEFAULT_CLUSTER_DOMAIN, hostMatchRank, isServerName, normalizeHost } from './host-names.js';
import { namespaceInboundMtls } from './peer-authentication.js';

/** What is known of one outbound connection. */
export interface ConnectionFacts {
  /** The original destination address. */
  readonly address: string;
  /** The original destination port (the service port). */
  readonly port: number;
  /** Names known for the destination, most authoritative first: ServiceEntry hosts for the address, DNS answers, the HTTP Host. */
  readonly hosts: readonly string[];
  /**
   * Set when the connection goes to an endpoint of a traffic cluster (`address` is the endpoint's,
   * `port` the cluster's service port, never the endpoint's): Istio originates TLS per cluster, so
   * the cluster's merged tls decides, and `hosts` is not read (the cluster's host is its name).
   */
  readonly cluster?: ClusterTlsFacts | undefined;
  /** With `cluster`: the endpoint's labels, as its source gave them (a DNS-resolved endpoint has no address of its own to find it by). */
  readonly endpointLabels?: Readonly<Record<string, string>> | undefined;
}

/** What of a traffic cluster shapes its TLS (a ClusterSpec of src/traffic/spec.ts has these fields). */
export interface ClusterTlsFacts {
  /** `outbound|<port>|<subset>|<host>`, for the reasons given. */
  readonly name: string;
  /** The service's host (lower-case): the SNI's name and the entries' key. */
  readonly host: string;
  readonly subset?: string | undefined;
  /** The cluster's policy after Istio's merge (rule, port level, subset, subset's port level): its tls; absent, auto mTLS decides. */
  readonly policy: { readonly tls?: ClientTls | undefined; readonly rule?: string | undefined };
}

export interface DestinationTlsContext {
  /** The client: this workload. */
  readonly workload: Workload;
  readonly snapshot: Pick<ResourceSnapshot, 'destinationRules' | 'serviceEntries' | 'peerAuthentications' | 'workloadEntries'>;
  readonly mesh: Pick<MeshConfig, 'enableAutoMtls' | 'autoMtlsCidrs'>;
  /** Resolves relative certificate paths and credential directories. */
  readonly cwd: string;
  /** For ServiceEntry endpoints' serviceAccount identities; default cluster.local. */
  readonly trustDomain?: string;
  /** For Kubernetes short names; default cluster.local. */
  readonly clusterDomain?: string;
  readonly rootNamespace?: string;
  /**
   * ENABLE_AUTO_SNI (default true): a SIMPLE / MUTUAL rule without `sni` sends the destination's
   * name as SNI. False: no SNI then (the certificate is still checked against that name).
   */
  readonly autoSni?: boolean;
}

/** No TLS: a rule says DISABLE, or nothing says the destination speaks mesh mTLS. */
export interface PlaintextPlan {
  readonly kind: 'plaintext';
  readonly reason: string;
  readonly key: string;
}

/** Mesh mTLS with this workload's own certificate (ISTIO_MUTUAL). */
export interface IstioMutualPlan {
  readonly kind: 'istio-mutual';
  /** The rule's sni, else `outbound_.<service port>_.<subset>_.<host>`; absent when only the address is known. */
  readonly sni?: string;
  /** Identities accepted from the server; empty: any certificate of the mesh CA. */
  readonly subjectAltNames: readonly string[];
  /** What decided: `DestinationRule ns/name`, `auto mTLS: ServiceEntry ns/name endpoint label`, `auto mTLS: autoMtlsCidrs <cidr>`. */
  readonly rule: string;
  readonly key: string;
}

/** TLS (SIMPLE) or mutual TLS with given files (MUTUAL), from a DestinationRule. */
export interface TlsFilesPlan {
  readonly kind: 'simple' | 'mutual';
  /** The rule's sni, else the matched name (unless ENABLE_AUTO_SNI is false); absent when only the address is known. */
  readonly sni?: string;
  /**
   * The name the server's certificate must hold when the rule lists no subjectAltNames: the SNI, or
   * the matched name when no SNI is sent (ENABLE_AUTO_SNI false); absent: the chain alone.
   */
  readonly verifyName?: string;
  /** Absolute path; absent: the system roots (or nothing, with insecureSkipVerify). */
  readonly caCertificates?: string;
  /** Absolute paths, `mutual` only. */
  readonly clientCertificate?: string;
  readonly privateKey?: string;
  /** Set when the files are a credential's (./etc/mesh/credentials/<name>/); its ca.crt may be absent: then the system roots. */
  readonly credentialName?: string;
  /** Identities accepted from the server; empty: the certificate must name `sni`, as Node checks by default. */
  readonly subjectAltNames: readonly string[];
  readonly insecureSkipVerify: boolean;
  readonly rule: string;
  readonly key: string;
}

/** Plain data (JSON-serialisable); `key` is equal for plans whose connections may share an upstream pool. */
export type OriginationPlan = PlaintextPlan | IstioMutualPlan | TlsFilesPlan;

type Unkeyed<T> = T extends unknown ? Omit<T, 'key'> : never;

/** The upstream-pool key: everything that shapes the handshake, nothing that only explains it. */
function withKey(plan: Unkeyed<OriginationPlan>): OriginationPlan {
  if (plan.kind === 'plaintext') return { ...plan, key: 'plaintext' };
  const p = plan as Partial<TlsFilesPlan>;
  const key = JSON.stringify([plan.kind, p.sni ?? '', p.subjectAltNames ?? [], p.caCertificates ?? '', p.clientCertificate ?? '',
    p.privateKey ?? '', p.insecureSkipVerify ?? false,
    // A name checked without being sent (ENABLE_AUTO_SNI false): connections for another name are another pool.
    ...(p.verifyName !== undefined && p.verifyName !== p.sni ? [p.verifyName] : [])]);
  return { ...plan, key } as OriginationPlan;
}

/** Istio's cluster name for a service port (and subset) of a host, which it also sends as the SNI of mesh mTLS. */
export function istioMutualSni(port: number, host: string, subset?: string): string {
  return `outbound_.${port}_.${subset ?? ''}_.${host}`;
}

function ruleRef(m: RuleMatch): string {
  return `DestinationRule ${m.rule.meta.namespace}/${m.rule.meta.name}`;
}

/** What the planner reads of an endpoint: a ServiceEntry's own, or a WorkloadEntry it selects. */
type MeshEndpoint = Pick<ServiceEntryEndpoint, 'address' | 'labels' | 'serviceAccount'>;

/** The endpoint's identity, Istio's SPIFFE form (a selected WorkloadEntry is of the entry's namespace). */
function endpointIdentity(entry: ServiceEntry, e: MeshEndpoint, trustDomain: string): string | undefined {
  return e.serviceAccount === undefined ? undefined : `spiffe://${trustDomain}/ns/${entry.meta.namespace}/sa/${e.serviceAccount}`;
}

/** Istio's `location` (MESH_EXTERNAL when unset): auto mTLS is never originated to a service outside the mesh. */
function isMeshExternal(se: ServiceEntry): boolean {
  return se.location !== 'MESH_INTERNAL';
}

function entryRef(se: ServiceEntry): string {
  return `ServiceEntry ${se.meta.namespace}/${se.meta.name}`;
}

const OUTSIDE_THE_MESH = 'location MESH_EXTERNAL (the default): Istio never originates auto mTLS to a service outside the mesh; '
  + 'a DestinationRule tls can (say location: MESH_INTERNAL for a mesh workload)';

function sameAddress(a: string, bytes: Uint8Array | undefined): boolean {
  const b = parseIp(a);
  return b !== undefined && bytes !== undefined && b.length === bytes.length && b.every((v, i) => v === bytes[i]);
}

/**
 * Resolves plans for one configuration: build once per snapshot (CIDRs parsed, defaults filled),
 * call per connection. The cost per call grows with the rules and entries (a scan, no index yet).
 */
export function createDestinationTlsResolver(ctx: DestinationTlsContext): (facts: ConnectionFacts) => OriginationPlan {
  const clusterDomain = ctx.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
  const trustDomain = ctx.trustDomain ?? DEFAULT_CLUSTER_DOMAIN;
  const rootNamespace = ctx.rootNamespace ?? ROOT_NAMESPACE;
  const { destinationRules, peerAuthentications } = ctx.snapshot;
  // As Istio scopes its registry per proxy: an entry not exported here names, verifies and decides nothing.
  const serviceEntries = serviceEntriesFor(ctx.snapshot.serviceEntries, ctx.workload.namespace);
  // Each entry's endpoints, once: its own, or the WorkloadEntries its workloadSelector picks (never both: refused at load).
  const endpointsOf = new Map<ServiceEntry, readonly MeshEndpoint[]>(serviceEntries.map((se) =>
    [se, se.workloadSelector !== undefined ? selectedWorkloadEntries(se, ctx.snapshot.workloadEntries) : se.endpoints]));
  const endpoints = (se: ServiceEntry): readonly MeshEndpoint[] => endpointsOf.get(se) ?? se.endpoints;
  const cidrs = ctx.mesh.autoMtlsCidrs.map((text) => ({ text, cidr: parseCidr(text) })).filter((c): c is { text: string; cidr: Cidr } => c.cidr !== undefined);

  /** The entries that describe this destination: by endpoint or address, else by a declared host. */
  function entriesFor(ip: Uint8Array | undefined, names: readonly string[]): ServiceEntry[] {
    return serviceEntries.filter((se) => endpoints(se).some((e) => sameAddress(e.address, ip)) || se.addresses.some((a) => sameAddress(a, ip))
      || se.hosts.some((h) => names.some((n) => hostMatchRank(h, n) !== undefined)));
  }

  /** The entries' identities: their subjectAltNames and their endpoints' service accounts. */
  function entryIdentities(entries: readonly ServiceEntry[]): string[] {
    const out = new Set<string>();
    for (const se of entries) {
      for (const san of se.subjectAltNames) out.add(san);
      for (const e of endpoints(se)) {
        const id = endpointIdentity(se, e, trustDomain);
        if (id !== undefined) out.add(id);
      }
    }
    return [...out];
  }

  /** A DestinationRule's tls (`rule` names it) for a connection known by `name` to `port` (and `subset`). */
  function planFromTls(rule: string, name: string, tls: ClientTls, port: number, subset: string | undefined, entries: readonly ServiceEntry[]): OriginationPlan {
    if (tls.mode === 'DISABLE') return withKey({ kind: 'plaintext', reason: `${rule}: tls mode DISABLE` });
    const subjectAltNames = tls.subjectAltNames.length > 0 ? tls.subjectAltNames : entryIdentities(entries);
    const named = isServerName(name) ? name : undefined;
    if (tls.mode === 'ISTIO_MUTUAL') {
      const sni = tls.sni ?? (named !== undefined ? istioMutualSni(port, named, subset) : undefined);
      return withKey({ kind: 'istio-mutual', ...(sni !== undefined ? { sni } : {}), subjectAltNames, rule });
    }
    // Istio's auto SNI (ENABLE_AUTO_SNI): without a rule's sni, the destination's name is sent.
    const sni = tls.sni ?? (ctx.autoSni === false ? undefined : named);
    const verifyName = sni ?? named;
    const files: { caCertificates?: string; clientCertificate?: string; privateKey?: string; credentialName?: string } = {};
    if (tls.credentialName !== undefined) {
      const c = credentialFiles(ctx.cwd, tls.credentialName);
      files.credentialName = tls.credentialName;
      if (!tls.insecureSkipVerify) files.caCertificates = c.ca;
      if (tls.mode === 'MUTUAL') Object.assign(files, { clientCertificate: c.cert, privateKey: c.key });
    } else {
      if (tls.caCertificates !== undefined) files.caCertificates = resolve(ctx.cwd, tls.caCertificates);
      if (tls.mode === 'MUTUAL') Object.assign(files, { clientCertificate: resolve(ctx.cwd, tls.clientCertificate!), privateKey: resolve(ctx.cwd, tls.privateKey!) });
    }
    return withKey({
      kind: tls.mode === 'MUTUAL' ? 'mutual' : 'simple', ...(sni !== undefined ? { sni } : {}),
      ...(verifyName !== undefined ? { verifyName } : {}), ...files,
      subjectAltNames, insecureSkipVerify: tls.insecureSkipVerify, rule,
    });
  }

  /** The SNI host for auto mTLS: a known name (the entry's, when an entry decided), never an address. */
  function autoSniHost(names: readonly string[], entry: ServiceEntry | undefined): string | undefined {
    if (entry) {
      return names.find((n) => isServerName(n) && entry.hosts.some((h) => hostMatchRank(h, n) !== undefined))
        ?? entry.hosts.find(isServerName);
    }
    return names.find(isServerName);
  }

  /**
   * What an entry says of the endpoint: the labels of its endpoint (its own or a WorkloadEntry) at
   * the address, else, for a cluster's endpoint, the endpoint's own labels (an entry with endpoints
   * made it from one of them); undefined: the entry has no such endpoint.
   */
  function entryLabels(se: ServiceEntry, ip: Uint8Array | undefined, clusterLabels: Readonly<Record<string, string>> | undefined): Readonly<Record<string, string>> | undefined {
    const own = endpoints(se);
    return own.find((e) => sameAddress(e.address, ip))?.labels ?? (clusterLabels !== undefined && own.length > 0 ? clusterLabels : undefined);
  }

  function autoMtls(facts: ConnectionFacts, ip: Uint8Array | undefined, names: readonly string[], entries: readonly ServiceEntry[], why: string,
    subset?: string): OriginationPlan {
    if (!ctx.mesh.enableAutoMtls) return withKey({ kind: 'plaintext', reason: `${why}, and auto mTLS is off (enableAutoMtls: false)` });
    // An entry's endpoint for this address says what it speaks; a wider CIDR does not overrule it.
    for (const se of entries) {
      const labels = entryLabels(se, ip, facts.cluster !== undefined ? facts.endpointLabels : undefined);
      if (!labels) continue;
      const ref = entryRef(se);
      if (isMeshExternal(se)) return withKey({ kind: 'plaintext', reason: `${why}, and the endpoint ${facts.address} is of ${ref}, ${OUTSIDE_THE_MESH}` });
      if (!hasMeshTlsLabel(labels)) {
        return withKey({ kind: 'plaintext', reason: `${why}, and the endpoint ${facts.address} of ${ref} has no ${TLS_MODE_LABEL}: ${TLS_MODE_MESH} label` });
      }
      // Istio does not originate mTLS to a namespace whose policy turns it off.
      const server = namespaceInboundMtls(peerAuthentications, se.meta.namespace, rootNamespace);
      if (server.mode === 'DISABLE') {
        return withKey({ kind: 'plaintext', reason: `${why}; ${ref} is in namespace ${se.meta.namespace}, where ${server.decidedBy} says DISABLE` });
      }
      const host = autoSniHost(names, se);
      return withKey({
        kind: 'istio-mutual', ...(host !== undefined ? { sni: istioMutualSni(facts.port, host, subset) } : {}),
        subjectAltNames: entryIdentities([se]), rule: `auto mTLS: ${ref} endpoint label`,
      });
    }
    // A destination only MESH_EXTERNAL entries describe is outside the mesh, whatever block its address is in.
    const external = entries.length > 0 && entries.every(isMeshExternal) ? entries[0] : undefined;
    const block = ip === undefined ? undefined : cidrs.find((c) => cidrContains(c.cidr, ip));
    if (block && external) {
      return withKey({ kind: 'plaintext', reason: `${why}; ${facts.address} is in autoMtlsCidrs ${block.text}, but the destination is ${entryRef(external)}, ${OUTSIDE_THE_MESH}` });
    }
    if (block) {
      const host = autoSniHost(names, undefined);
      return withKey({
        kind: 'istio-mutual', ...(host !== undefined ? { sni: istioMutualSni(facts.port, host, subset) } : {}),
        subjectAltNames: entryIdentities(entries), rule: `auto mTLS: autoMtlsCidrs ${block.text}`,
      });
    }
    return withKey({ kind: 'plaintext', reason: `${why}, and ${facts.address} is not a mesh endpoint (no ServiceEntry endpoint with the ${TLS_MODE_LABEL} label, not in autoMtlsCidrs)` });
  }

  /** A cluster's connection: its merged tls, else auto mTLS; its service's own entries (those declaring its host) only. */
  function planForCluster(facts: ConnectionFacts, cluster: ClusterTlsFacts, ip: Uint8Array | undefined): OriginationPlan {
    const { host, subset, policy } = cluster;
    const entries = serviceEntries.filter((se) => se.hosts.includes(host));
    if (policy.tls) return planFromTls(policy.rule ?? cluster.name, host, policy.tls, facts.port, subset, entries);
    const why = policy.rule !== undefined ? `${policy.rule} has no tls for ${cluster.name}` : `no DestinationRule tls for ${cluster.name}`;
    return autoMtls(facts, ip, [host], entries, why, subset);
  }

  return (facts) => {
    const ip = parseIp(facts.address);
    if (facts.cluster !== undefined) return planForCluster(facts, facts.cluster, ip);
    const names = connectionNames(facts.hosts, ctx.workload.namespace, clusterDomain);
    // An address matches a rule written for that address, never a wildcard.
    const candidates = [...names, normalizeHost(facts.address)];
    const entries = entriesFor(ip, names);
    const match = destinationRuleFor(candidates, ctx.workload, destinationRules, serviceEntries, clusterDomain, rootNamespace);
    if (match) {
      // Istio's merge for the port: a port-level entry replaces the rule's settings, tls included (absent: none).
      const tls = mergeTrafficPolicy(match.rule.trafficPolicy, undefined, facts.port).tls;
      if (tls) return planFromTls(ruleRef(match), match.name, tls, facts.port, undefined, entries);
      return autoMtls(facts, ip, names, entries, `${ruleRef(match)} has no tls for port ${facts.port}`);
    }
    return autoMtls(facts, ip, names, entries, 'no DestinationRule');
  };
}

/** One connection's plan (builds a resolver each time: use createDestinationTlsResolver on a hot path). */
export function planOrigination(facts: ConnectionFacts, ctx: DestinationTlsContext): OriginationPlan {
  return createDestinationTlsResolver(ctx)(facts);
}
