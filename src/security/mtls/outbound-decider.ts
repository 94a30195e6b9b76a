// The sidecar's outbound traffic: to the original destination, as always, but over TLS where the
// configuration says the destination wants it: mutual TLS with the workload's certificate to a
// destination in the mesh (a DestinationRule's ISTIO_MUTUAL, or auto mTLS), a DestinationRule's
// SIMPLE / MUTUAL TLS to a service outside it. What to do is a plan (destination-tls.ts, pure);
// this turns a plan into the TLS settings the engine applies, once per plan and certificate.
// Never a silent downgrade: when TLS is asked for and cannot be had, the request is answered 503
// (a TCP connection reset) with the reason in the access log and /debug/decisions.
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { SecureContext } from 'node:tls'; // the module: on first use (process.getBuiltinModule)
import { NO_DESTINATION, type ConnectionFacts, type LocalReply, type RequestDecider, type Verdict } from '../../proxy/decider.js';
import { authorityOf, hasHeader } from '../../proxy/request-view.js';
import type { Endpoint } from '../../proxy/socket-options.js';
import type { DirectionStats } from '../../proxy/stats.js';
import { MESH_ALPN_HTTP, MESH_ALPN_TCP } from '../../proxy/tls/mesh-alpn.js';
import type { MeshContexts } from '../../proxy/tls/mesh-credentials.js';
import type { UpstreamTls } from '../../proxy/tls/origination.js';
import type { EndpointSpec } from '../../traffic/spec.js';
import type { ClusterTlsFacts, ConnectionFacts as DestinationFacts, OriginationPlan } from './destination-tls.js';
import { compliantTls } from '../compliance.js';

/** Where the outbound side learns what it needs; every function cheap (asked per request). */
export interface OutboundTlsSource {
  /** The plan for a destination (the resources in force). */
  plan(facts: DestinationFacts): OriginationPlan;
  /** Changes (as an object) whenever the resources in force change: the plans made before are forgotten. */
  generation(): object;
  /** The names known for an address (ServiceEntry hosts, names the DNS proxy answered with it). */
  hostsFor(address: string): readonly string[];
  /** The workload's certificate contexts; undefined: no identity held. */
  contexts(): MeshContexts | undefined;
  /** Where relative file paths of a DestinationRule are read from. */
  readonly cwd: string;
  readonly stats: DirectionStats;
  /** A TLS plan that cannot be carried out (no identity, an unreadable file): said once per reason. */
  warn(message: string): void;
  /** COMPLIANCE_POLICY, laid over a DestinationRule's SIMPLE / MUTUAL TLS (mesh mTLS has it from its credentials). */
  readonly compliancePolicy?: string;
}

const XFCC = 'x-forwarded-client-cert';
const STRIP_XFCC: readonly string[] = [XFCC];

/** An authority without its port (`[v6]:80` → `v6`), lower-cased; undefined for none. */
function hostOfAuthority(a: string): string | undefined {
  if (a === '') return undefined;
  if (a.charCodeAt(0) === 0x5b /* [ */) {
    const end = a.indexOf(']');
    return (end > 0 ? a.slice(1, end) : a.slice(1)).toLowerCase();
  }
  const colon = a.lastIndexOf(':');
  return (colon >= 0 ? a.slice(0, colon) : a).toLowerCase();
}

function noTls(reason: string): LocalReply {
  return {
    kind: 'reply', status: 503, flag: 'UF', details: `upstream_tls_unavailable{${reason.replace(/\s+/g, '_')}}`,
    body: `upstream connect error or disconnect/reset before headers. reset reason: connection failure, transport failure reason: ${reason}\n`,
  };
}

/**
 * How to reach `dst` (named `host` by the request, if it is HTTP): TLS settings, plaintext
 * (undefined), or a 503 when TLS is asked for and cannot be had. Shared by the sidecar's outbound
 * side and the gateway's routes.
 */
export type UpstreamTlsFor = (dst: Endpoint, host: string | undefined, http: boolean) => UpstreamTls | LocalReply | undefined;

/** A cluster's service port: its TLS is planned by it (port-level settings, the SNI), never by the endpoint's port. */
export type ClusterTls = ClusterTlsFacts & { readonly port: number };

/** What of a cluster's endpoint its TLS reads (an EndpointSpec of src/traffic/spec.ts). */
export type ClusterEndpoint = Pick<EndpointSpec, 'address' | 'labels'>;

/**
 * How to reach an endpoint of a traffic cluster: the TLS Istio gives that cluster (its merged tls,
 * a subset's replacing the rule's, on its service port), else auto mTLS by the endpoint's labels.
 */
export type ClusterTlsFor = (cluster: ClusterTls, endpoint: ClusterEndpoint, http: boolean) => UpstreamTls | LocalReply | undefined;

