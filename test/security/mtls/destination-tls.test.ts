import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Workload } from '../../../src/config/resources/types.js';
import { buildClusters } from '../../../src/traffic/clusters.js';
import type { ClusterSpec } from '../../../src/traffic/spec.js';
import {
  createDestinationTlsResolver, istioMutualSni, planOrigination, type ConnectionFacts, type DestinationTlsContext, type OriginationPlan,
} from '../../../src/security/mtls/destination-tls.js';
import { doc, snapshotOf } from './snapshot.js';

const dr = (id: string, spec: string): string => doc('DestinationRule', id, spec);
const se = (id: string, spec: string): string => doc('ServiceEntry', id, spec);
const pa = (id: string, spec: string): string => doc('PeerAuthentication', id, spec);

const CWD = '/srv/app';
const WORKLOAD: Workload = { namespace: 'shop', labels: { app: 'web' } };
const FACTS: ConnectionFacts = { address: '10.1.2.3', port: 8080, hosts: [] };
const MESH = { enableAutoMtls: true, autoMtlsCidrs: [] as string[] };

/** Every field any plan has. */
type PlanField = OriginationPlan extends infer P ? (P extends unknown ? keyof P : never) : never;

interface Case {
  readonly name: string;
  readonly resources?: readonly string[];
  readonly facts?: Partial<ConnectionFacts>;
  readonly workload?: Partial<Workload>;
  readonly mesh?: Partial<typeof MESH>;
  /** The plan's fields to compare (`reason` as a RegExp); the others are not looked at. */
  readonly want: Partial<Record<PlanField, unknown>>;
}

const ISTIO = (spec = ''): string => `{tls: {mode: ISTIO_MUTUAL${spec}}}`;
/** A mesh workload's entry (location MESH_INTERNAL) whose endpoint 10.1.2.3 carries `labels`; `location: ''` leaves it unset. */
const dbEndpoint = (labels: string, location = 'MESH_INTERNAL'): string => se('db', `{hosts: [db.example.com], ports: [{number: 5432, name: tcp}], resolution: STATIC,
  ${location === '' ? '' : `location: ${location}, `}subjectAltNames: [spiffe://cluster.local/ns/shop/sa/db-admin],
  endpoints: [{address: 10.1.2.3, labels: {${labels}}, serviceAccount: db}]}`);

