// The outbound side's TLS choice, without sockets: plans become TLS settings once per plan and
// certificate, a plan that cannot be carried out is a 503 (never plaintext), plans are made again
// when the resources change, and the client's XFCC is not passed on.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { checkCertificateSet } from '../../../src/identity/check.js';
import type { LocalReply } from '../../../src/proxy/decider.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { MeshCredentials, type MeshContexts } from '../../../src/proxy/tls/mesh-credentials.js';
import type { UpstreamTls } from '../../../src/proxy/tls/origination.js';
import type { ConnectionFacts, OriginationPlan } from '../../../src/security/mtls/destination-tls.js';
import { outboundDecider, upstreamTls, upstreamTlsFor, type ClusterTls, type OutboundTlsSource } from '../../../src/security/mtls/outbound-decider.js';
import { createRootCa, issueWorkloadCert } from '../../helpers/mesh-certs.js';

const MUTUAL: OriginationPlan = { kind: 'istio-mutual', sni: 'outbound_.80_._.b.default.svc.cluster.local', subjectAltNames: [], rule: 'DestinationRule default/b', key: 'm' };
const PLAIN: OriginationPlan = { kind: 'plaintext', reason: 'no rule', key: 'plaintext' };

async function contexts(): Promise<MeshContexts> {
  const ca = await createRootCa();
  const set = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/default/sa/a' });
  const credentials = new MeshCredentials();
  credentials.set(checkCertificateSet({ chainPem: set.chainPem, keyPem: set.keyPem, rootPem: set.rootPem },
    { names: { chain: 'c', key: 'k', root: 'r' }, source: 'test', nowMs: Date.now() }));
  return credentials.current!;
}

/** A source whose plan, certificate and generation the test sets; it records what was asked. */
function source(o: { plan: OriginationPlan; contexts?: MeshContexts }) {
  const asked: ConnectionFacts[] = [];
  const warnings: string[] = [];
  const state = { plan: o.plan, contexts: o.contexts, generation: {} as object };
  const src: OutboundTlsSource = {
    plan: (facts) => { asked.push(facts); return state.plan; },
    generation: () => state.generation,
    hostsFor: (address) => (address === '10.0.0.2' ? ['b.default.svc.cluster.local'] : []),
    contexts: () => state.contexts,
    cwd: '/',
    stats: new DirectionStats(),
    warn: (m) => warnings.push(m),
  };
  return { src, asked, warnings, state };
}

const request = (headers: Record<string, string>): IncomingMessage => ({ headers, method: 'GET', url: '/' }) as unknown as IncomingMessage;
const dst = { address: '10.0.0.2', port: 80 };

describe('upstreamTlsFor', () => {
  it('ISTIO_MUTUAL: the workload certificate, Istio\'s ALPN per protocol, the plan\'s SNI; one object while nothing changes', async () => {
    const { src } = source({ plan: MUTUAL, contexts: await contexts() });
    const tlsFor = upstreamTlsFor(src);
    const http = tlsFor(dst, 'b', true) as UpstreamTls;
    assert.equal(http.kind, 'tls');
    assert.deepEqual(http.alpn, ['istio-http/1.0', 'istio-http/1.1', 'istio-h2']);
    assert.equal(http.servername, MUTUAL.sni);
    assert.equal(http.mesh, true);
    assert.equal(tlsFor(dst, 'b', true), http, 'the same settings object: the pool key stays');
    assert.deepEqual((tlsFor(dst, undefined, false) as UpstreamTls).alpn, ['istio-peer-exchange', 'istio'], 'TCP: the metadata exchange offered first, as Istio sidecars do');
  });

  it('a new certificate: new settings with its context for the same plan (new connections use it), then the same object again', async () => {
    const { src, state } = source({ plan: MUTUAL, contexts: await contexts() });
    const tlsFor = upstreamTlsFor(src);
    const before = tlsFor(dst, 'b', true) as UpstreamTls;
    state.contexts = await contexts();
    const after = tlsFor(dst, 'b', true) as UpstreamTls;
    assert.notEqual(after, before);
    assert.equal(after.secureContext, state.contexts.context);
    assert.notEqual(after.key, before.key, 'another pool key: pooled connections of the old certificate are not reused for new requests');
    assert.equal(tlsFor(dst, 'b', true), after);
  });

  it('without a certificate, ISTIO_MUTUAL is a 503 naming the rule, counted and said once: never plaintext', () => {
    const { src, warnings } = source({ plan: MUTUAL });
    const tlsFor = upstreamTlsFor(src);
    const reply = tlsFor(dst, undefined, true) as LocalReply;
    assert.equal(reply.kind, 'reply');
    assert.equal(reply.status, 503);
    assert.match(reply.body, /ISTIO_MUTUAL required by DestinationRule default\/b, no workload certificate/);
    assert.equal(reply.flag, 'UF');
    tlsFor(dst, undefined, true);
    assert.equal(src.stats.mtlsNoIdentity, 2);
    assert.equal(new Set(warnings).size, 1);
  });

  it('plans once per destination and Host, again when the resources change; names known for the address are passed', () => {
    const { src, asked, state } = source({ plan: PLAIN });
    const tlsFor = upstreamTlsFor(src);
    assert.equal(tlsFor(dst, 'b', true), undefined);
    tlsFor(dst, 'b', true);
    assert.equal(asked.length, 1);
    assert.deepEqual(asked[0]!.hosts, ['b', 'b.default.svc.cluster.local']);
    tlsFor(dst, 'other', true);
    assert.equal(asked.length, 2);
    tlsFor(dst, 'b', true);
    tlsFor(dst, 'other', true);
    assert.equal(asked.length, 2, 'the last plan, and the ones before it, are kept');
    state.generation = {};
    tlsFor(dst, 'b', true);
    assert.equal(asked.length, 3);
    tlsFor({ address: '10.0.0.2', port: 81 }, 'b', true);
    assert.equal(asked.length, 4, 'another port, another plan');
  });

  it('plans by the request\'s host: its authority without the port, lower-cased (IPv6 literals too)', () => {
    const { src, asked } = source({ plan: PLAIN });
    const decider = outboundDecider(upstreamTlsFor(src));
    for (const host of ['B.Example:8080', '[FD00::1]:80', 'c.example', '']) decider.decide(request(host === '' ? {} : { host }), dst);
    assert.deepEqual(asked.map((a) => a.hosts[0]), ['b.example', 'fd00::1', 'c.example', 'b.default.svc.cluster.local']);
  });

  it('SIMPLE with a CA file that cannot be read: a 503 naming the file', () => {
    const { src } = source({ plan: { kind: 'simple', sni: 'ext.example.com', caCertificates: '/nonexistent/ca.pem', subjectAltNames: [], insecureSkipVerify: false, rule: 'DestinationRule default/ext', key: 's' } });
    const reply = upstreamTlsFor(src)(dst, undefined, true) as LocalReply;
    assert.equal(reply.status, 503);
    assert.match(reply.body, /\/nonexistent\/ca\.pem/);
  });
});

