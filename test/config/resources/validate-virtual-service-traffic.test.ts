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

it('reads fault injection as Istio translates it for Envoy (shares per million; a share left out is none)', () => {
  const cases: { yaml: string; want: unknown }[] = [
    { yaml: 'fault: {delay: {fixedDelay: 2s, percentage: {value: 12.5}}}', want: { delay: { fixedDelayMs: 2000, perMillion: 125_000 } } },
    { yaml: 'fault: {delay: {fixedDelay: 5ms, percent: 30}}', want: { delay: { fixedDelayMs: 5, perMillion: 300_000 } } },
    { yaml: 'fault: {delay: {fixedDelay: 5ms, percent: 30, percentage: {value: 1}}}', want: { delay: { fixedDelayMs: 5, perMillion: 10_000 } } },
    { yaml: 'fault: {delay: {fixedDelay: 1s}}', want: { delay: { fixedDelayMs: 1000, perMillion: 0 } } },
    { yaml: 'fault: {abort: {httpStatus: 418, percentage: {value: 100}}}', want: { abort: { perMillion: 1_000_000, httpStatus: 418 } } },
    { yaml: 'fault: {abort: {grpcStatus: UNAVAILABLE, percentage: {value: 0.0001}}}', want: { abort: { perMillion: 1, grpcStatus: 14 } } },
    { yaml: 'fault: {abort: {httpStatus: 503}}', want: { abort: { perMillion: 0, httpStatus: 503 } } },
    { yaml: 'fault: {delay: {fixedDelay: 1s, percentage: {value: 50}}, abort: {httpStatus: 500, percentage: {value: 50}}}',
      want: { delay: { fixedDelayMs: 1000, perMillion: 500_000 }, abort: { perMillion: 500_000, httpStatus: 500 } } },
  ];
  for (const c of cases) assert.deepEqual(routeOf(mesh(c.yaml)).fault, c.want, c.yaml);
  assert.equal(routeOf(mesh('')).fault, undefined);
  const at = 'spec.http[0].fault';
  assertRejections([
    { name: 'empty fault', yaml: mesh('fault: {}'), field: at, message: /needs delay or abort/ },
    { name: 'delay without fixedDelay', yaml: mesh('fault: {delay: {percent: 5}}'), field: `${at}.delay.fixedDelay`, message: /^required/ },
    { name: 'exponentialDelay', yaml: mesh('fault: {delay: {exponentialDelay: 1s}}'), field: `${at}.delay.exponentialDelay`, message: /^is not supported yet: exponential delays/ },
    { name: 'percentage over 100', yaml: mesh('fault: {delay: {fixedDelay: 1s, percentage: {value: 101}}}'), field: `${at}.delay.percentage.value`, message: /from 0 to 100/ },
    { name: 'negative percentage', yaml: mesh('fault: {abort: {httpStatus: 500, percentage: {value: -1}}}'), field: `${at}.abort.percentage.value`, message: /from 0 to 100/ },
    { name: 'percent over 100', yaml: mesh('fault: {delay: {fixedDelay: 1s, percent: 150}}'), field: `${at}.delay.percent`, message: /from 0 to 100/ },
    { name: 'abort without status', yaml: mesh('fault: {abort: {percentage: {value: 1}}}'), field: `${at}.abort`, message: /needs httpStatus or grpcStatus/ },
    { name: 'both statuses', yaml: mesh('fault: {abort: {httpStatus: 500, grpcStatus: INTERNAL}}'), field: `${at}.abort`, message: /only one of httpStatus or grpcStatus/ },
    { name: 'httpStatus out of range', yaml: mesh('fault: {abort: {httpStatus: 99}}'), field: `${at}.abort.httpStatus`, message: /from 200 to 599/ },
    { name: 'unknown gRPC status', yaml: mesh('fault: {abort: {grpcStatus: "14"}}'), field: `${at}.abort.grpcStatus`, message: /"14" is not a gRPC status name; accepted: OK, CANCELLED/ },
    { name: 'abort percent (no such field in Istio)', yaml: mesh('fault: {abort: {httpStatus: 500, percent: 5}}'), field: `${at}.abort.percent`, message: /unknown field "percent"/ },
  ]);
});

it('reads response header edits and header edits per destination; refuses edits of the names the proxy owns', () => {
  const r = routeOf(mesh('headers: {response: {set: {X-Frame: deny}, add: {x-tag: r}, remove: [Server]}}'));
  assert.deepEqual(r.responseHeaders, { set: { 'x-frame': 'deny' }, add: { 'x-tag': 'r' }, remove: ['server'] });
  const d = routeOf(mesh('', '').replace('subset: v1}}', 'subset: v1}, headers: {request: {set: {x-v: "1"}}, response: {remove: [x-drop]}}}'));
  assert.deepEqual(d.route[0]!.headers, { request: { set: { 'x-v': '1' }, add: {}, remove: [] }, response: { set: {}, add: {}, remove: ['x-drop'] } });
  const at = 'spec.http[0].headers';
  assertRejections([
    { name: 'set XFCC', yaml: mesh('headers: {request: {set: {X-Forwarded-Client-Cert: forged}}}'), field: `${at}.request.set[X-Forwarded-Client-Cert]`, message: /cannot be edited by a route: it is asserted by the proxy/ },
    { name: 'remove XFCC', yaml: mesh('headers: {request: {remove: [x-forwarded-client-cert]}}'), field: `${at}.request.remove[0]`, message: /asserted by the proxy/ },
    { name: 'add x-envoy-*', yaml: mesh('headers: {request: {add: {x-envoy-peer-metadata: x}}}'), field: `${at}.request.add[x-envoy-peer-metadata]`, message: /Envoy's internal headers/ },
    { name: 'response content-length', yaml: mesh('headers: {response: {set: {content-length: "0"}}}'), field: `${at}.response.set[content-length]`, message: /the connection and the framing/ },
    { name: 'response transfer-encoding removed', yaml: mesh('headers: {response: {remove: [Transfer-Encoding]}}'), field: `${at}.response.remove[0]`, message: /framing/ },
    { name: 'request connection', yaml: mesh('headers: {request: {set: {connection: close}}}'), field: `${at}.request.set[connection]`, message: /framing/ },
    { name: 'remove host', yaml: mesh('headers: {request: {remove: [host]}}'), field: `${at}.request.remove`, message: /cannot remove Host/ },
    { name: 'per destination too', yaml: mesh('', '').replace('subset: v1}}', 'subset: v1}, headers: {response: {add: {x-envoy-upstream-service-time: "1"}}}}'),
      field: 'spec.http[0].route[0].headers.response.add[x-envoy-upstream-service-time]', message: /Envoy's internal headers/ },
  ]);
});

it('refuses, naming the field, what is not supported yet (no field is silently ignored)', () => {
  const at = 'spec.http[0]';
  assertRejections([
    { name: 'delegate', yaml: mesh('delegate: {name: other}'), field: `${at}.delegate`, message: /^is not supported yet: delegating/ },
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