/** The original destination's TLS (`destination`) and a cluster endpoint's (`cluster`), sharing their settings. */
export interface UpstreamTlsResolvers {
  readonly destination: UpstreamTlsFor;
  readonly cluster: ClusterTlsFor;
}

export function upstreamTlsFor(src: OutboundTlsSource): UpstreamTlsFor {
  return upstreamTls(src).destination;
}

export function upstreamTls(src: OutboundTlsSource): UpstreamTlsResolvers {
  /** TLS settings per plan key, certificate serial and protocol: the same object while nothing changed (the pool's key). */
  const made = new Map<string, UpstreamTls | LocalReply>();
  /** The same, by plan object and protocol: what the hot path asks (no key to build and compare per request). */
  let madeForPlan = { http: new WeakMap<object, UpstreamTls | LocalReply>(), tcp: new WeakMap<object, UpstreamTls | LocalReply>() };
  const fileContexts = new Map<string, SecureContext>();
  let madeFor: MeshContexts | undefined;

  const readPem = (path: string): Buffer => readFileSync(isAbsolute(path) ? path : join(src.cwd, path));

  const settings = (plan: Exclude<OriginationPlan, { kind: 'plaintext' }>, http: boolean): UpstreamTls | LocalReply => {
    const contexts = src.contexts();
    if (contexts !== madeFor) { // a new certificate: new connections use it, pooled ones go on
      forgetMade();
      madeFor = contexts;
    }
    const forPlan = http ? madeForPlan.http : madeForPlan.tcp;
    const same = forPlan.get(plan);
    if (same) return same;
    const key = `${plan.key}|${http ? 'h' : 't'}`;
    const known = made.get(key);
    if (known) {
      forPlan.set(plan, known);
      return known;
    }
    let result: UpstreamTls | LocalReply;
    if (plan.kind === 'istio-mutual') {
      if (!contexts) {
        src.stats.mtlsNoIdentity++;
        src.warn(`mutual TLS is required by ${plan.rule} but this workload holds no certificate: such requests get 503`);
        return noTls(`ISTIO_MUTUAL required by ${plan.rule}, no workload certificate`);
      }
      result = {
        kind: 'tls', key: `${key}|${contexts.certificate.serial}`, secureContext: contexts.context, servername: plan.sni,
        alpn: http ? MESH_ALPN_HTTP : MESH_ALPN_TCP, subjectAltNames: plan.subjectAltNames, insecureSkipVerify: false, mesh: true,
        describe: `ISTIO_MUTUAL (${plan.rule})`,
      };
    } else {
      let context = fileContexts.get(plan.key);
      if (!context) {
        try {
          context = process.getBuiltinModule('node:tls').createSecureContext(compliantTls(src.compliancePolicy ?? '', {
            minVersion: 'TLSv1.2',
            ...(plan.caCertificates ? { ca: readPem(plan.caCertificates) } : {}),
            ...(plan.clientCertificate ? { cert: readPem(plan.clientCertificate) } : {}),
            ...(plan.privateKey ? { key: readPem(plan.privateKey) } : {}),
          }));
        } catch (err) {
          src.warn(`TLS of ${plan.rule} cannot be set up: ${(err as Error).message}: such requests get 503`);
          return noTls(`${plan.kind.toUpperCase()} TLS of ${plan.rule}: ${(err as Error).message}`);
        }
        fileContexts.set(plan.key, context);
      }
      result = {
        kind: 'tls', key, secureContext: context, servername: plan.sni, verifyName: plan.verifyName, alpn: http ? ['http/1.1'] : [],
        subjectAltNames: plan.subjectAltNames, insecureSkipVerify: plan.insecureSkipVerify, mesh: false,
        describe: `${plan.kind.toUpperCase()} (${plan.rule})`,
      };
    }
    made.set(key, result);
    forPlan.set(plan, result);
    return result;
  };
  const forgetMade = (): void => {
    made.clear();
    madeForPlan = { http: new WeakMap(), tcp: new WeakMap() };
  };

  // Plans per destination and Host, while the resources stay the same: working one out scans the
  // rules, and the hot path asks for every request.
  const plans = new Map<string, OriginationPlan>();
  /** A cluster's plans by endpoint (spec objects are the keys: frozen, replaced when they change). */
  let clusterPlans = new WeakMap<ClusterTls, WeakMap<ClusterEndpoint, OriginationPlan>>();
  let plansFor: object | undefined;
  let last: LastPlan | undefined;
  // The cluster endpoints asked for last, in parallel arrays compared by identity: a cluster's
  // requests go round its endpoints, and a single last-one entry missed on every request with three
  // (two WeakMap lookups each).
  const recentCluster = new Array<ClusterTls | undefined>(RECENT_CLUSTER_PLANS).fill(undefined);
  const recentEndpoint = new Array<ClusterEndpoint | undefined>(RECENT_CLUSTER_PLANS).fill(undefined);
  const recentPlan = new Array<OriginationPlan | undefined>(RECENT_CLUSTER_PLANS).fill(undefined);
  let recentNext = 0;
  /** The resources' generation, the plans of an older one forgotten. */
  const sameGeneration = (): object => {
    const generation = src.generation();
    if (generation !== plansFor || plans.size >= MAX_CACHED_PLANS) {
      // New resources: plans, and the TLS settings made from files, are made again (a DestinationRule's
      // files are read when the configuration that names them comes into force).
      if (generation !== plansFor) {
        forgetMade();
        fileContexts.clear();
        clusterPlans = new WeakMap();
        recentCluster.fill(undefined);
        recentEndpoint.fill(undefined);
        recentPlan.fill(undefined);
      }
      plans.clear();
      plansFor = generation;
    }
    return generation;
  };
  const cluster: ClusterTlsFor = (c, endpoint, http) => {
    sameGeneration();
    let plan: OriginationPlan | undefined;
    for (let k = 0; k < RECENT_CLUSTER_PLANS; k++) {
      if (recentEndpoint[k] === endpoint && recentCluster[k] === c) {
        plan = recentPlan[k]!;
        break;
      }
    }
    if (plan === undefined) {
      let byEndpoint = clusterPlans.get(c);
      if (byEndpoint === undefined) clusterPlans.set(c, (byEndpoint = new WeakMap()));
      plan = byEndpoint.get(endpoint);
      if (plan === undefined) {
        plan = src.plan({ address: endpoint.address, port: c.port, hosts: [c.host], cluster: c, endpointLabels: endpoint.labels });
        byEndpoint.set(endpoint, plan);
      }
      recentCluster[recentNext] = c;
      recentEndpoint[recentNext] = endpoint;
      recentPlan[recentNext] = plan;
      recentNext = (recentNext + 1) % RECENT_CLUSTER_PLANS;
    }
    return plan.kind === 'plaintext' ? undefined : settings(plan, http);
  };
  const destination: UpstreamTlsFor = (dst, host, http) => {
    const generation = sameGeneration();
    // The last plan asked for: a run of requests to one destination (a keep-alive connection, a
    // client and its service) finds it without building the key below.
    const { address, port } = dst;
    let plan: OriginationPlan | undefined;
    if (last !== undefined && last.generation === generation && last.address === address && last.port === port && last.host === host) {
      plan = last.plan;
    } else {
      const cacheKey = `${address}|${port}|${host ?? ''}`;
      plan = plans.get(cacheKey);
      if (!plan) {
        const known = src.hostsFor(address);
        const hosts = host !== undefined && !known.includes(host) ? [host, ...known] : known;
        plan = src.plan({ address, port, hosts });
        plans.set(cacheKey, plan);
      }
      last = { generation, address, port, host, plan };
    }
    return plan.kind === 'plaintext' ? undefined : settings(plan, http);
  };
  return { destination, cluster };
}

