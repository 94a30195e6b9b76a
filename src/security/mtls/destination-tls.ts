// How a connection from this workload to a destination is originated: plain text, mesh mTLS
// (ISTIO_MUTUAL) or TLS with given certificates, from the DestinationRules, the ServiceEntries and
// the mesh config, by Istio's rules (docs/MTLS-CONFIG.md). Pure: a plan is plain data naming files,
// and its `key` groups connections that may share an upstream pool.
import { resolve } from 'node:path';
import type { MeshConfig } from '../../config/mesh-config.js';
import { credentialFiles } from '../../config/resources/credentials.js';
import type { ClientTls, ResourceSnapshot, ServiceEntry, ServiceEntryEndpoint, Workload } from '../../config/resources/types.js';
import { ROOT_NAMESPACE, TLS_MODE_LABEL, TLS_MODE_MESH } from '../../config/resources/types.js';
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
}

export interface DestinationTlsContext {
  /** The client: this workload. */
  readonly workload: Workload;
  readonly snapshot: Pick<ResourceSnapshot, 'destinationRules' | 'serviceEntries' | 'peerAuthentications'>;
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
  /** The rule's sni, else `outbound_.<port>_._.<host>`; absent when only the address is known. */
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

/** Istio's cluster name for a port of a host, which it also sends as the SNI of mesh mTLS. */
export function istioMutualSni(port: number, host: string): string {
  return `outbound_.${port}_._.${host}`;
}

function ruleRef(m: RuleMatch): string {
  return `DestinationRule ${m.rule.meta.namespace}/${m.rule.meta.name}`;
}

/** The endpoint's identity, Istio's SPIFFE form. */
function endpointIdentity(entry: ServiceEntry, e: ServiceEntryEndpoint, trustDomain: string): string | undefined {
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
  const { destinationRules, serviceEntries, peerAuthentications } = ctx.snapshot;
  const cidrs = ctx.mesh.autoMtlsCidrs.map((text) => ({ text, cidr: parseCidr(text) })).filter((c): c is { text: string; cidr: Cidr } => c.cidr !== undefined);

  /** The entries that describe this destination: by endpoint or address, else by a declared host. */
  function entriesFor(ip: Uint8Array | undefined, names: readonly string[]): ServiceEntry[] {
    return serviceEntries.filter((se) => se.endpoints.some((e) => sameAddress(e.address, ip)) || se.addresses.some((a) => sameAddress(a, ip))
      || se.hosts.some((h) => names.some((n) => hostMatchRank(h, n) !== undefined)));
  }

  /** The entries' identities: their subjectAltNames and their endpoints' service accounts. */
  function entryIdentities(entries: readonly ServiceEntry[]): string[] {
    const out = new Set<string>();
    for (const se of entries) {
      for (const san of se.subjectAltNames) out.add(san);
      for (const e of se.endpoints) {
        const id = endpointIdentity(se, e, trustDomain);
        if (id !== undefined) out.add(id);
      }
    }
    return [...out];
  }

  function planFromRule(m: RuleMatch, tls: ClientTls, facts: ConnectionFacts, entries: readonly ServiceEntry[]): OriginationPlan {
    const rule = ruleRef(m);
    if (tls.mode === 'DISABLE') return withKey({ kind: 'plaintext', reason: `${rule}: tls mode DISABLE` });
    const subjectAltNames = tls.subjectAltNames.length > 0 ? tls.subjectAltNames : entryIdentities(entries);
    const named = isServerName(m.name) ? m.name : undefined;
    if (tls.mode === 'ISTIO_MUTUAL') {
      const sni = tls.sni ?? (named !== undefined ? istioMutualSni(facts.port, named) : undefined);
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

  function autoMtls(facts: ConnectionFacts, ip: Uint8Array | undefined, names: readonly string[], entries: readonly ServiceEntry[], why: string): OriginationPlan {
    if (!ctx.mesh.enableAutoMtls) return withKey({ kind: 'plaintext', reason: `${why}, and auto mTLS is off (enableAutoMtls: false)` });
    // An entry's endpoint for this address says what it speaks; a wider CIDR does not overrule it.
    for (const se of entries) {
      const endpoint = se.endpoints.find((e) => sameAddress(e.address, ip));
      if (!endpoint) continue;
      const ref = entryRef(se);
      if (isMeshExternal(se)) return withKey({ kind: 'plaintext', reason: `${why}, and the endpoint ${facts.address} is of ${ref}, ${OUTSIDE_THE_MESH}` });
      if (endpoint.labels[TLS_MODE_LABEL] !== TLS_MODE_MESH) {
        return withKey({ kind: 'plaintext', reason: `${why}, and the endpoint ${facts.address} of ${ref} has no ${TLS_MODE_LABEL}: ${TLS_MODE_MESH} label` });
      }
      // Istio does not originate mTLS to a namespace whose policy turns it off.
      const server = namespaceInboundMtls(peerAuthentications, se.meta.namespace, rootNamespace);
      if (server.mode === 'DISABLE') {
        return withKey({ kind: 'plaintext', reason: `${why}; ${ref} is in namespace ${se.meta.namespace}, where ${server.decidedBy} says DISABLE` });
      }
      const host = autoSniHost(names, se);
      return withKey({
        kind: 'istio-mutual', ...(host !== undefined ? { sni: istioMutualSni(facts.port, host) } : {}),
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
        kind: 'istio-mutual', ...(host !== undefined ? { sni: istioMutualSni(facts.port, host) } : {}),
        subjectAltNames: entryIdentities(entries), rule: `auto mTLS: autoMtlsCidrs ${block.text}`,
      });
    }
    return withKey({ kind: 'plaintext', reason: `${why}, and ${facts.address} is not a mesh endpoint (no ServiceEntry endpoint with the ${TLS_MODE_LABEL} label, not in autoMtlsCidrs)` });
  }

  return (facts) => {
    const ip = parseIp(facts.address);
    const names = connectionNames(facts.hosts, ctx.workload.namespace, clusterDomain);
    // An address matches a rule written for that address, never a wildcard.
    const candidates = [...names, normalizeHost(facts.address)];
    const entries = entriesFor(ip, names);
    const match = destinationRuleFor(candidates, ctx.workload, destinationRules, serviceEntries, clusterDomain, rootNamespace);
    if (match) {
      const tls = match.rule.portLevelTls.find((p) => p.port === facts.port)?.tls ?? match.rule.tls;
      if (tls) return planFromRule(match, tls, facts, entries);
      return autoMtls(facts, ip, names, entries, `${ruleRef(match)} has no tls for port ${facts.port}`);
    }
    return autoMtls(facts, ip, names, entries, 'no DestinationRule');
  };
}

/** One connection's plan (builds a resolver each time: use createDestinationTlsResolver on a hot path). */
export function planOrigination(facts: ConnectionFacts, ctx: DestinationTlsContext): OriginationPlan {
  return createDestinationTlsResolver(ctx)(facts);
}
