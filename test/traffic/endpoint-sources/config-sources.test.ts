// The sources fed by the resource files: ServiceEntry endpoints (STATIC) and WorkloadEntries chosen
// by a ServiceEntry's workloadSelector; their ports, weights and labels, and what they tell listeners.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ResourceSnapshot } from '../../../src/config/resources/types.js';
import { buildClusters, type ServiceSpec } from '../../../src/traffic/clusters.js';
import { endpointPort, selectSubset } from '../../../src/traffic/endpoint-sources/endpoint-source.js';
import { StaticEndpointSource } from '../../../src/traffic/endpoint-sources/static-source.js';
import { selectedWorkloadEntries, WorkloadEntryEndpointSource } from '../../../src/traffic/endpoint-sources/workload-entry-source.js';
import type { EndpointSpec } from '../../../src/traffic/spec.js';
import { se, SHOP, snapshotOf, we } from '../resources.js';

const servicesOf = (s: ResourceSnapshot): readonly ServiceSpec[] => buildClusters(s, { workload: SHOP }).services;
const brief = (es: readonly EndpointSpec[]): string[] => es.map((e) => `${e.address}:${e.port} w${e.weight}${Object.keys(e.labels).length ? ` ${JSON.stringify(e.labels)}` : ''}`);

const DB = (endpoints: string, ports = '[{number: 5432, name: pg, protocol: TCP, targetPort: 15432}, {number: 9000, name: admin, protocol: TCP}]'): string =>
  se('db', `{hosts: [db.shop.svc.cluster.local], addresses: [10.0.0.5], ports: ${ports}, resolution: STATIC, endpoints: ${endpoints}}`);

describe('StaticEndpointSource: a ServiceEntry\'s endpoints', () => {
  it('maps each endpoint to each service port: its own port by name, else targetPort, else the port', () => {
    const source = new StaticEndpointSource();
    source.update(servicesOf(snapshotOf(DB('[{address: 10.1.0.1, ports: {admin: 9999}, labels: {v: a}, weight: 3, locality: r/z, serviceAccount: db}, {address: "fd00::2"}]'))));
    assert.deepEqual(brief(source.endpointsOf('db.shop.svc.cluster.local:5432')), ['10.1.0.1:15432 w3 {"v":"a"}', 'fd00::2:15432 w1']);
    assert.deepEqual(brief(source.endpointsOf('db.shop.svc.cluster.local:9000')), ['10.1.0.1:9999 w3 {"v":"a"}', 'fd00::2:9000 w1'], 'weight 0 counts as 1');
    const [first] = source.endpointsOf('db.shop.svc.cluster.local:5432');
    assert.deepEqual([first!.locality, first!.serviceAccount, first!.origin], ['r/z', 'db', 'ServiceEntry shop/db']);
    assert.ok(Object.isFrozen(source.endpointsOf('db.shop.svc.cluster.local:5432')));
    assert.deepEqual(source.endpointsOf('nope:1'), []);
  });

  it('tells listeners which services changed, and only those; keeps the same arrays for the others', () => {
    const source = new StaticEndpointSource();
    const told: string[][] = [];
    const stop = source.onChange((keys) => told.push([...keys]));
    source.update(servicesOf(snapshotOf(DB('[{address: 10.1.0.1}]'))));
    assert.deepEqual(told, [['db.shop.svc.cluster.local:5432', 'db.shop.svc.cluster.local:9000']]);
    const before = source.endpointsOf('db.shop.svc.cluster.local:9000');
    source.update(servicesOf(snapshotOf(DB('[{address: 10.1.0.1, ports: {pg: 6000}}]'))));
    assert.deepEqual(told[1], ['db.shop.svc.cluster.local:5432'], 'only the port whose endpoints changed');
    assert.equal(source.endpointsOf('db.shop.svc.cluster.local:9000'), before, 'unchanged: the same frozen array');
    source.update(servicesOf(snapshotOf(DB('[{address: 10.1.0.1, ports: {pg: 6000}}]'))));
    assert.equal(told.length, 2, 'nothing changed: nothing told');
    source.update([]);
    assert.deepEqual(told[2], ['db.shop.svc.cluster.local:5432', 'db.shop.svc.cluster.local:9000'], 'removed services are changes too');
    assert.deepEqual(source.endpointsOf('db.shop.svc.cluster.local:5432'), []);
    stop();
    source.update(servicesOf(snapshotOf(DB('[{address: 10.1.0.1}]'))));
    assert.equal(told.length, 3, 'unsubscribed');
  });

  it('serves STATIC entries only: DNS, NONE and workloadSelector entries are other sources\'', () => {
    const source = new StaticEndpointSource();
    source.update(servicesOf(snapshotOf(
      se('dns', '{hosts: [a.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS, endpoints: [{address: 10.0.0.1}]}'),
      se('none', '{hosts: [b.example.com], ports: [{number: 80, name: http, protocol: HTTP}]}'),
      se('wl', '{hosts: [c.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC, workloadSelector: {labels: {app: c}}}'),
    )));
    assert.deepEqual(source.services(), []);
  });

  it('endpointPort and selectSubset', () => {
    const service = { port: { number: 80, name: 'http', targetPort: 8080 } };
    assert.equal(endpointPort(service, { http: 9090 }), 9090);
    assert.equal(endpointPort(service, { other: 9090 }), 8080);
    assert.equal(endpointPort({ port: { number: 80, name: 'http' } }, {}), 80);
    const es = [{ labels: { version: 'v1', zone: 'a' } }, { labels: { version: 'v2' } }] as unknown as EndpointSpec[];
    assert.deepEqual(selectSubset(es, { version: 'v1' }), [es[0]]);
    assert.deepEqual(selectSubset(es, {}), es);
    assert.deepEqual(selectSubset(es, undefined), es);
    assert.deepEqual(selectSubset(es, { version: 'v3' }), []);
  });
});

