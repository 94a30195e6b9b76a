import assert from 'node:assert/strict';
import { it } from 'node:test';
import { matchString } from '../../../src/security/claims.js';
import type { VirtualService } from '../../../src/config/resources/types.js';
import { accept, assertRejections, indent, reject } from './helpers.js';
import { formatRejection } from '../../../src/config/resources/format.js';

const head = `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata:
  name: httpbin
  namespace: foo
`;

/** A VirtualService with this spec. */
const vs = (spec: string): string => `${head}spec:\n${indent(spec)}\n`;

/** One HTTP route (under spec.http[0]) on the ingress gateway. */
const route = (http: string): string => vs(`hosts: ["*"]\ngateways: [mesh-system/ingressgateway]\nhttp:\n- ${indent(http).trimStart()}`);

const claimRouting = `${head}spec:
  hosts:
  - "*"
  gateways:
  - mesh-system/ingressgateway
  http:
  - match:
    - uri:
        prefix: /headers
      headers:
        "@request.auth.claims.groups":
          exact: group1
    route:
    - destination:
        port:
          number: 8000
        host: httpbin
`;

it('reads the claim-routing VirtualService an operator writes (Istio docs shape)', () => {
  const v = accept(claimRouting);
  assert.equal(v.kind, 'VirtualService');
  const r = v.resource as VirtualService;
  assert.deepEqual(r.meta, { kind: 'VirtualService', apiVersion: 'networking.mesh.io/v1', name: 'httpbin', namespace: 'foo', origin: { file: 'etc/mesh/resources/test.yaml', index: 0 } });
  assert.deepEqual(r.hosts, ['*']);
  assert.deepEqual(r.gateways, ['mesh-system/ingressgateway']);
  const [http] = r.http;
  assert.deepEqual(http!.match[0]!.uri, { kind: 'prefix', value: '/headers' });
  assert.deepEqual(http!.match[0]!.headers, [{ kind: 'claim', key: '@request.auth.claims.groups', path: ['groups'], match: { kind: 'exact', value: 'group1' } }]);
  assert.deepEqual(http!.route, [{ host: 'httpbin', port: 8000, weight: 100 }]);
  assert.ok(Object.isFrozen(r) && Object.isFrozen(r.http[0]!.route), 'resources are frozen');
});

it('fills in Istio defaults: gateways, gateway names, weights, lower-cased hosts and headers', () => {
  const r = accept(vs(`hosts: [Reviews.Example.COM]
http:
- route:
  - destination: {host: reviews}
`)).resource as VirtualService;
  assert.deepEqual(r.gateways, ['mesh'], 'gateways absent → mesh');
  assert.deepEqual(r.hosts, ['reviews.example.com']);
  assert.deepEqual(r.http[0]!.route, [{ host: 'reviews', weight: 100 }]);
  assert.deepEqual(r.http[0]!.match, []);

  const g = accept(vs(`hosts: [a.example.com]
gateways: [my-gateway, other/gw, mesh]
http:
- match:
  - gateways: [my-gateway]
    headers:
      X-User: {prefix: j}
      x-present: {}
    withoutHeaders:
      x-debug: {}
    queryParams:
      v: {exact: "2"}
    ignoreUriCase: true
    port: 80
  route:
  - destination: {host: a, subset: v1}
    weight: 25
  - destination: {host: b}
    weight: 75
  timeout: 1.5s
  headers:
    request:
      set: {X-Set: one}
      add: {x-add: two}
      remove: [X-Remove]
  retries: {attempts: 3}
`)).resource as VirtualService;
  assert.deepEqual(g.gateways, ['foo/my-gateway', 'other/gw', 'mesh'], 'bare → <vs namespace>/<name>; ns/name and mesh kept');
  const m = g.http[0]!.match[0]!;
  assert.deepEqual(m.gateways, ['foo/my-gateway']);
  assert.deepEqual(m.headers.map((h) => (h.kind === 'header' ? h.name : h.path.join('|'))), ['x-user', 'x-present']);
  assert.deepEqual(m.headers[1]!.match, { kind: 'present' });
  const gw = accept(route(`match: [{headers: {"@Request.Auth.Claims[name][givenName]": {regex: "Jo.*"}}}]\nroute: [{destination: {host: a}}]`)).resource as VirtualService;
  const claim = gw.http[0]!.match[0]!.headers[0]!;
  assert.ok(claim.kind === 'claim' && claim.match.kind === 'regex');
  assert.deepEqual(claim.path, ['name', 'givenName']);
  assert.ok(matchString(claim.match, 'John') && !matchString(claim.match, 'xJohn'), 'regexes are full matches');
  assert.deepEqual(m.withoutHeaders, [{ kind: 'header', name: 'x-debug', match: { kind: 'present' } }]);
  assert.deepEqual(m.queryParams, [{ name: 'v', match: { kind: 'exact', value: '2' } }]);
  assert.equal(m.ignoreUriCase, true);
  assert.equal(m.port, 80);
  assert.deepEqual(g.http[0]!.route, [{ host: 'a', subset: 'v1', weight: 25 }, { host: 'b', weight: 75 }]);
  assert.equal(g.http[0]!.timeoutMs, 1500);
  assert.deepEqual(g.http[0]!.retries, { attempts: 3 });
  assert.deepEqual(g.http[0]!.requestHeaders, { set: { 'x-set': 'one' }, add: { 'x-add': 'two' }, remove: ['x-remove'] });
});