interface LastPlan {
  readonly generation: object;
  readonly address: string;
  readonly port: number;
  readonly host: string | undefined;
  readonly plan: OriginationPlan;
}

/** Destinations (and Hosts) whose plan is kept; past it the cache starts again (a client spraying Hosts cannot grow it). */
const MAX_CACHED_PLANS = 4096;
/** Cluster endpoint plans looked up by identity before the WeakMaps (a round of a small cluster's endpoints). */
const RECENT_CLUSTER_PLANS = 8;

export function outboundDecider(tlsFor: UpstreamTlsFor): RequestDecider {
  // The last authority and its host: the same Host request after request is lower-cased once.
  let lastAuthority = '';
  let lastHost: string | undefined;
  return {
    decide: (req, dst): Verdict => {
      if (!dst) return NO_DESTINATION;
      const authority = authorityOf(req);
      if (authority !== lastAuthority) {
        lastHost = hostOfAuthority(authority);
        lastAuthority = authority;
      }
      const tls = tlsFor(dst, lastHost, true);
      if (tls?.kind === 'reply') return tls;
      // Envoy's default for an outbound connection manager: a client's XFCC is not passed on.
      // One literal per case (no spreads: this is every outbound request).
      const { address, port } = dst;
      if (hasHeader(req, XFCC)) {
        return tls ? { kind: 'forward', address, port, removeHeaders: STRIP_XFCC, tls } : { kind: 'forward', address, port, removeHeaders: STRIP_XFCC };
      }
      return tls ? { kind: 'forward', address, port, tls } : { kind: 'forward', address, port };
    },
    connectionUpstream: (facts: ConnectionFacts) => tlsFor(facts.destination, undefined, false),
  };
}