const cases: readonly Case[] = [
  // ---- auto mTLS ----
  { name: 'nothing known: plain text', want: { kind: 'plaintext', reason: /^no DestinationRule, and 10\.1\.2\.3 is not a mesh endpoint \(no ServiceEntry endpoint with the security\.mesh\.io\/tlsMode label, not in autoMtlsCidrs\)$/ } },
  { name: 'address in autoMtlsCidrs, short name expanded for the SNI', mesh: { autoMtlsCidrs: ['192.168.0.0/16', '10.0.0.0/8'] }, facts: { hosts: ['reviews'] },
    want: { kind: 'istio-mutual', rule: 'auto mTLS: autoMtlsCidrs 10.0.0.0/8', sni: 'outbound_.8080_._.reviews.shop.svc.cluster.local', subjectAltNames: [] } },
  { name: 'only an address: no SNI', mesh: { autoMtlsCidrs: ['10.0.0.0/8'] }, want: { kind: 'istio-mutual', sni: undefined } },
  { name: 'IPv6 CIDR', mesh: { autoMtlsCidrs: ['fd00::/8'] }, facts: { address: 'fd00::7' }, want: { kind: 'istio-mutual', rule: 'auto mTLS: autoMtlsCidrs fd00::/8' } },
  { name: 'IPv4-mapped address of a dual-stack socket', mesh: { autoMtlsCidrs: ['10.0.0.0/8'] }, facts: { address: '::ffff:10.1.2.3' }, want: { kind: 'istio-mutual' } },
  { name: 'auto mTLS off', mesh: { enableAutoMtls: false, autoMtlsCidrs: ['10.0.0.0/8'] }, want: { kind: 'plaintext', reason: /auto mTLS is off \(enableAutoMtls: false\)/ } },
  { name: 'ServiceEntry endpoint with the tlsMode label', resources: [dbEndpoint('security.mesh.io/tlsMode: mesh')], facts: { port: 5432 },
    want: { kind: 'istio-mutual', rule: 'auto mTLS: ServiceEntry shop/db endpoint label', sni: 'outbound_.5432_._.db.example.com',
      subjectAltNames: ['spiffe://cluster.local/ns/shop/sa/db-admin', 'spiffe://cluster.local/ns/shop/sa/db'] } },
  { name: 'endpoint without the label: plain text, even inside autoMtlsCidrs', resources: [dbEndpoint('version: v1')], mesh: { autoMtlsCidrs: ['10.0.0.0/8'] },
    want: { kind: 'plaintext', reason: /the endpoint 10\.1\.2\.3 of ServiceEntry shop\/db has no security\.mesh\.io\/tlsMode: mesh label/ } },
  { name: 'Istio\'s spelling of the label', resources: [dbEndpoint('security.istio.io/tlsMode: istio')], facts: { port: 5432 },
    want: { kind: 'istio-mutual', rule: 'auto mTLS: ServiceEntry shop/db endpoint label' } },
  { name: 'Istio\'s label with the spec\'s value is not it', resources: [dbEndpoint('security.istio.io/tlsMode: mesh')], want: { kind: 'plaintext' } },
  { name: 'endpoint label of another value', resources: [dbEndpoint('security.mesh.io/tlsMode: disabled')], want: { kind: 'plaintext' } },
  { name: 'the destination namespace says DISABLE', resources: [dbEndpoint('security.mesh.io/tlsMode: mesh'), pa('ns', '{mtls: {mode: DISABLE}}')],
    want: { kind: 'plaintext', reason: /ServiceEntry shop\/db is in namespace shop, where PeerAuthentication shop\/ns says DISABLE/ } },
  { name: 'the DR host known, the endpoint labelled', resources: [dbEndpoint('security.mesh.io/tlsMode: mesh'), dr('db', '{host: db.example.com, trafficPolicy: {loadBalancer: {simple: RANDOM}}}')],
    want: { kind: 'istio-mutual', rule: 'auto mTLS: ServiceEntry shop/db endpoint label' } },
  // ---- location: Istio never originates auto mTLS to a MESH_EXTERNAL service ----
  { name: 'a labelled endpoint of a MESH_EXTERNAL entry: plain text', resources: [dbEndpoint('security.mesh.io/tlsMode: mesh', 'MESH_EXTERNAL')],
    want: { kind: 'plaintext', reason: /^no DestinationRule, and the endpoint 10\.1\.2\.3 is of ServiceEntry shop\/db, location MESH_EXTERNAL \(the default\): Istio never originates auto mTLS to a service outside the mesh/ } },
  { name: 'location unset is MESH_EXTERNAL (Istio\'s default)', resources: [dbEndpoint('security.mesh.io/tlsMode: mesh', '')], want: { kind: 'plaintext', reason: /location MESH_EXTERNAL/ } },
  { name: 'an address of a MESH_EXTERNAL entry inside autoMtlsCidrs: plain text', mesh: { autoMtlsCidrs: ['10.0.0.0/8'] },
    resources: [se('ext', '{hosts: [ext.example.com], addresses: [10.1.2.3], ports: [{number: 8080, name: tcp}], location: MESH_EXTERNAL}')],
    want: { kind: 'plaintext', reason: /^no DestinationRule; 10\.1\.2\.3 is in autoMtlsCidrs 10\.0\.0\.0\/8, but the destination is ServiceEntry shop\/ext, location MESH_EXTERNAL/ } },
  { name: 'a name of a MESH_EXTERNAL entry inside autoMtlsCidrs: plain text', mesh: { autoMtlsCidrs: ['10.0.0.0/8'] }, facts: { hosts: ['api.example.com'] },
    resources: [se('ext', '{hosts: ["*.example.com"], ports: [{number: 8080, name: http, protocol: HTTP}], resolution: NONE}')], want: { kind: 'plaintext' } },
  { name: 'a MESH_INTERNAL entry inside autoMtlsCidrs: mesh mTLS', mesh: { autoMtlsCidrs: ['10.0.0.0/8'] },
    resources: [se('int', '{hosts: [int.example.com], addresses: [10.1.2.3], ports: [{number: 8080, name: tcp}], location: MESH_INTERNAL}')],
    want: { kind: 'istio-mutual', rule: 'auto mTLS: autoMtlsCidrs 10.0.0.0/8' } },
  { name: 'a DestinationRule ISTIO_MUTUAL still applies to a MESH_EXTERNAL entry (as in Istio)', facts: { hosts: ['db.example.com'] },
    resources: [dbEndpoint('security.mesh.io/tlsMode: mesh', 'MESH_EXTERNAL'), dr('db', `{host: db.example.com, trafficPolicy: ${ISTIO()}}`)],
    want: { kind: 'istio-mutual', rule: 'DestinationRule shop/db' } },

  // ---- which DestinationRule ----
  { name: 'DR ISTIO_MUTUAL on an exact host', resources: [dr('db', `{host: db.example.com, trafficPolicy: ${ISTIO()}}`)], facts: { hosts: ['db.example.com'] },
    want: { kind: 'istio-mutual', rule: 'DestinationRule shop/db', sni: 'outbound_.8080_._.db.example.com', subjectAltNames: [] } },
  { name: 'the HTTP Host carries a port and a trailing dot', resources: [dr('db', `{host: db.example.com, trafficPolicy: ${ISTIO()}}`)], facts: { hosts: ['DB.example.com.:8080'] },
    want: { rule: 'DestinationRule shop/db' } },
  { name: 'DR DISABLE beats autoMtlsCidrs', resources: [dr('db', '{host: "*.example.com", trafficPolicy: {tls: {mode: DISABLE}}}')], facts: { hosts: ['db.example.com'] },
    mesh: { autoMtlsCidrs: ['10.0.0.0/8'] }, want: { kind: 'plaintext', reason: 'DestinationRule shop/db: tls mode DISABLE' } },
  { name: 'port-level setting beats the rule\'s', facts: { hosts: ['db.example.com'] },
    resources: [dr('db', '{host: db.example.com, trafficPolicy: {tls: {mode: SIMPLE}, portLevelSettings: [{port: {number: 8080}, tls: {mode: DISABLE}}]}}')],
    want: { kind: 'plaintext', reason: /tls mode DISABLE/ } },
  { name: 'another port takes the rule\'s', facts: { hosts: ['db.example.com'], port: 443 },
    resources: [dr('db', '{host: db.example.com, trafficPolicy: {tls: {mode: SIMPLE}, portLevelSettings: [{port: {number: 8080}, tls: {mode: DISABLE}}]}}')],
    want: { kind: 'simple', sni: 'db.example.com' } },
  { name: 'a rule with tls for another port only: auto mTLS', facts: { hosts: ['db.example.com'] }, mesh: { autoMtlsCidrs: ['10.0.0.0/8'] },
    resources: [dr('db', '{host: db.example.com, trafficPolicy: {portLevelSettings: [{port: {number: 443}, tls: {mode: SIMPLE}}]}}')],
    want: { kind: 'istio-mutual', rule: 'auto mTLS: autoMtlsCidrs 10.0.0.0/8' } },
  { name: 'exact beats wildcard', facts: { hosts: ['db.example.com'] },
    resources: [dr('all', '{host: "*", trafficPolicy: {tls: {mode: DISABLE}}}'), dr('wild', '{host: "*.example.com", trafficPolicy: {tls: {mode: DISABLE}}}'),
      dr('db', `{host: db.example.com, trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule shop/db' } },
  { name: 'longer wildcard beats shorter', facts: { hosts: ['db.eu.example.com'] },
    resources: [dr('all', '{host: "*", trafficPolicy: {tls: {mode: DISABLE}}}'), dr('wild', '{host: "*.example.com", trafficPolicy: {tls: {mode: DISABLE}}}'),
      dr('eu', `{host: "*.eu.example.com", trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule shop/eu', sni: 'outbound_.8080_._.db.eu.example.com' } },
  { name: '* matches any name, not a bare address', resources: [dr('all', `{host: "*", trafficPolicy: ${ISTIO()}}`)], want: { kind: 'plaintext', reason: /^no DestinationRule/ } },
  { name: 'a rule for the address itself', resources: [dr('ip', '{host: 10.1.2.3, trafficPolicy: {tls: {mode: SIMPLE}}}')], want: { kind: 'simple', rule: 'DestinationRule shop/ip', sni: undefined } },
  { name: 'equal matches: the first in file order', facts: { hosts: ['db.example.com'] },
    resources: [dr('b', `{host: db.example.com, trafficPolicy: ${ISTIO()}}`), dr('a', '{host: db.example.com, trafficPolicy: {tls: {mode: DISABLE}}}')],
    want: { rule: 'DestinationRule shop/b' } },
  { name: 'the client\'s namespace beats the root namespace, even a wildcard over an exact', facts: { hosts: ['db.example.com'] },
    resources: [dr('mesh-system/db', '{host: db.example.com, trafficPolicy: {tls: {mode: DISABLE}}}'), dr('wild', `{host: "*.example.com", trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule shop/wild' } },
  { name: 'the root namespace when the client\'s has none', facts: { hosts: ['db.example.com'] },
    resources: [dr('mesh-system/all', `{host: "*", trafficPolicy: ${ISTIO()}}`), dr('other/db', '{host: db.example.com, trafficPolicy: {tls: {mode: DISABLE}}}')],
    want: { rule: 'DestinationRule mesh-system/all' } },
  { name: 'exportTo "." hides a root rule', facts: { hosts: ['db.example.com'] }, resources: [dr('mesh-system/all', `{host: "*", exportTo: ["."], trafficPolicy: ${ISTIO()}}`)],
    want: { kind: 'plaintext' } },
  { name: 'exportTo naming the client\'s namespace', facts: { hosts: ['db.example.com'] }, resources: [dr('mesh-system/all', `{host: "*", exportTo: [other, shop], trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule mesh-system/all' } },
  { name: 'the service\'s namespace (svc.ns.svc.domain) before the root', facts: { hosts: ['reviews.prod.svc.cluster.local'] },
    resources: [dr('mesh-system/all', '{host: "*", trafficPolicy: {tls: {mode: DISABLE}}}'), dr('prod/reviews', `{host: reviews, trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule prod/reviews', sni: 'outbound_.8080_._.reviews.prod.svc.cluster.local' } },
  { name: 'the service\'s namespace from a short form (reviews.prod)', facts: { hosts: ['reviews.prod'] },
    resources: [dr('prod/reviews', `{host: reviews.prod.svc.cluster.local, trafficPolicy: ${ISTIO()}}`)], want: { rule: 'DestinationRule prod/reviews' } },
  { name: 'a service-namespace rule exported to "." is not seen', facts: { hosts: ['reviews.prod.svc.cluster.local'] },
    resources: [dr('prod/reviews', `{host: reviews, exportTo: ["."], trafficPolicy: ${ISTIO()}}`)], want: { kind: 'plaintext' } },
  { name: 'the namespace of a ServiceEntry declaring the name', facts: { hosts: ['api.example.com'] },
    resources: [se('ext/api', '{hosts: [api.example.com]}'), dr('ext/api', '{host: api.example.com, trafficPolicy: {tls: {mode: SIMPLE}}}')],
    want: { kind: 'simple', rule: 'DestinationRule ext/api' } },
  { name: 'a short rule host is read in the rule\'s namespace', facts: { hosts: ['reviews'] },
    resources: [dr('prod/reviews', '{host: reviews, trafficPolicy: {tls: {mode: DISABLE}}}'), dr('reviews', `{host: reviews, trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule shop/reviews', sni: 'outbound_.8080_._.reviews.shop.svc.cluster.local' } },
  { name: 'a short rule host of another namespace does not match a client\'s short name', facts: { hosts: ['reviews'] },
    resources: [dr('mesh-system/reviews', `{host: reviews, trafficPolicy: ${ISTIO()}}`)], want: { kind: 'plaintext' } },
  { name: 'a matching workloadSelector beats a rule without', facts: { hosts: ['db.example.com'] },
    resources: [dr('all', '{host: db.example.com, trafficPolicy: {tls: {mode: DISABLE}}}'), dr('web', `{host: db.example.com, workloadSelector: {matchLabels: {app: web}}, trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule shop/web' } },
  { name: 'a workloadSelector that does not match', facts: { hosts: ['db.example.com'] },
    resources: [dr('api', `{host: db.example.com, workloadSelector: {matchLabels: {app: api}}, trafficPolicy: ${ISTIO()}}`)], want: { kind: 'plaintext' } },
  { name: 'a workloadSelector does not reach across namespaces', facts: { hosts: ['db.example.com'] },
    resources: [dr('mesh-system/web', `{host: db.example.com, workloadSelector: {matchLabels: {app: web}}, trafficPolicy: ${ISTIO()}}`)], want: { kind: 'plaintext' } },
  { name: 'host specificity before the selector', facts: { hosts: ['db.example.com'] },
    resources: [dr('web', '{host: "*.example.com", workloadSelector: {matchLabels: {app: web}}, trafficPolicy: {tls: {mode: DISABLE}}}'),
      dr('db', `{host: db.example.com, trafficPolicy: ${ISTIO()}}`)],
    want: { rule: 'DestinationRule shop/db' } },

  // ---- what a rule's tls becomes ----
  { name: 'ISTIO_MUTUAL with the rule\'s sni and SANs', facts: { hosts: ['db.example.com'] },
    resources: [dr('db', `{host: db.example.com, trafficPolicy: ${ISTIO(', sni: db.mesh, subjectAltNames: [spiffe://cluster.local/ns/db/sa/db]')}}`)],
    want: { kind: 'istio-mutual', sni: 'db.mesh', subjectAltNames: ['spiffe://cluster.local/ns/db/sa/db'] } },
  { name: 'SIMPLE: SNI from the name, CA relative to the working directory', facts: { hosts: ['api.example.com'] },
    resources: [dr('api', '{host: "*.example.com", trafficPolicy: {tls: {mode: SIMPLE, caCertificates: certs/ca.pem}}}')],
    want: { kind: 'simple', sni: 'api.example.com', caCertificates: '/srv/app/certs/ca.pem', clientCertificate: undefined, subjectAltNames: [], insecureSkipVerify: false } },
  { name: 'SIMPLE: the rule\'s sni overrides, insecureSkipVerify kept', facts: { hosts: ['api.example.com'] },
    resources: [dr('api', '{host: api.example.com, trafficPolicy: {tls: {mode: SIMPLE, sni: front.example.net, insecureSkipVerify: true}}}')],
    want: { kind: 'simple', sni: 'front.example.net', caCertificates: undefined, insecureSkipVerify: true } },
  { name: 'MUTUAL with files (absolute kept)', facts: { hosts: ['db.example.com'] },
    resources: [dr('db', '{host: db.example.com, trafficPolicy: {tls: {mode: MUTUAL, clientCertificate: /etc/c.pem, privateKey: k.pem, caCertificates: ca.pem}}}')],
    want: { kind: 'mutual', clientCertificate: '/etc/c.pem', privateKey: '/srv/app/k.pem', caCertificates: '/srv/app/ca.pem', credentialName: undefined } },
  { name: 'MUTUAL with credentialName: the credential\'s files', facts: { hosts: ['db.example.com'] },
    resources: [dr('db', '{host: db.example.com, trafficPolicy: {tls: {mode: MUTUAL, credentialName: db-client}}}')],
    want: { kind: 'mutual', credentialName: 'db-client', clientCertificate: '/srv/app/etc/mesh/credentials/db-client/tls.crt',
      privateKey: '/srv/app/etc/mesh/credentials/db-client/tls.key', caCertificates: '/srv/app/etc/mesh/credentials/db-client/ca.crt' } },
  { name: 'SIMPLE with credentialName: its CA only', facts: { hosts: ['db.example.com'] },
    resources: [dr('db', '{host: db.example.com, trafficPolicy: {tls: {mode: SIMPLE, credentialName: db-ca}}}')],
    want: { kind: 'simple', caCertificates: '/srv/app/etc/mesh/credentials/db-ca/ca.crt', clientCertificate: undefined, privateKey: undefined } },
  { name: 'SANs from the ServiceEntry when the rule has none', facts: { hosts: ['api.example.com'] },
    resources: [se('api', '{hosts: [api.example.com], subjectAltNames: [api.example.com, api-alt.example.com]}'), dr('api', '{host: api.example.com, trafficPolicy: {tls: {mode: SIMPLE}}}')],
    want: { subjectAltNames: ['api.example.com', 'api-alt.example.com'] } },
  { name: 'the rule\'s SANs beat the ServiceEntry\'s', facts: { hosts: ['api.example.com'] },
    resources: [se('api', '{hosts: [api.example.com], subjectAltNames: [a]}'), dr('api', '{host: api.example.com, trafficPolicy: {tls: {mode: SIMPLE, subjectAltNames: [b]}}}')],
    want: { subjectAltNames: ['b'] } },
];

function contextOf(c: Case): DestinationTlsContext {
  return { workload: { ...WORKLOAD, ...c.workload }, snapshot: snapshotOf(...(c.resources ?? [])), mesh: { ...MESH, ...c.mesh }, cwd: CWD };
}

it('plans the origination of a connection by Istio\'s rules', () => {
  for (const c of cases) {
    const plan = planOrigination({ ...FACTS, ...c.facts }, contextOf(c)) as unknown as Record<string, unknown>;
    for (const [field, want] of Object.entries(c.want)) {
      if (want instanceof RegExp) assert.match(String(plan[field]), want, `${c.name}: ${field} (${JSON.stringify(plan)})`);
      else assert.deepEqual(plan[field], want, `${c.name}: ${field} (${JSON.stringify(plan)})`);
    }
  }
});

it('gives plain, serialisable plans whose key groups what may share an upstream pool', () => {
  const ctx = contextOf({ name: '', mesh: { autoMtlsCidrs: ['10.0.0.0/8'] }, resources: [
    dr('a', `{host: a.example.com, trafficPolicy: ${ISTIO()}}`),
    dr('b', `{host: b.example.com, trafficPolicy: ${ISTIO()}}`),
  ], want: {} });
  const resolve = createDestinationTlsResolver(ctx);
  const a = resolve({ ...FACTS, hosts: ['a.example.com'] });
  assert.deepEqual(JSON.parse(JSON.stringify(a)), a, 'plain data');
  const viaCidr = resolve({ ...FACTS, hosts: ['c.example.com'] });
  const sameAsA = resolve({ ...FACTS, address: '10.9.9.9', hosts: ['a.example.com'] });
  assert.equal(sameAsA.key, a.key, 'the same handshake, the same key');
  assert.notEqual(viaCidr.key, a.key, 'another SNI, another key');
  assert.notEqual(resolve({ ...FACTS, address: '192.0.2.1' }).key, a.key);
  assert.equal(resolve({ ...FACTS, address: '192.0.2.1' }).key, 'plaintext');
  assert.equal(istioMutualSni(9080, 'reviews.prod.svc.cluster.local'), 'outbound_.9080_._.reviews.prod.svc.cluster.local');
  assert.equal(istioMutualSni(9080, 'reviews.prod.svc.cluster.local', 'v1'), 'outbound_.9080_.v1_.reviews.prod.svc.cluster.local');
  const rule = resolve({ ...FACTS, hosts: ['a.example.com'] });
  assert.ok(rule.kind === 'istio-mutual' && rule.rule === 'DestinationRule shop/a');
});

// ---- per cluster (a request routed to a traffic cluster), WorkloadEntries, exportTo ----

const we = (id: string, spec: string): string => doc('WorkloadEntry', id, spec);

/** The cluster `name` as src/traffic builds it from the resources (its merged policy), and a resolver for the same resources. */
function clusterOf(name: string, ...resources: string[]): { spec: ClusterSpec; resolve: (facts: ConnectionFacts) => OriginationPlan } {
  const snapshot = snapshotOf(...resources);
  const spec = buildClusters(snapshot, { workload: WORKLOAD }).byName.get(name);
  assert.ok(spec, `no cluster ${name}`);
  return { spec, resolve: createDestinationTlsResolver({ workload: WORKLOAD, snapshot, mesh: MESH, cwd: CWD }) };
}

/** What the data path asks for an endpoint of the cluster: planned by its service port and host. */
const clusterFacts = (spec: ClusterSpec, address: string, labels: Record<string, string> = {}): ConnectionFacts =>
  ({ address, port: spec.port, hosts: [spec.host], cluster: spec, endpointLabels: labels });

/** db.example.com:5432 (targetPort 6432), MESH_INTERNAL, endpoint 10.1.2.3 of version v1 (unlabelled for mTLS). */
const DB = se('db', `{hosts: [db.example.com], addresses: [240.0.0.5], ports: [{number: 5432, name: tcp, targetPort: 6432}], resolution: STATIC,
  location: MESH_INTERNAL, endpoints: [{address: 10.1.2.3, labels: {version: v1}, serviceAccount: db}]}`);

describe('a traffic cluster\'s TLS: Istio\'s per-cluster origination', () => {
  it('a subset\'s tls replaces the rule\'s for the subset\'s cluster; its SNI names the subset', () => {
    const rule = dr('db', `{host: db.example.com, trafficPolicy: {tls: {mode: DISABLE}}, subsets: [
      {name: v1, labels: {version: v1}, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}},
      {name: v2, labels: {version: v2}, trafficPolicy: {portLevelSettings: [{port: {number: 5432}, tls: {mode: SIMPLE, sni: v2.db.example.com}}]}},
      {name: v3, labels: {version: v3}, trafficPolicy: {loadBalancer: {simple: RANDOM}}}]}`);
    const v1 = clusterOf('outbound|5432|v1|db.example.com', DB, rule);
    assert.deepEqual(pick(v1.resolve(clusterFacts(v1.spec, '10.1.2.3')), 'kind', 'sni', 'rule', 'subjectAltNames'),
      { kind: 'istio-mutual', sni: 'outbound_.5432_.v1_.db.example.com', rule: 'DestinationRule shop/db', subjectAltNames: ['spiffe://cluster.local/ns/shop/sa/db'] });
    const v2 = clusterOf('outbound|5432|v2|db.example.com', DB, rule);
    assert.deepEqual(pick(v2.resolve(clusterFacts(v2.spec, '10.1.2.3')), 'kind', 'sni'), { kind: 'simple', sni: 'v2.db.example.com' }, 'the subset\'s port-level tls');
    const v3 = clusterOf('outbound|5432|v3|db.example.com', DB, rule);
    assert.equal(v3.resolve(clusterFacts(v3.spec, '10.1.2.3')).kind, 'plaintext', 'a subset without tls keeps the rule\'s DISABLE');
    const all = clusterOf('outbound|5432||db.example.com', DB, rule);
    assert.deepEqual(pick(all.resolve(clusterFacts(all.spec, '10.1.2.3')), 'kind', 'reason'), { kind: 'plaintext', reason: 'DestinationRule shop/db: tls mode DISABLE' });
  });

  it('a subset turns mTLS off where the rule asks for it', () => {
    const rule = dr('db', `{host: db.example.com, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}, subsets: [{name: v1, labels: {version: v1}, trafficPolicy: {tls: {mode: DISABLE}}}]}`);
    const v1 = clusterOf('outbound|5432|v1|db.example.com', DB, rule);
    assert.equal(v1.resolve(clusterFacts(v1.spec, '10.1.2.3')).kind, 'plaintext');
    const all = clusterOf('outbound|5432||db.example.com', DB, rule);
    assert.equal(pick(all.resolve(clusterFacts(all.spec, '10.1.2.3')), 'sni')['sni'], 'outbound_.5432_._.db.example.com');
  });

  it('port-level tls is the service port\'s, whatever port the endpoint listens on (targetPort)', () => {
    const rule = dr('db', '{host: db.example.com, trafficPolicy: {tls: {mode: SIMPLE}, portLevelSettings: [{port: {number: 5432}, tls: {mode: ISTIO_MUTUAL}}]}}');
    const c = clusterOf('outbound|5432||db.example.com', DB, rule);
    assert.deepEqual(pick(c.resolve(clusterFacts(c.spec, '10.1.2.3')), 'kind', 'sni'), { kind: 'istio-mutual', sni: 'outbound_.5432_._.db.example.com' });
  });

  it('no tls for the cluster: auto mTLS by the endpoint\'s labels, the SNI naming the subset', () => {
    const labelled = se('db', `{hosts: [db.example.com], ports: [{number: 5432, name: tcp}], resolution: STATIC, location: MESH_INTERNAL,
      endpoints: [{address: 10.1.2.3, labels: {version: v1, security.mesh.io/tlsMode: mesh}}]}`);
    const c = clusterOf('outbound|5432|v1|db.example.com', labelled, dr('db', '{host: db.example.com, subsets: [{name: v1, labels: {version: v1}}]}'));
    assert.deepEqual(pick(c.resolve(clusterFacts(c.spec, '10.1.2.3')), 'kind', 'sni', 'rule'),
      { kind: 'istio-mutual', sni: 'outbound_.5432_.v1_.db.example.com', rule: 'auto mTLS: ServiceEntry shop/db endpoint label' });
  });

  it('an endpoint a name resolved to (DNS) is judged by its own labels', () => {
    const dns = se('db', `{hosts: [db.example.com], ports: [{number: 5432, name: tcp}], resolution: DNS, location: MESH_INTERNAL,
      endpoints: [{address: db-1.example.net, labels: {security.mesh.io/tlsMode: mesh}}]}`);
    const c = clusterOf('outbound|5432||db.example.com', dns);
    assert.equal(c.resolve(clusterFacts(c.spec, '192.0.2.9', { 'security.mesh.io/tlsMode': 'mesh' })).kind, 'istio-mutual');
    assert.equal(c.resolve(clusterFacts(c.spec, '192.0.2.9', {})).kind, 'plaintext');
  });
});

describe('WorkloadEntries selected by a ServiceEntry', () => {
  const entry = se('vm', `{hosts: [vm.example.com], ports: [{number: 8080, name: http, protocol: HTTP}], resolution: STATIC, location: MESH_INTERNAL,
    workloadSelector: {labels: {app: vm}}}`);
  const workload = (labels: string, sa = 'vm-sa', id = 'vm-1'): string => we(id, `{address: 10.1.2.3, labels: {app: vm${labels}}, serviceAccount: ${sa}}`);
  const ctxOf = (...resources: string[]): DestinationTlsContext => ({ workload: WORKLOAD, snapshot: snapshotOf(...resources), mesh: MESH, cwd: CWD });

  it('auto mTLS from a WorkloadEntry\'s tlsMode label, its service account in the SANs', () => {
    const plan = planOrigination(FACTS, ctxOf(entry, workload(', security.mesh.io/tlsMode: mesh')));
    assert.deepEqual(pick(plan, 'kind', 'rule', 'sni', 'subjectAltNames'), {
      kind: 'istio-mutual', rule: 'auto mTLS: ServiceEntry shop/vm endpoint label', sni: 'outbound_.8080_._.vm.example.com',
      subjectAltNames: ['spiffe://cluster.local/ns/shop/sa/vm-sa'],
    });
  });

  it('a WorkloadEntry without the label is plain text, even inside autoMtlsCidrs', () => {
    const plan = planOrigination(FACTS, { ...ctxOf(entry, workload('')), mesh: { enableAutoMtls: true, autoMtlsCidrs: ['10.0.0.0/8'] } });
    assert.match(String((plan as { reason?: string }).reason), /the endpoint 10\.1\.2\.3 of ServiceEntry shop\/vm has no security\.mesh\.io\/tlsMode: mesh label/);
  });

  it('a DestinationRule tls without subjectAltNames verifies the WorkloadEntries\' service accounts', () => {
    const plan = planOrigination({ ...FACTS, hosts: ['vm.example.com'] },
      ctxOf(entry, workload('', 'a'), workload('', 'b', 'vm-2'), dr('vm', '{host: vm.example.com, trafficPolicy: {tls: {mode: SIMPLE}}}')));
    assert.deepEqual(pick(plan, 'subjectAltNames'), { subjectAltNames: ['spiffe://cluster.local/ns/shop/sa/a', 'spiffe://cluster.local/ns/shop/sa/b'] });
  });

  it('a WorkloadEntry of another namespace is not selected', () => {
    const plan = planOrigination(FACTS, ctxOf(entry, we('other/vm-1', '{address: 10.1.2.3, labels: {app: vm, security.mesh.io/tlsMode: mesh}, serviceAccount: x}')));
    assert.equal(plan.kind, 'plaintext');
  });
});

describe('exportTo: a ServiceEntry not exported to the client\'s namespace is not seen', () => {
  const entry = (exportTo: string): string => se('db/db', `{hosts: [db.example.com], ports: [{number: 8080, name: tcp}], resolution: STATIC, location: MESH_INTERNAL,
    subjectAltNames: [spiffe://cluster.local/ns/db/sa/db], endpoints: [{address: 10.1.2.3, labels: {security.mesh.io/tlsMode: mesh}}]${exportTo}}`);
  const ctxOf = (...resources: string[]): DestinationTlsContext => ({ workload: WORKLOAD, snapshot: snapshotOf(...resources), mesh: MESH, cwd: CWD });

  it('its endpoints do not decide auto mTLS', () => {
    assert.equal(planOrigination(FACTS, ctxOf(entry(''))).kind, 'istio-mutual', 'exported everywhere (the default)');
    assert.equal(planOrigination(FACTS, ctxOf(entry(', exportTo: [shop]'))).kind, 'istio-mutual');
    assert.equal(planOrigination(FACTS, ctxOf(entry(', exportTo: ["."]'))).kind, 'plaintext', 'its own namespace only');
    assert.equal(planOrigination(FACTS, ctxOf(entry(', exportTo: ["~"]'))).kind, 'plaintext', 'no namespace');
  });

  it('its subjectAltNames are not the ones verified, and its namespace is not searched for rules', () => {
    const rule = dr('db/db', '{host: db.example.com, trafficPolicy: {tls: {mode: SIMPLE}}}');
    const seen = planOrigination({ ...FACTS, hosts: ['db.example.com'] }, ctxOf(entry(''), rule));
    assert.deepEqual(pick(seen, 'kind', 'subjectAltNames'), { kind: 'simple', subjectAltNames: ['spiffe://cluster.local/ns/db/sa/db'] });
    const hidden = planOrigination({ ...FACTS, hosts: ['db.example.com'] }, ctxOf(entry(', exportTo: ["."]'), rule));
    assert.equal(hidden.kind, 'plaintext', 'the rule lives in the namespace of an entry the client does not see');
  });
});

it('a port-level entry without tls replaces the rule\'s tls (Istio\'s merge): auto mTLS decides for that port', () => {
  const ctx = contextOf({ name: '', mesh: { autoMtlsCidrs: ['10.0.0.0/8'] }, want: {}, resources: [
    dr('db', '{host: db.example.com, trafficPolicy: {tls: {mode: SIMPLE}, portLevelSettings: [{port: {number: 8080}, loadBalancer: {simple: RANDOM}}]}}')] });
  assert.equal(pick(planOrigination({ ...FACTS, hosts: ['db.example.com'] }, ctx), 'rule')['rule'], 'auto mTLS: autoMtlsCidrs 10.0.0.0/8');
  assert.equal(planOrigination({ ...FACTS, port: 443, hosts: ['db.example.com'] }, ctx).kind, 'simple');
});

function pick(plan: OriginationPlan, ...fields: string[]): Record<string, unknown> {
  return Object.fromEntries(fields.map((f) => [f, (plan as unknown as Record<string, unknown>)[f]]));
}

it('ENABLE_AUTO_SNI: a SIMPLE / MUTUAL rule without sni sends the name by default; false sends none, the name is still what the certificate must hold', () => {
  const resources = [
    dr('api', '{host: api.example.com, trafficPolicy: {tls: {mode: SIMPLE}}}'),
    dr('front', '{host: front.example.com, trafficPolicy: {tls: {mode: SIMPLE, sni: edge.example.net}}}'),
    dr('db', `{host: db.example.com, trafficPolicy: ${ISTIO()}}`),
  ];
  const base = contextOf({ name: '', resources, want: {} });
  const on = createDestinationTlsResolver(base);
  const unset = createDestinationTlsResolver({ ...base, autoSni: undefined });
  const off = createDestinationTlsResolver({ ...base, autoSni: false });
  const api = { ...FACTS, hosts: ['api.example.com'] };
  const front = { ...FACTS, hosts: ['front.example.com'] };
  const db = { ...FACTS, hosts: ['db.example.com'] };

  assert.deepEqual([on(api).kind, (on(api) as { sni?: string }).sni, (on(api) as { verifyName?: string }).verifyName], ['simple', 'api.example.com', 'api.example.com']);
  assert.equal((unset(api) as { sni?: string }).sni, 'api.example.com', 'unset: true, as in Istio');
  const plain = off(api) as { sni?: string; verifyName?: string; key: string };
  assert.equal(plain.sni, undefined, 'false: no SNI');
  assert.equal(plain.verifyName, 'api.example.com', 'the certificate is still checked against the name');
  assert.notEqual(plain.key, on(api).key, 'with and without SNI: not the same upstream pool');
  assert.equal((off(front) as { sni?: string }).sni, 'edge.example.net', 'a rule\'s own sni is sent whatever the variable says');
  assert.equal((off(db) as { sni?: string }).sni, 'outbound_.8080_._.db.example.com', 'ISTIO_MUTUAL keeps its cluster-name SNI (not auto SNI)');
});
