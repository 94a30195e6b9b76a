// VirtualService mirrors (mirror + mirrorPercentage / mirrorPercent, mirrors[]) and corsPolicy:
// what is read, Istio's defaults, and what is refused or warned about.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { HttpRoute, VirtualService } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

const vs = (extra: string, action = 'route: [{destination: {host: reviews.shop.svc.cluster.local}}]'): string => `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  http:
  - ${action}
${indent(extra, 4)}
`;
const routeOf = (yaml: string): HttpRoute => (accept(yaml).resource as VirtualService).http[0]!;
const at = 'spec.http[0]';

it('reads mirror with Istio\'s default of 100%, its percentage, and an explicit 0', () => {
  assert.deepEqual(routeOf(vs('mirror: {host: shadow, subset: v2, port: {number: 9080}}')).mirrors,
    [{ destination: { host: 'shadow', subset: 'v2', port: 9080, weight: 100 }, percent: 100 }]);
  assert.deepEqual(routeOf(vs('mirror: {host: shadow}\nmirrorPercentage: {value: 12.5}')).mirrors?.[0]?.percent, 12.5);
  assert.deepEqual(routeOf(vs('mirror: {host: shadow}\nmirrorPercentage: {value: 0}')).mirrors?.[0]?.percent, 0);
  assert.deepEqual(routeOf(vs('mirror: {host: shadow}\nmirrorPercentage: {}')).mirrors?.[0]?.percent, 0, 'an empty Percent is 0, as protobuf reads it');
  assert.equal(routeOf(vs('')).mirrors, undefined);
  const old = acceptWarned(vs('mirror: {host: shadow}\nmirrorPercent: 30'));
  assert.equal((old.value.resource as VirtualService).http[0]!.mirrors?.[0]?.percent, 30);
  assert.deepEqual(old.warnings, [`${at}.mirrorPercent: is deprecated: use mirrorPercentage`]);
  const both = acceptWarned(vs('mirror: {host: shadow}\nmirrorPercent: 30\nmirrorPercentage: {value: 5}'));
  assert.equal((both.value.resource as VirtualService).http[0]!.mirrors?.[0]?.percent, 5, 'mirrorPercentage wins, as in Istio');
  assert.match(both.warnings[0] ?? '', /mirrorPercent: is deprecated and ignored beside mirrorPercentage/);
});

it('reads mirrors[] (each with its own percentage, 100 by default)', () => {
  assert.deepEqual(routeOf(vs('mirrors: [{destination: {host: a}}, {destination: {host: b}, percentage: {value: 50}}]')).mirrors, [
    { destination: { host: 'a', weight: 100 }, percent: 100 },
    { destination: { host: 'b', weight: 100 }, percent: 50 },
  ]);
});

it('refuses mirrors Istio refuses, and what would have no place to apply', () => {
  assertRejections([
    { name: 'mirror and mirrors', yaml: vs('mirror: {host: a}\nmirrors: [{destination: {host: b}}]'), field: `${at}.mirrors`, message: /is given with mirror/ },
    { name: 'a percentage without mirror', yaml: vs('mirrorPercentage: {value: 5}'), field: `${at}.mirrorPercentage`, message: /^only applies with mirror$/ },
    { name: 'mirrorPercent without mirror', yaml: vs('mirrorPercent: 5'), field: `${at}.mirrorPercent`, message: /^only applies with mirror$/ },
    { name: 'over 100', yaml: vs('mirror: {host: a}\nmirrorPercentage: {value: 100.5}'), field: `${at}.mirrorPercentage.value`, message: /not a percentage from 0 to 100/ },
    { name: 'negative', yaml: vs('mirror: {host: a}\nmirrorPercentage: {value: -1}'), field: `${at}.mirrorPercentage.value`, message: /not a percentage/ },
    { name: 'not a number', yaml: vs('mirror: {host: a}\nmirrorPercentage: {value: half}'), field: `${at}.mirrorPercentage.value`, message: /expected a number/ },
    { name: 'mirrorPercent over 100', yaml: vs('mirror: {host: a}\nmirrorPercent: 101'), field: `${at}.mirrorPercent`, message: /100/ },
    { name: 'a wildcard host', yaml: vs('mirror: {host: "*.a.com"}'), field: `${at}.mirror.host`, message: /cannot be a wildcard/ },
    { name: 'no destination', yaml: vs('mirrors: [{percentage: {value: 5}}]'), field: `${at}.mirrors[0].destination`, message: /required/ },
    { name: 'unknown field', yaml: vs('mirrors: [{destination: {host: a}, weight: 5}]'), field: `${at}.mirrors[0].weight`, message: /unknown field/ },
    { name: 'with a redirect', yaml: vs('mirror: {host: a}', 'redirect: {uri: /x}'), field: `${at}.mirror`, message: /only applies with route/ },
  ]);
});