it('reads redirect, directResponse and rewrite', () => {
  const r = accept(route(`match: [{uri: {exact: /old}}]
redirect: {uri: /new, authority: example.com}`)).resource as VirtualService;
  assert.deepEqual(r.http[0]!.redirect, { uri: '/new', authority: 'example.com', redirectCode: 301 });
  assert.deepEqual(r.http[0]!.route, []);
  const d = accept(route(`directResponse: {status: 503, body: {string: "down for maintenance"}}`)).resource as VirtualService;
  assert.deepEqual(d.http[0]!.directResponse, { status: 503, body: 'down for maintenance' });
  const b = accept(route(`directResponse: {status: 200, body: {bytes: aGVsbG8=}}`)).resource as VirtualService;
  assert.deepEqual(b.http[0]!.directResponse, { status: 200, body: 'hello' });
  const w = accept(route(`rewrite: {uri: /v2/, authority: internal}\nroute: [{destination: {host: api}}]`)).resource as VirtualService;
  assert.deepEqual(w.http[0]!.rewrite, { uri: '/v2/', authority: 'internal' });
});

it('a single destination takes all traffic, whatever its weight (Istio)', () => {
  const r = accept(route(`route: [{destination: {host: a}, weight: 30}]`)).resource as VirtualService;
  assert.equal(r.http[0]!.route[0]!.weight, 100);
});

it('weights are relative, as in Istio: they need not add up to 100, and one may be 0', () => {
  const r = accept(route(`route:\n- {destination: {host: a}, weight: 1}\n- {destination: {host: b}, weight: 3}\n- {destination: {host: c}}`)).resource as VirtualService;
  assert.deepEqual(r.http[0]!.route.map((d) => d.weight), [1, 3, 0]);
  assert.deepEqual((accept(route(`route:\n- {destination: {host: a}, weight: 150}\n- {destination: {host: b}, weight: 50}`)).resource as VirtualService)
    .http[0]!.route.map((d) => d.weight), [150, 50]);
});

