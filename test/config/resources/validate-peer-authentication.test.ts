import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { PeerAuthentication } from '../../../src/config/resources/types.js';
import { formatRejection } from '../../../src/config/resources/validate.js';
import { accept, assertRejections, indent, reject } from './helpers.js';

const pa = (spec: string): string => `apiVersion: security.mesh.io/v1
kind: PeerAuthentication
metadata:
  name: mtls
spec:
${indent(spec)}
`;

it('reads a PeerAuthentication: selector, mtls.mode and portLevelMtls (UNSET by default)', () => {
  const p = accept(pa(`selector:
  matchLabels: {app: db}
mtls: {mode: STRICT}
portLevelMtls:
  8080: {mode: PERMISSIVE}
  9090: {}`)).resource as PeerAuthentication;
  assert.deepEqual(p.selector, { app: 'db' });
  assert.equal(p.mode, 'STRICT');
  assert.deepEqual(p.portLevelMtls, [{ port: 8080, mode: 'PERMISSIVE' }, { port: 9090, mode: 'UNSET' }]);
  const empty = accept(pa('{}')).resource as PeerAuthentication;
  assert.deepEqual([empty.selector, empty.mode, empty.portLevelMtls], [undefined, 'UNSET', []]);
  const noSpec = accept('apiVersion: security.mesh.io/v1beta1\nkind: PeerAuthentication\nmetadata: {name: x, namespace: mesh-system}\n').resource as PeerAuthentication;
  assert.equal(noSpec.mode, 'UNSET', 'a policy without spec is UNSET everywhere');
  assert.equal((accept(pa('mtls: {}')).resource as PeerAuthentication).mode, 'UNSET');
});

it('rejects invalid PeerAuthentications with the field path', () => {
  assertRejections([
    { name: 'port-level without selector', yaml: pa(`mtls: {mode: STRICT}\nportLevelMtls: {8080: {mode: DISABLE}}`),
      field: 'spec.portLevelMtls', message: /^needs a selector with matchLabels \(port-level modes are only allowed on a policy that selects workloads/ },
    { name: 'port-level with an empty selector', yaml: pa(`selector: {matchLabels: {}}\nportLevelMtls: {8080: {mode: DISABLE}}`),
      field: 'spec.portLevelMtls', message: /needs a selector with matchLabels/ },
    { name: 'mode of another case', yaml: pa(`mtls: {mode: strict}`), field: 'spec.mtls.mode', message: /^"strict" is not one of UNSET, DISABLE, PERMISSIVE, STRICT$/ },
    { name: 'unknown mtls field', yaml: pa(`mtls: {mode: STRICT, strict: true}`), field: 'spec.mtls.strict', message: /unknown field "strict" in spec.mtls; accepted: mode/ },
    { name: 'unknown spec field', yaml: pa(`targetRef: {kind: Service}`), field: 'spec.targetRef', message: /unknown field "targetRef"/ },
    { name: 'port 0', yaml: pa(`selector: {matchLabels: {app: a}}\nportLevelMtls: {0: {mode: STRICT}}`),
      field: 'spec.portLevelMtls[0]', message: /"0" is not a port number \(1 to 65535\)/ },
    { name: 'port name', yaml: pa(`selector: {matchLabels: {app: a}}\nportLevelMtls: {http: {mode: STRICT}}`),
      field: 'spec.portLevelMtls[http]', message: /"http" is not a port number/ },
    { name: 'port too large', yaml: pa(`selector: {matchLabels: {app: a}}\nportLevelMtls: {65536: {mode: STRICT}}`),
      field: 'spec.portLevelMtls[65536]', message: /not a port number/ },
    { name: 'port-level mode', yaml: pa(`selector: {matchLabels: {app: a}}\nportLevelMtls: {80: {mode: OFF}}`),
      field: 'spec.portLevelMtls[80].mode', message: /"OFF" is not one of/ },
    { name: 'selector without matchLabels key', yaml: pa(`selector: {app: a}`), field: 'spec.selector.app', message: /unknown field "app" in spec.selector; accepted: matchLabels/ },
  ]);
});

it('formats a rejection as file[doc] Kind ns/name: field: message', () => {
  assert.equal(formatRejection(reject(pa(`portLevelMtls: {8080: {mode: DISABLE}}`))),
    'etc/mesh/resources/test.yaml[0] PeerAuthentication default/mtls: spec.portLevelMtls: needs a selector with matchLabels '
    + '(port-level modes are only allowed on a policy that selects workloads, not on a namespace-wide or mesh-wide one)');
});
