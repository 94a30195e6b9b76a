import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentError } from '../../src/errors/agent-error.js';
import {
  normalizeCidr, proxyUidFromPasswd, validateIptablesOptions, type RawIptablesFlags,
} from '../../src/iptables/options.js';

const defaults: RawIptablesFlags = {
  proxyPort: '15001', inboundCapturePort: '15006', inboundTunnelPort: '15008', proxyUids: '1337', proxyGids: '1337',
  interceptionMode: 'REDIRECT', tproxyMark: '1337', tproxyRouteTable: '133', inboundPorts: '', localExcludePorts: '',
  outboundPortsExclude: '', outboundPortsInclude: '', serviceCidrs: '', serviceExcludeCidrs: '', excludeInterfaces: '',
  virtInterfaces: '', ownerGroupsInclude: '*', ownerGroupsExclude: '', outboundIpv4LoopbackCidr: '127.0.0.1/32',
  redirectDns: false, captureAllDns: false, dropInvalid: false, dualStack: false, blockInboundIpv6: false, dryRun: false, dryRunFilePath: '',
  cleanupOnly: false, cniMode: false, forceApply: false, reconcile: false, runValidation: false, skipRuleApply: false,
  traceLogging: false, probePort: 15002, probeTimeoutMs: 5000, networkNamespace: '',
};

const validate = (tweak: Partial<RawIptablesFlags>) => validateIptablesOptions({ ...defaults, ...tweak });

describe('validateIptablesOptions', () => {
  it('types the defaults', () => {
    const o = validate({});
    assert.equal(o.proxyPort, 15001);
    assert.equal(o.interceptionMode, 'REDIRECT');
    assert.deepEqual(o.inboundPorts, { all: false, items: [] });
    assert.deepEqual(o.ownerGroupsInclude, { all: true });
    assert.deepEqual(o.proxyUids, ['1337']);
    assert.ok(Object.isFrozen(o));
  });

  const good: [string, Partial<RawIptablesFlags>, (o: ReturnType<typeof validate>) => void][] = [
    ['wildcard inbound ports', { inboundPorts: '*' }, (o) => assert.deepEqual(o.inboundPorts, { all: true })],
    ['port lists', { inboundPorts: '32000, 31000', localExcludePorts: '15090,15021' },
      (o) => { assert.deepEqual(o.inboundPorts, { all: false, items: [32000, 31000] }); assert.deepEqual(o.localExcludePorts, [15090, 15021]); }],
    ['CIDRs and bare addresses', { serviceCidrs: '10.0.0.0/8,fd00::/8,10.1.2.3', serviceExcludeCidrs: '::1' },
      (o) => { assert.deepEqual(o.serviceCidrs, { all: false, items: ['10.0.0.0/8', 'fd00::/8', '10.1.2.3/32'] }); assert.deepEqual(o.serviceExcludeCidrs, ['::1/128']); }],
    ['TPROXY with a hex mark', { interceptionMode: 'TPROXY', tproxyMark: '0x539' }, (o) => { assert.equal(o.interceptionMode, 'TPROXY'); assert.equal(o.tproxyMark, 1337); }],
    ['uid and gid lists', { proxyUids: '3,4', proxyGids: '1,2' }, (o) => { assert.deepEqual(o.proxyUids, ['3', '4']); assert.deepEqual(o.proxyGids, ['1', '2']); }],
    ['owner groups by name and number', { ownerGroupsInclude: 'java,202' }, (o) => assert.deepEqual(o.ownerGroupsInclude, { all: false, items: ['java', '202'] })],
    ['interfaces with the iptables wildcard', { excludeInterfaces: 'eth1,veth+', virtInterfaces: 'tap0' }, (o) => assert.deepEqual(o.excludeInterfaces, ['eth1', 'veth+'])],
  ];
  for (const [name, tweak, check] of good) it(`accepts ${name}`, () => check(validate(tweak)));

  const bad: [string, Partial<RawIptablesFlags>, RegExp][] = [
    ['a mode', { interceptionMode: 'FOO' }, /--mesh-inbound-interception-mode: "FOO" is not an interception mode \(REDIRECT or TPROXY\)/],
    ['a proxy port', { proxyPort: 'abc' }, /--proxy-port: "abc" is not a port/],
    ['port 0', { inboundCapturePort: '0' }, /--inbound-capture-port: "0"/],
    ['port 65536', { inboundTunnelPort: '65536' }, /--inbound-tunnel-port: "65536"/],
    ['a port list', { inboundPorts: '80,http' }, /--mesh-inbound-ports: "80,http" .*"http" is not/],
    ['a wildcard where none is allowed', { localExcludePorts: '*' }, /--mesh-local-exclude-ports/],
    ['a CIDR', { serviceCidrs: '10.0.0.0/33' }, /--mesh-service-cidr: "10.0.0.0\/33"/],
    ['an exclude CIDR', { serviceExcludeCidrs: '300.1.1.1' }, /--mesh-service-exclude-cidr/],
    ['a mark', { tproxyMark: 'x' }, /--mesh-inbound-tproxy-mark: "x" is not a packet mark/],
    ['a reserved route table', { tproxyRouteTable: '254' }, /--mesh-inbound-tproxy-route-table: "254"/],
    ['an interface name', { excludeInterfaces: 'eth0,averyveryverylongname' }, /--mesh-exclude-interfaces: .*"averyveryverylongname"/],
    ['an interface with a slash', { virtInterfaces: 'a/b' }, /--virt-interfaces/],
    ['a uid', { proxyUids: '1337,-1' }, /--proxy-uid: "1337,-1"/],
    ['the loopback CIDR variable', { outboundIpv4LoopbackCidr: '::1/128' }, /MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: "::1\/128"/],
  ];
  for (const [name, tweak, message] of bad) {
    it(`rejects ${name} with a usage error naming it`, () => {
      assert.throws(() => validate(tweak), (err: unknown) =>
        err instanceof AgentError && err.exitCode === 2 && message.test(err.message));
    });
  }
});

describe('normalizeCidr', () => {
  it('adds the host prefix and rejects junk', () => {
    assert.equal(normalizeCidr('10.0.0.1'), '10.0.0.1/32');
    assert.equal(normalizeCidr('fd00::/008'), 'fd00::/8');
    assert.equal(normalizeCidr('10.0.0.0/8/8'), undefined);
    assert.equal(normalizeCidr('10.0.0.0/'), undefined);
    assert.equal(normalizeCidr('host.example'), undefined);
  });
});

describe('proxyUidFromPasswd', () => {
  it('finds the user or falls back to 1337', () => {
    const passwd = 'root:x:0:0:root:/root:/bin/bash\nmesh-proxy:x:1500:1500::/home:/bin/false\n';
    assert.equal(proxyUidFromPasswd('mesh-proxy', passwd), '1500');
    assert.equal(proxyUidFromPasswd('nobody-here', passwd), '1337');
  });
});
