import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { VirtualService, Workload } from '../../src/config/resources/types.js';
import { meshVirtualServices } from '../../src/traffic/mesh-routes.js';
import { snapshotOf, vs } from './resources.js';

const routes = (spec: string, workload: Workload = { namespace: 'shop', labels: { app: 'productpage', version: 'v1' } }): string[] =>
  meshVirtualServices(snapshotOf(vs('reviews', spec)).virtualServices, { workload }).flatMap((v: VirtualService) =>
    v.http.map((r) => `${v.hosts.join(',')} ${r.name ?? '?'}:${r.match.map((m) => m.name ?? '*').join('|') || 'all'}`));

it('keeps the mesh VirtualServices this sidecar sees, with the matches that apply to it', () => {
  const http = `[
    {name: labels, match: [{name: mine, sourceLabels: {app: productpage}}, {name: theirs, sourceLabels: {app: other}}], route: [{destination: {host: reviews}}]},
    {name: ns, match: [{name: here, sourceNamespace: shop}, {name: there, sourceNamespace: other}], route: [{destination: {host: reviews}}]},
    {name: gone, match: [{name: nope, sourceLabels: {version: v2}}], route: [{destination: {host: reviews}}]},
    {name: gw, match: [{name: gwonly, gateways: [ingress]}, {name: both, gateways: [ingress, mesh]}], route: [{destination: {host: reviews}}]},
    {name: rest, route: [{destination: {host: reviews}}]}]`;
  assert.deepEqual(routes(`{hosts: [reviews], http: ${http}}`), [
    'reviews.shop.svc.cluster.local labels:mine',
    'reviews.shop.svc.cluster.local ns:here',
    'reviews.shop.svc.cluster.local gw:both',
    'reviews.shop.svc.cluster.local rest:all',
  ]);
  assert.deepEqual(routes(`{hosts: [reviews], http: ${http}}`, { namespace: 'shop', labels: { app: 'other', version: 'v2' } }), [
    'reviews.shop.svc.cluster.local labels:theirs',
    'reviews.shop.svc.cluster.local ns:here',
    'reviews.shop.svc.cluster.local gone:nope',
    'reviews.shop.svc.cluster.local gw:both',
    'reviews.shop.svc.cluster.local rest:all',
  ]);
});

it('leaves out gateway-only VirtualServices and those not exported to the sidecar\'s namespace', () => {
  const one = '[{name: r, route: [{destination: {host: reviews}}]}]';
  assert.deepEqual(routes(`{hosts: [reviews.shop.svc.cluster.local], gateways: [ingress], http: ${one}}`), []);
  assert.deepEqual(routes(`{hosts: [reviews.shop.svc.cluster.local], gateways: [ingress, mesh], http: ${one}}`), ['reviews.shop.svc.cluster.local r:all']);
  assert.deepEqual(routes(`{hosts: [reviews.shop.svc.cluster.local], exportTo: [other], http: ${one}}`), []);
  assert.deepEqual(routes(`{hosts: [reviews.shop.svc.cluster.local], exportTo: [shop], http: ${one}}`), ['reviews.shop.svc.cluster.local r:all']);
  assert.deepEqual(routes(`{hosts: [reviews.shop.svc.cluster.local], exportTo: ["."], http: ${one}}`, { namespace: 'other', labels: {} }), []);
});
