import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Workload } from '../../../src/config/resources/types.js';
import { inboundMtls, inboundMtlsMode, namespaceInboundMtls } from '../../../src/security/mtls/peer-authentication.js';
import { doc, snapshotOf } from './snapshot.js';

const pa = (id: string, spec: string): string => doc('PeerAuthentication', id, spec);
const WORKLOAD: Workload = { namespace: 'shop', labels: { app: 'web', version: 'v1' } };

interface Case {
  readonly name: string;
  readonly policies: readonly string[];
  readonly workload?: Partial<Workload>;
  readonly port?: number;
  readonly mode: string;
  readonly decidedBy: string;
  readonly anyStrict?: boolean;
}

const cases: readonly Case[] = [
  { name: 'no policy: PERMISSIVE', policies: [], mode: 'PERMISSIVE', decidedBy: 'default', anyStrict: false },
  { name: 'mesh-wide STRICT', policies: [pa('mesh-system/default', '{mtls: {mode: STRICT}}')], mode: 'STRICT', decidedBy: 'PeerAuthentication mesh-system/default', anyStrict: true },
  { name: 'namespace beats mesh', policies: [pa('mesh-system/default', '{mtls: {mode: STRICT}}'), pa('ns', '{mtls: {mode: DISABLE}}')],
    mode: 'DISABLE', decidedBy: 'PeerAuthentication shop/ns', anyStrict: false },
  { name: 'namespace UNSET inherits mesh', policies: [pa('mesh-system/default', '{mtls: {mode: STRICT}}'), pa('ns', '{mtls: {}}')],
    mode: 'STRICT', decidedBy: 'PeerAuthentication mesh-system/default' },
  { name: 'another namespace\'s policy does not apply', policies: [pa('other/ns', '{mtls: {mode: STRICT}}')], mode: 'PERMISSIVE', decidedBy: 'default' },
  { name: 'workload beats namespace', policies: [pa('ns', '{mtls: {mode: STRICT}}'), pa('web', '{selector: {matchLabels: {app: web}}, mtls: {mode: PERMISSIVE}}')],
    mode: 'PERMISSIVE', decidedBy: 'PeerAuthentication shop/web', anyStrict: false },
  { name: 'workload UNSET inherits namespace', policies: [pa('ns', '{mtls: {mode: STRICT}}'), pa('web', '{selector: {matchLabels: {app: web}}}')],
    mode: 'STRICT', decidedBy: 'PeerAuthentication shop/ns' },
  { name: 'selector not matching', policies: [pa('db', '{selector: {matchLabels: {app: db}}, mtls: {mode: STRICT}}')], mode: 'PERMISSIVE', decidedBy: 'default' },
  { name: 'port-level beats the workload mode', port: 8080,
    policies: [pa('web', '{selector: {matchLabels: {app: web}}, mtls: {mode: STRICT}, portLevelMtls: {8080: {mode: DISABLE}}}')],
    mode: 'DISABLE', decidedBy: 'PeerAuthentication shop/web', anyStrict: true },
  { name: 'another port keeps the workload mode', port: 9090,
    policies: [pa('web', '{selector: {matchLabels: {app: web}}, mtls: {mode: STRICT}, portLevelMtls: {8080: {mode: DISABLE}}}')],
    mode: 'STRICT', decidedBy: 'PeerAuthentication shop/web' },
  { name: 'port-level UNSET takes the inherited mode', port: 8080,
    policies: [pa('mesh-system/default', '{mtls: {mode: STRICT}}'), pa('web', '{selector: {matchLabels: {app: web}}, portLevelMtls: {8080: {}}}')],
    mode: 'STRICT', decidedBy: 'PeerAuthentication shop/web' },
  { name: 'a STRICT port alone makes anyStrict', port: 15000,
    policies: [pa('web', '{selector: {matchLabels: {app: web}}, portLevelMtls: {8443: {mode: STRICT}}}')], mode: 'PERMISSIVE', decidedBy: 'default', anyStrict: true },
  { name: 'two namespace policies: the first in file order', policies: [pa('b', '{mtls: {mode: DISABLE}}'), pa('a', '{mtls: {mode: STRICT}}')],
    mode: 'DISABLE', decidedBy: 'PeerAuthentication shop/b' },
  { name: 'two workload policies: the first in file order',
    policies: [pa('v1', '{selector: {matchLabels: {version: v1}}, mtls: {mode: STRICT}}'), pa('web', '{selector: {matchLabels: {app: web}}, mtls: {mode: DISABLE}}')],
    mode: 'STRICT', decidedBy: 'PeerAuthentication shop/v1' },
  { name: 'selector {} is namespace-wide', policies: [pa('mesh-system/default', '{mtls: {mode: STRICT}}'), pa('all', '{selector: {}, mtls: {mode: DISABLE}}')],
    mode: 'DISABLE', decidedBy: 'PeerAuthentication shop/all' },
  { name: 'a selector in the root namespace selects nothing', policies: [pa('mesh-system/web', '{selector: {matchLabels: {app: web}}, mtls: {mode: STRICT}}')],
    mode: 'PERMISSIVE', decidedBy: 'default' },
  { name: 'a workload of the root namespace: its namespace policy is the mesh policy', workload: { namespace: 'mesh-system' },
    policies: [pa('mesh-system/default', '{mtls: {mode: STRICT}}'), pa('mesh-system/web', '{selector: {matchLabels: {app: web}}, mtls: {mode: DISABLE}}')],
    mode: 'STRICT', decidedBy: 'PeerAuthentication mesh-system/default' },
];

it('finds the inbound mode of a port by Istio\'s precedence', () => {
  for (const c of cases) {
    const snapshot = snapshotOf(...c.policies);
    const mtls = inboundMtls(snapshot.peerAuthentications, { ...WORKLOAD, ...c.workload });
    const port = c.port ?? 8000;
    const decidedBy = mtls.ports.find((p) => p.port === port)?.decidedBy ?? mtls.decidedBy;
    assert.deepEqual([inboundMtlsMode(mtls, port), decidedBy], [c.mode, c.decidedBy], c.name);
    if (c.anyStrict !== undefined) assert.equal(mtls.anyStrict, c.anyStrict, `${c.name}: anyStrict`);
  }
});

it('gives plain data, and a namespace\'s mode without workload policies (what auto mTLS can know)', () => {
  const s = snapshotOf(pa('mesh-system/default', '{mtls: {mode: STRICT}}'), pa('legacy/ns', '{mtls: {mode: DISABLE}}'),
    pa('web', '{selector: {matchLabels: {app: web}}, mtls: {mode: PERMISSIVE}, portLevelMtls: {8080: {mode: STRICT}}}'));
  const mtls = inboundMtls(s.peerAuthentications, WORKLOAD);
  assert.deepEqual(JSON.parse(JSON.stringify(mtls)), {
    mode: 'PERMISSIVE', decidedBy: 'PeerAuthentication shop/web', anyStrict: true,
    ports: [{ port: 8080, mode: 'STRICT', decidedBy: 'PeerAuthentication shop/web' }],
  });
  assert.deepEqual(namespaceInboundMtls(s.peerAuthentications, 'legacy'), { mode: 'DISABLE', decidedBy: 'PeerAuthentication legacy/ns' });
  assert.deepEqual(namespaceInboundMtls(s.peerAuthentications, 'shop'), { mode: 'STRICT', decidedBy: 'PeerAuthentication mesh-system/default' });
});