describe('WorkloadEntryEndpointSource: WorkloadEntries chosen by labels', () => {
  const entry = se('reviews', '{hosts: [reviews.example.com], addresses: [10.0.0.7], ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}], resolution: STATIC, workloadSelector: {labels: {app: reviews}}}');
  it('selects the entry\'s namespace\'s WorkloadEntries whose labels contain the selector', () => {
    const snap = snapshotOf(entry,
      we('vm-1', '{address: 10.2.0.1, labels: {app: reviews, version: v1}, ports: {http: 9080}, weight: 2}'),
      we('vm-2', '{address: 10.2.0.2, labels: {app: reviews, version: v2}}'),
      we('other', '{address: 10.2.0.3, labels: {app: ratings}}'),
      we('elsewhere/vm-3', '{address: 10.2.0.4, labels: {app: reviews}}'));
    assert.deepEqual(selectedWorkloadEntries(snap.serviceEntries[0]!, snap.workloadEntries).map((w) => w.meta.name), ['vm-1', 'vm-2']);
    const source = new WorkloadEntryEndpointSource();
    source.update(servicesOf(snap), snap.workloadEntries);
    const es = source.endpointsOf('reviews.example.com:80');
    assert.deepEqual(brief(es), ['10.2.0.1:9080 w2 {"app":"reviews","version":"v1"}', '10.2.0.2:8080 w1 {"app":"reviews","version":"v2"}']);
    assert.equal(es[0]!.origin, 'WorkloadEntry shop/vm-1');
    assert.deepEqual(brief(selectSubset(es, { version: 'v2' })), ['10.2.0.2:8080 w1 {"app":"reviews","version":"v2"}'], 'subsets select by the WorkloadEntries\' labels');
  });
  it('follows WorkloadEntries as they come and go', () => {
    const source = new WorkloadEntryEndpointSource();
    const told: string[][] = [];
    source.onChange((k) => told.push([...k]));
    const one = snapshotOf(entry, we('vm-1', '{address: 10.2.0.1, labels: {app: reviews}}'));
    source.update(servicesOf(one), one.workloadEntries);
    const two = snapshotOf(entry, we('vm-1', '{address: 10.2.0.1, labels: {app: reviews}}'), we('vm-2', '{address: 10.2.0.2, labels: {app: reviews}}'));
    source.update(servicesOf(two), two.workloadEntries);
    assert.deepEqual(brief(source.endpointsOf('reviews.example.com:80')), ['10.2.0.1:8080 w1 {"app":"reviews"}', '10.2.0.2:8080 w1 {"app":"reviews"}']);
    source.update(servicesOf(one), one.workloadEntries);
    assert.deepEqual(brief(source.endpointsOf('reviews.example.com:80')), ['10.2.0.1:8080 w1 {"app":"reviews"}']);
    assert.deepEqual(told, [['reviews.example.com:80'], ['reviews.example.com:80'], ['reviews.example.com:80']]);
  });
  it('leaves out a WorkloadEntry named by DNS (STATIC needs an address), saying so once', () => {
    const logged: string[] = [];
    const source = new WorkloadEntryEndpointSource({ log: (m) => logged.push(m) });
    const snap = snapshotOf(entry, we('vm-1', '{address: vm-1.example.com, labels: {app: reviews}}'));
    source.update(servicesOf(snap), snap.workloadEntries);
    source.update(servicesOf(snap), snap.workloadEntries);
    assert.deepEqual(source.endpointsOf('reviews.example.com:80'), []);
    assert.deepEqual(logged, ['WorkloadEntry shop/vm-1 (address vm-1.example.com) is left out of ServiceEntry shop/reviews: resolution STATIC needs an IP address']);
  });
});
