// VirtualService fields that shape traffic (retries, timeout, sourceLabels, sourceNamespace,
// exportTo) and the fields refused until they are honoured: a table of tweaks to one valid route.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { HttpRoute, VirtualService } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

/** A mesh VirtualService (no gateways) whose only route is `extra` + a route to reviews. */
const mesh = (extra: string, spec = ''): string => `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews.shop.svc.cluster.local]
${indent(spec)}
  http:
  - route: [{destination: {host: reviews.shop.svc.cluster.local, subset: v1}}]
${indent(extra, 4)}
`;
const routeOf = (yaml: string): HttpRoute => (accept(yaml).resource as VirtualService).http[0]!;

it('reads retries as written (defaults are filled in by the clusters)', () => {
  const cases: { yaml: string; want: unknown }[] = [
    { yaml: 'retries: {attempts: 3}', want: { attempts: 3 } },
    { yaml: 'retries: {}', want: { attempts: 0 } },
    { yaml: 'retries: {attempts: 0}', want: { attempts: 0 } },
    { yaml: 'retries: {attempts: 2, perTryTimeout: 500ms, retryOn: "5xx,gateway-error,503,reset", retryRemoteLocalities: true, retryIgnorePreviousHosts: false, backoff: 50ms}',
      want: { attempts: 2, perTryTimeoutMs: 500, retryOn: { conditions: ['5xx', 'gateway-error', 'reset'], statusCodes: [503] }, retryRemoteLocalities: true,
        retryIgnorePreviousHosts: false, backoffMs: 50 } },
    { yaml: 'retries: {attempts: 1, retryOn: "cancelled,deadline-exceeded,internal,resource-exhausted,unavailable,retriable-status-codes,429"}',
      want: { attempts: 1, retryOn: { conditions: ['cancelled', 'deadline-exceeded', 'internal', 'resource-exhausted', 'unavailable', 'retriable-status-codes'], statusCodes: [429] } } },
    { yaml: 'retries: {attempts: 1, retryOn: "connect-failure,connect-failure,502,502"}', want: { attempts: 1, retryOn: { conditions: ['connect-failure'], statusCodes: [502] } } },
  ];
  for (const c of cases) assert.deepEqual(routeOf(mesh(c.yaml)).retries, c.want, c.yaml);
  assert.equal(routeOf(mesh('')).retries, undefined, 'absent: Istio\'s default policy applies');
  assert.deepEqual(acceptWarned(mesh('retries: {attempts: 2}')).warnings, []);
  assert.deepEqual(acceptWarned(mesh('retries: {attempts: 2, retryRemoteLocalities: true}')).warnings, [], 'retryRemoteLocalities is honoured: nothing to say');
  assert.equal(routeOf(mesh('timeout: 2s')).timeoutMs, 2000);
  assert.equal(routeOf(mesh('timeout: 1ms')).timeoutMs, 1);
});