it('reads corsPolicy as Envoy is given it (lists joined, maxAge in seconds, FORWARD by default)', () => {
  const c = routeOf(vs(`corsPolicy:
  allowOrigins: [{exact: "https://a.com"}, {prefix: "https://b."}, {regex: "https://.*\\\\.c\\\\.com"}]
  allowMethods: [GET, POST]
  allowHeaders: [x-a, X-B]
  exposeHeaders: [x-c]
  maxAge: 1m
  allowCredentials: true`)).corsPolicy!;
  assert.deepEqual(c.allowOrigins.map((m) => [m.kind, m.kind === 'present' ? '' : m.value]),
    [['exact', 'https://a.com'], ['prefix', 'https://b.'], ['regex', 'https://.*\\.c\\.com']]);
  assert.deepEqual({ ...c, allowOrigins: undefined }, {
    allowOrigins: undefined, allowMethods: 'GET,POST', allowHeaders: 'x-a,X-B', exposeHeaders: 'x-c', maxAge: '60', allowCredentials: true, unmatchedPreflights: 'FORWARD',
  });
  assert.equal(routeOf(vs('corsPolicy: {unmatchedPreflights: IGNORE}')).corsPolicy?.unmatchedPreflights, 'IGNORE');
  assert.equal(routeOf(vs('corsPolicy: {unmatchedPreflights: UNSPECIFIED}')).corsPolicy?.unmatchedPreflights, 'FORWARD');
  const old = acceptWarned(vs('corsPolicy: {allowOrigin: ["https://a.com", "*"]}'));
  assert.deepEqual((old.value.resource as VirtualService).http[0]!.corsPolicy?.allowOrigins, [{ kind: 'exact', value: 'https://a.com' }, { kind: 'exact', value: '*' }]);
  assert.match(old.warnings[0] ?? '', /corsPolicy\.allowOrigin: is deprecated: use allowOrigins/);
  const both = acceptWarned(vs('corsPolicy: {allowOrigins: [{exact: "https://a.com"}], allowOrigin: ["https://b.com"]}'));
  assert.deepEqual((both.value.resource as VirtualService).http[0]!.corsPolicy?.allowOrigins, [{ kind: 'exact', value: 'https://a.com' }]);
  assert.match(both.warnings[0] ?? '', /allowOrigin: is deprecated and ignored beside allowOrigins/);
  const redirect = acceptWarned(vs('corsPolicy: {allowOrigins: [{exact: a}]}', 'redirect: {uri: /x}'));
  assert.equal((redirect.value.resource as VirtualService).http[0]!.corsPolicy, undefined);
  assert.match(redirect.warnings[0] ?? '', /corsPolicy: has no effect on a rule that redirects or answers directly/);
});

it('refuses corsPolicy values Istio refuses', () => {
  const c = `${at}.corsPolicy`;
  assertRejections([
    { name: 'unknown method', yaml: vs('corsPolicy: {allowMethods: [GET, FETCH]}'), field: `${c}.allowMethods[1]`, message: /"FETCH" is not a supported HTTP method/ },
    { name: 'lower-case method', yaml: vs('corsPolicy: {allowMethods: [get]}'), field: `${c}.allowMethods[0]`, message: /not a supported HTTP method/ },
    { name: 'bad header name', yaml: vs('corsPolicy: {allowHeaders: ["x a"]}'), field: `${c}.allowHeaders[0]`, message: /not a valid HTTP header name/ },
    { name: 'bad expose header', yaml: vs('corsPolicy: {exposeHeaders: ["x:a"]}'), field: `${c}.exposeHeaders[0]`, message: /not a valid HTTP header name/ },
    { name: 'maxAge not whole seconds', yaml: vs('corsPolicy: {maxAge: 1500ms}'), field: `${c}.maxAge`, message: /not a whole number of seconds/ },
    { name: 'empty origin', yaml: vs('corsPolicy: {allowOrigins: [{exact: ""}]}'), field: `${c}.allowOrigins[0]`, message: /empty origin matcher/ },
    { name: 'origin without a kind', yaml: vs('corsPolicy: {allowOrigins: [{}]}'), field: `${c}.allowOrigins[0]`, message: /expected one of exact, prefix or regex/ },
    { name: 'bad regex', yaml: vs('corsPolicy: {allowOrigins: [{regex: "("}]}'), field: `${c}.allowOrigins[0].regex`, message: /not a valid regular expression/ },
    { name: 'bad unmatchedPreflights', yaml: vs('corsPolicy: {unmatchedPreflights: DROP}'), field: `${c}.unmatchedPreflights`, message: /not one of UNSPECIFIED, FORWARD, IGNORE/ },
    { name: 'unknown field', yaml: vs('corsPolicy: {allowOrigns: []}'), field: `${c}.allowOrigns`, message: /unknown field/ },
  ]);
});