it('rejects invalid VirtualServices with the field path and a clear message', () => {
  assertRejections([
    { name: 'Host added (a second Host line)', yaml: route(`route: [{destination: {host: a}}]\nheaders: {request: {add: {Host: b}}}`),
      field: 'spec.http[0].headers.request.add[host]', message: /cannot be added: a request has one Host/ },
    { name: 'bad regex', yaml: route(`match: [{uri: {regex: "a("}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].uri.regex', message: /^"a\(" is not a valid regular expression: /i },
    { name: 'lookahead (RE2 has none)', yaml: route(`match: [{uri: {regex: "(?=a)a"}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].uri.regex', message: /lookaround/ },
    { name: 'two StringMatch kinds', yaml: route(`match: [{uri: {exact: /a, prefix: /b}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].uri', message: /only one of exact, prefix or regex, got exact and prefix/ },
    { name: '{} outside a header matcher', yaml: route(`match: [{uri: {}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].uri', message: /expected one of exact, prefix or regex/ },
    { name: 'StringMatch value of the wrong type', yaml: route(`match: [{method: {exact: 5}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].method.exact', message: /expected a string, got 5/ },
    { name: 'null header matcher', yaml: route(`match: [{headers: {x-a: null}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].headers[x-a]', message: /expected a matcher/ },
    { name: 'bad claim key (mixed forms)', yaml: route(`match: [{headers: {"@request.auth.claims.a[b]": {exact: x}}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].headers[@request.auth.claims.a[b]]', message: /not a valid claim key: mixes the \. and \[\] forms/ },
    { name: 'bad claim key (empty segment)', yaml: route(`match: [{headers: {"@request.auth.claims.a..b": {exact: x}}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].headers[@request.auth.claims.a..b]', message: /empty claim name/ },
    { name: 'other @ key', yaml: route(`match: [{headers: {"@request.auth.principal": {exact: x}}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].headers[@request.auth.principal]', message: /the only '@' keys are/ },
    { name: 'several destinations without weights', yaml: route(`route:\n- {destination: {host: a}}\n- {destination: {host: b}}`),
      field: 'spec.http[0].route', message: /the weights of several destinations add up to 0/ },
    { name: 'negative weight', yaml: route(`route:\n- {destination: {host: a}, weight: 150}\n- {destination: {host: b}, weight: -50}`),
      field: 'spec.http[0].route[1].weight', message: /expected an integer from 0 to 2147483647, got the number -50/ },
    { name: 'fractional weight', yaml: route(`route:\n- {destination: {host: a}, weight: 50.5}\n- {destination: {host: b}, weight: 49.5}`),
      field: 'spec.http[0].route[0].weight', message: /integer/ },
    { name: 'weight as a string', yaml: route(`route:\n- {destination: {host: a}, weight: "50"}\n- {destination: {host: b}, weight: 50}`),
      field: 'spec.http[0].route[0].weight', message: /got the string "50"/ },
    { name: 'missing destination host', yaml: route(`route: [{destination: {port: {number: 80}}}]`),
      field: 'spec.http[0].route[0].destination.host', message: /required/ },
    { name: 'port out of range', yaml: route(`route: [{destination: {host: a, port: {number: 70000}}}]`),
      field: 'spec.http[0].route[0].destination.port.number', message: /from 1 to 65535/ },
    { name: 'no action', yaml: route(`match: [{uri: {prefix: /}}]`),
      field: 'spec.http[0]', message: /needs one of route, redirect or directResponse/ },
    { name: 'route and redirect', yaml: route(`redirect: {uri: /x}\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0]', message: /only one of .* got route and redirect/ },
    { name: 'redirect with nothing to change', yaml: route(`redirect: {redirectCode: 302}`),
      field: 'spec.http[0].redirect', message: /needs uri, authority, scheme, port or derivePort/ },
    { name: 'redirect port and derivePort', yaml: route(`redirect: {port: 8443, derivePort: FROM_REQUEST_PORT}`),
      field: 'spec.http[0].redirect', message: /only one of port or derivePort/ },
    { name: 'redirect derivePort unknown', yaml: route(`redirect: {derivePort: FROM_SOMEWHERE}`),
      field: 'spec.http[0].redirect.derivePort', message: /FROM_PROTOCOL_DEFAULT, FROM_REQUEST_PORT/ },
    { name: 'redirect port out of range', yaml: route(`redirect: {port: 0}`),
      field: 'spec.http[0].redirect.port', message: /from 1 to 65535/ },
    { name: 'redirect scheme not a scheme', yaml: route(`redirect: {scheme: "ht tp"}`),
      field: 'spec.http[0].redirect.scheme', message: /is not a URI scheme/ },
    { name: 'uriRegexRewrite beside uri', yaml: route(`rewrite: {uri: /a, uriRegexRewrite: {match: a, rewrite: b}}\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].rewrite', message: /only one of uri or uriRegexRewrite/ },
    { name: 'uriRegexRewrite lookahead', yaml: route(`rewrite: {uriRegexRewrite: {match: "a(?=b)", rewrite: c}}\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].rewrite.uriRegexRewrite.match', message: /is not a regular expression this agent reads as RE2 does: lookaround/ },
    { name: 'uriRegexRewrite \\Q', yaml: route(`rewrite: {uriRegexRewrite: {match: "\\\\Qa.b\\\\E", rewrite: c}}\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].rewrite.uriRegexRewrite.match', message: /quoted literals/ },
    { name: 'uriRegexRewrite group missing', yaml: route(`rewrite: {uriRegexRewrite: {match: "/(a)", rewrite: "/\\\\2"}}\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].rewrite.uriRegexRewrite.rewrite', message: /names a group the regex does not have/ },
    { name: 'uriRegexRewrite without match', yaml: route(`rewrite: {uriRegexRewrite: {rewrite: c}}\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].rewrite.uriRegexRewrite.match', message: /required/ },
    { name: 'bad redirect code', yaml: route(`redirect: {uri: /x, redirectCode: 305}`),
      field: 'spec.http[0].redirect.redirectCode', message: /305 is not one of 301, 302, 303, 307, 308/ },
    { name: 'directResponse status', yaml: route(`directResponse: {status: 99}`),
      field: 'spec.http[0].directResponse.status', message: /from 200 to 599/ },
    { name: 'bad timeout', yaml: route(`timeout: soon\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].timeout', message: /"soon" is not a duration/ },
    { name: 'misspelt field', yaml: route(`routes: [{destination: {host: a}}]`),
      field: 'spec.http[0].routes', message: /unknown field "routes" in spec\.http\[0\]; accepted: name, match, route/ },
    { name: 'bad sourceLabels', yaml: route(`match: [{sourceLabels: {app: "a b"}}]\nroute: [{destination: {host: a}}]`),
      field: 'spec.http[0].match[0].sourceLabels[app]', message: /not a valid label value/ },
    { name: 'hosts missing', yaml: vs(`http: [{route: [{destination: {host: a}}]}]`),
      field: 'spec.hosts', message: /required \(a list\)/ },
    { name: 'hosts empty', yaml: vs(`hosts: []\nhttp: [{route: [{destination: {host: a}}]}]`),
      field: 'spec.hosts', message: /must not be empty/ },
    { name: 'hosts wrong type', yaml: vs(`hosts: example.com\nhttp: [{route: [{destination: {host: a}}]}]`),
      field: 'spec.hosts', message: /expected a list, got the string "example.com"/ },
    { name: 'bad host', yaml: vs(`hosts: ["a*.example.com"]\nhttp: [{route: [{destination: {host: a}}]}]`),
      field: 'spec.hosts[0]', message: /not a valid host/ },
    { name: '* bound to the mesh', yaml: vs(`hosts: ["*"]\nhttp: [{route: [{destination: {host: a}}]}]`),
      field: 'spec.hosts', message: /not allowed .* mesh gateway/ },
    { name: 'bad gateway reference', yaml: vs(`hosts: [a]\ngateways: [Bad_Name]\nhttp: [{route: [{destination: {host: a}}]}]`),
      field: 'spec.gateways[0]', message: /not a valid name/ },
    { name: 'no routes at all', yaml: vs(`hosts: [a]`),
      field: 'spec.http', message: /at least one route/ },
  ]);
});

it('formats a rejection as one log line naming file, document, kind, namespace/name and field', () => {
  const r = reject(route(`match: [{uri: {regex: "a("}}]\nroute: [{destination: {host: a}}]`));
  assert.match(formatRejection(r), /^etc\/mesh\/resources\/test\.yaml\[0\] VirtualService foo\/httpbin: spec\.http\[0\]\.match\[0\]\.uri\.regex: "a\(" is not a valid regular expression: .+$/);
  assert.ok(!formatRejection(r).includes('\n'));
});