it('refuses retries and timeouts Istio refuses', () => {
  const at = 'spec.http[0]';
  assertRejections([
    { name: 'negative attempts', yaml: mesh('retries: {attempts: -1}'), field: `${at}.retries.attempts`, message: /from 0/ },
    { name: 'retryOn with attempts 0', yaml: mesh('retries: {retryOn: 5xx}'), field: `${at}.retries.retryOn`, message: /is given while attempts is 0 \(retries off\), which Istio refuses/ },
    { name: 'perTryTimeout with attempts 0', yaml: mesh('retries: {attempts: 0, perTryTimeout: 1s}'), field: `${at}.retries.perTryTimeout`, message: /attempts is 0/ },
    { name: 'retryRemoteLocalities with attempts 0', yaml: mesh('retries: {retryRemoteLocalities: false}'), field: `${at}.retries.retryRemoteLocalities`, message: /attempts is 0/ },
    { name: 'unknown retryOn name', yaml: mesh('retries: {attempts: 1, retryOn: "5xx,timeout"}'), field: `${at}.retries.retryOn`, message: /^"timeout" is not a retry condition; accepted: 5xx, gateway-error/ },
    { name: 'a space after a comma', yaml: mesh('retries: {attempts: 1, retryOn: "5xx, reset"}'), field: `${at}.retries.retryOn`, message: /" reset" is not a retry condition \(no spaces around the commas/ },
    { name: 'a trailing comma', yaml: mesh('retries: {attempts: 1, retryOn: "5xx,"}'), field: `${at}.retries.retryOn`, message: /"" is not a retry condition \(an empty entry\)/ },
    { name: 'a number that is no status', yaml: mesh('retries: {attempts: 1, retryOn: "599"}'), field: `${at}.retries.retryOn`, message: /"599" is not a retry condition/ },
    { name: 'perTryTimeout under 1ms', yaml: mesh('retries: {attempts: 1, perTryTimeout: 100us}'), field: `${at}.retries.perTryTimeout`, message: /shorter than 1ms/ },
    { name: 'negative backoff', yaml: mesh('retries: {attempts: 1, backoff: -25ms}'), field: `${at}.retries.backoff`, message: /negative/ },
    { name: 'unknown retries field', yaml: mesh('retries: {attempts: 1, retriesOn: 5xx}'), field: `${at}.retries.retriesOn`, message: /unknown field "retriesOn"/ },
    { name: 'timeout 0s', yaml: mesh('timeout: 0s'), field: `${at}.timeout`, message: /"0s" is shorter than 1ms, which Istio refuses/ },
    { name: 'negative timeout', yaml: mesh('timeout: -1s'), field: `${at}.timeout`, message: /negative/ },
    { name: 'timeout below a millisecond', yaml: mesh('timeout: 1.5ms'), field: `${at}.timeout`, message: /not a whole number of milliseconds/ },
  ]);
});

it('reads sourceLabels and sourceNamespace; warns where Istio gives them no effect (gateways)', () => {
  const m = routeOf(mesh('match: [{sourceLabels: {app: productpage, version: v1}, sourceNamespace: front}]')).match[0]!;
  assert.deepEqual([m.sourceLabels, m.sourceNamespace], [{ app: 'productpage', version: 'v1' }, 'front']);
  assert.deepEqual(acceptWarned(mesh('match: [{sourceLabels: {app: a}}]')).warnings, []);
  const gateway = acceptWarned(mesh('match: [{sourceLabels: {app: a}, sourceNamespace: front}]', 'gateways: [mesh-system/ingress]'));
  assert.deepEqual(gateway.warnings, [
    'spec.http[0].match[0].sourceLabels: has no effect: Istio applies it to sidecars only, and this match is not bound to the mesh gateway',
    'spec.http[0].match[0].sourceNamespace: has no effect: Istio applies it to sidecars only, and this match is not bound to the mesh gateway',
  ]);
  const scoped = acceptWarned(mesh('match: [{sourceLabels: {app: a}, gateways: [mesh-system/ingress]}]', 'gateways: [mesh, mesh-system/ingress]'));
  assert.equal(scoped.warnings.length, 1, 'a match restricted to a gateway gives it no effect either');
  assert.deepEqual(acceptWarned(mesh('match: [{sourceLabels: {app: a}}]', 'gateways: [mesh, mesh-system/ingress]')).warnings, [], 'bound to mesh too');
  assertRejections([
    { name: 'bad sourceNamespace', yaml: mesh('match: [{sourceNamespace: Front}]'), field: 'spec.http[0].match[0].sourceNamespace', message: /not a valid namespace/ },
  ]);
});

it('reads exportTo (sidecars honour it); refuses it where the gateway would not', () => {
  assert.deepEqual((accept(mesh('', 'exportTo: ["."]')).resource as VirtualService).exportTo, ['shop']);
  assert.equal((accept(mesh('')).resource as VirtualService).exportTo, undefined);
  assert.deepEqual((accept(mesh('', 'gateways: [gw]\nexportTo: ["*"]')).resource as VirtualService).exportTo, ['*']);
  assertRejections([
    { name: 'scoped exportTo on a gateway VirtualService', yaml: mesh('', 'gateways: [mesh, gw]\nexportTo: ["."]'), field: 'spec.exportTo', message: /^is not supported yet on a VirtualService bound to a gateway/ },
    { name: 'exportTo twice', yaml: mesh('', 'exportTo: [a, a]'), field: 'spec.exportTo[1]', message: /listed twice/ },
  ]);
});

it('refuses, naming the field, what is not supported yet (no field is silently ignored)', () => {
  const at = 'spec.http[0]';
  assertRejections([
    { name: 'fault', yaml: mesh('fault: {abort: {httpStatus: 500, percentage: {value: 10}}}'), field: `${at}.fault`, message: /^is not supported yet: fault injection/ },
    { name: 'mirror', yaml: mesh('mirror: {host: shadow}'), field: `${at}.mirror`, message: /^is not supported yet: mirroring/ },
    { name: 'mirrors', yaml: mesh('mirrors: [{destination: {host: shadow}}]'), field: `${at}.mirrors`, message: /^is not supported yet: mirroring/ },
    { name: 'mirrorPercentage', yaml: mesh('mirrorPercentage: {value: 5}'), field: `${at}.mirrorPercentage`, message: /^is not supported yet: mirroring/ },
    { name: 'corsPolicy', yaml: mesh('corsPolicy: {allowOrigins: [{exact: a}]}'), field: `${at}.corsPolicy`, message: /^is not supported yet: CORS/ },
    { name: 'delegate', yaml: mesh('delegate: {name: other}'), field: `${at}.delegate`, message: /^is not supported yet: delegating/ },
    { name: 'response header edits', yaml: mesh('headers: {response: {set: {x: y}}}'), field: `${at}.headers.response`, message: /^is not supported yet: response header edits$/ },
    { name: 'header edits per destination', yaml: mesh('', '').replace('subset: v1}}', 'subset: v1}, headers: {request: {set: {x: y}}}}'), field: `${at}.route[0].headers`, message: /^is not supported yet: header edits per destination$/ },
    { name: 'uriRegexRewrite', yaml: mesh('rewrite: {uriRegexRewrite: {match: a, rewrite: b}}'), field: `${at}.rewrite.uriRegexRewrite`, message: /^is not supported yet: regex rewrites/ },
    { name: 'statPrefix', yaml: mesh('match: [{statPrefix: x, uri: {prefix: /}}]'), field: `${at}.match[0].statPrefix`, message: /^is not supported yet: per-route statistics$/ },
  ]);
});

it('refuses what else Istio refuses: claims on the mesh, overlapping hosts, bad subset names', () => {
  assertRejections([
    { name: 'a claim in a mesh VirtualService', yaml: mesh('match: [{headers: {"@request.auth.claims.group": {exact: a}}}]'),
      field: 'spec.http[0].match[0].headers[@request.auth.claims.group]', message: /Istio allows only in a VirtualService bound to gateways alone/ },
    { name: 'overlapping hosts', yaml: mesh('').replace('hosts: [reviews.shop.svc.cluster.local]', 'hosts: ["*.shop.svc.cluster.local", reviews.shop.svc.cluster.local]'),
      field: 'spec.hosts[1]', message: /overlaps "\*\.shop\.svc\.cluster\.local"/ },
    { name: 'the same host twice', yaml: mesh('').replace('hosts: [reviews.shop.svc.cluster.local]', 'hosts: [a.com, A.com]'), field: 'spec.hosts[1]', message: /overlaps "a\.com"/ },
    { name: 'subset not a DNS label', yaml: mesh('').replace('subset: v1', 'subset: V_1'), field: 'spec.http[0].route[0].destination.subset', message: /not a valid subset name/ },
  ]);
});