describe('upstreamTls: a traffic cluster\'s endpoints', () => {
  /** `outbound|80|v1|b...` whose endpoints listen on 8080 (targetPort): TLS goes by the service port. */
  const V1: ClusterTls = { name: 'outbound|80|v1|b.default.svc.cluster.local', host: 'b.default.svc.cluster.local', port: 80, subset: 'v1',
    policy: { tls: { mode: 'ISTIO_MUTUAL', subjectAltNames: [], insecureSkipVerify: false }, rule: 'DestinationRule default/b' } };
  const endpoint = { address: '10.0.0.2', port: 8080, labels: { version: 'v1' } };

  it('plans by the cluster: its service port (not the endpoint\'s), its host alone, its policy, the endpoint\'s labels', async () => {
    const { src, asked } = source({ plan: MUTUAL, contexts: await contexts() });
    const tls = upstreamTls(src).cluster(V1, endpoint, true) as UpstreamTls;
    assert.equal(tls.mesh, true);
    assert.deepEqual(asked, [{ address: '10.0.0.2', port: 80, hosts: ['b.default.svc.cluster.local'], cluster: V1, endpointLabels: { version: 'v1' } }]);
  });

  it('plans once per cluster and endpoint, again when the resources change', () => {
    const { src, asked, state } = source({ plan: PLAIN });
    const { cluster } = upstreamTls(src);
    const other = { ...endpoint, address: '10.0.0.3' };
    assert.equal(cluster(V1, endpoint, true), undefined);
    cluster(V1, other, true);
    cluster(V1, endpoint, false);
    cluster(V1, other, true);
    assert.equal(asked.length, 2, 'one plan per endpoint, HTTP or TCP alike');
    const v2: ClusterTls = { ...V1, name: 'outbound|80|v2|b.default.svc.cluster.local', subset: 'v2', policy: {} };
    cluster(v2, endpoint, true);
    assert.equal(asked.length, 3, 'another cluster (subset), another plan');
    assert.deepEqual(asked[2]!.cluster, v2);
    state.generation = {};
    cluster(V1, endpoint, true);
    assert.equal(asked.length, 4);
  });
});

describe('outboundDecider', () => {
  it('forwards to the original destination with the TLS settings, and drops a client\'s XFCC', async () => {
    const { src } = source({ plan: MUTUAL, contexts: await contexts() });
    const decider = outboundDecider(upstreamTlsFor(src));
    const v = decider.decide(request({ host: 'b', 'x-forwarded-client-cert': 'By=forged' }), dst);
    assert.ok(!(v instanceof Promise) && v.kind === 'forward');
    assert.equal(v.address, '10.0.0.2');
    assert.equal(v.tls?.mesh, true);
    assert.deepEqual(v.removeHeaders, ['x-forwarded-client-cert']);
    assert.ok(decider.connectionUpstream?.({ source: '10.0.0.9', destination: dst, kind: 'tcp' }));
  });

  it('to a plaintext destination: the original destination alone, a client\'s XFCC dropped all the same', () => {
    const decider = outboundDecider(upstreamTlsFor(source({ plan: PLAIN }).src));
    assert.deepEqual(decider.decide(request({ host: 'b' }), dst), { kind: 'forward', address: '10.0.0.2', port: 80 });
    assert.deepEqual(decider.decide(request({ host: 'b', 'x-forwarded-client-cert': 'By=forged' }), dst),
      { kind: 'forward', address: '10.0.0.2', port: 80, removeHeaders: ['x-forwarded-client-cert'] });
  });
});
