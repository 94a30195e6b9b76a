// What the builder makes, for configurations that use every kind of rule (TPROXY marks, DNS zones,
// excluded and virtual interfaces, trace logging, owner groups, CIDR lists, both families), applied
// in a namespace: read back it must be exactly the expected mesh rules (so the normaliser knows every
// form the builder writes), a second apply must change nothing, and clean-up must leave nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { applyRuleSet, cleanMeshRules, systemIdResolver } from '../../../src/iptables/apply.js';
import { buildRuleSet } from '../../../src/iptables/builder.js';
import type { Family } from '../../../src/iptables/rules.js';
import { expectedBuiltinKeys, expectedMesh, extractMesh, parseSave, type MeshChain } from '../../../src/iptables/save-parse.js';
import { tempGroup } from '../../helpers/iptables-fixtures.js';
import { optionsFromArgs } from '../../helpers/iptables-options.js';
import { createNamespace, netnsSkip, SpyRunner } from '../../helpers/pod-netns.js';

/** name, mesh-iptables flags, environment, whether the pod has IPv6, a rule the IPv4 rules must show. */
const configs: [string, string[], Record<string, string>, boolean, RegExp][] = [
  ['defaults', [], {}, false, /^-A MESH_OUTPUT -d 127\.0\.0\.1\/32 -j RETURN$/m],
  ['TPROXY, all inbound ports, excluded ports, drop-invalid', ['-m', 'TPROXY', '-b', '*', '-d', '15090,15021', '--drop-invalid'], {}, true,
    /^-A MESH_TPROXY ! -d 127\.0\.0\.1\/32 -p tcp -j TPROXY --on-port 15006 --on-ip 0\.0\.0\.0 --tproxy-mark 0x539\/0xffffffff$/m],
  ['REDIRECT inbound list, outbound * with exclusions', ['-b', '8080,9090', '-i', '*', '-x', '10.96.0.0/12,fd00:96::/64', '-o', '3306'], {}, true,
    /^-A MESH_OUTPUT -d 10\.96\.0\.0\/12 -j RETURN$/m],
  ['outbound CIDR list and ports include', ['-i', '10.0.0.0/8,192.168.1.7,fd00::/8', '-q', '443,8443'], {}, true,
    /^-A MESH_OUTPUT -d 192\.168\.1\.7\/32 -j MESH_REDIRECT$/m],
  ['DNS capture, uid and gid lists', ['--redirect-dns', '-u', '3,4', '-g', '1,2', '-i', '*'], {}, true,
    /^-A MESH_OUTPUT_DNS -d 10\.96\.0\.10\/32 -p udp -m udp --dport 53 -j CT --zone 2$/m],
  ['capture all DNS', ['--redirect-dns', '--capture-all-dns'], {}, false, /^-A MESH_OUTPUT_DNS -p udp -m udp --dport 53 -j REDIRECT --to-ports 15053$/m],
  ['excluded and virtual interfaces, TPROXY', ['-c', 'eth1,veth+', '-k', 'tap0', '-m', 'TPROXY', '-b', '*', '-i', '*'], {}, true,
    /^-A PREROUTING -i veth\+ -j RETURN$/m],
  ['owner groups include (name and gid)', [], { MESH_OUTBOUND_OWNER_GROUPS: 'GROUP,202' }, false, /--gid-owner 202 -j RETURN$/m],
  ['owner groups exclude', [], { MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE: 'GROUP,203' }, false, /--gid-owner 203/m],
  ['loopback CIDR and trace logging', ['--iptables-trace-logging', '-b', '*', '-i', '*'], { MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: '127.0.0.0/8' }, true,
    /^-A MESH_OUTPUT -j LOG --log-prefix "MESH_OUTPUT:"$/m],
  ['IPv6 inbound block: all ports with excludes, -c and -k, trace logging', ['--block-inbound-ipv6', '-b', '*', '-d', '15020,15090',
    '-c', 'eth1', '-k', 'tap0', '--iptables-trace-logging'], {}, false, /^-A PREROUTING -p tcp -j MESH_INBOUND$/m],
  ['IPv6 inbound block: a port list, TPROXY', ['-m', 'TPROXY', '-b', '8080,9090'], { MESH_BLOCK_INBOUND_IPV6: 'true' }, false,
    /^-A MESH_INBOUND -p tcp -m tcp --dport 9090 -j MESH_TPROXY$/m],
];

const byChain = (chains: readonly MeshChain[]): Record<string, readonly string[]> =>
  Object.fromEntries(chains.map((c) => [`${c.table} ${c.chain}`, c.rules]));

describe('the builder\'s rule sets, applied', { skip: netnsSkip }, () => {
  let group: ReturnType<typeof tempGroup>;
  before(() => { group = tempGroup(); });
  after(() => group?.remove());

  for (const [name, flags, env, ipv6, marker] of configs) {
    it(name, async () => {
      const o = optionsFromArgs(['mesh-iptables', ...flags],
        Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.replace('GROUP', group.name)])));
      const set = buildRuleSet(o, { ipv6, dnsServersV4: ['10.96.0.10'], dnsServersV6: ipv6 ? ['fd00:96::a'] : [] });
      const ns = createNamespace();
      try {
        assert.equal(await applyRuleSet(ns.runner, set), 'applied');
        const resolveId = systemIdResolver();
        const families: Family[] = set.ipv6 ? ['ipv4', 'ipv6'] : ['ipv4'];
        for (const f of families) {
          const text = ns.exec(f === 'ipv6' ? 'ip6tables-save' : 'iptables-save', []).stdout;
          const norm = { family: f, resolveId };
          const rules = f === 'ipv6' ? set.ipv6! : set.ipv4;
          const got = extractMesh(parseSave(text), norm);
          const want = expectedMesh(rules, norm);
          // Rules that mark nothing as ours (-c's RETURNs) are only known from the rule set.
          const gotAll = extractMesh(parseSave(text), { ...norm, expectedBuiltin: expectedBuiltinKeys(rules, norm) });
          assert.deepEqual(byChain(gotAll), byChain(want), `${f}: read back = expected`);
          if (f === 'ipv4') assert.match(text, marker);
          for (const c of got) assert.deepEqual(c.raw, c.rules, `${f} ${c.chain}: kernel text = canonical form`);
        }
        const spy = new SpyRunner(ns.runner);
        assert.equal(await applyRuleSet(spy, set), 'unchanged');
        assert.equal(spy.count(/-restore$/), 0);
        await cleanMeshRules(ns.runner, { ipv6: set.ipv6 !== undefined, routes: { mark: o.tproxyMark, table: o.tproxyRouteTable }, expected: set });
        for (const f of families) {
          const left = ns.exec(f === 'ipv6' ? 'ip6tables-save' : 'iptables-save', []).stdout;
          assert.doesNotMatch(left, /^-A /m, `${f}: nothing left after clean-up`);
          assert.doesNotMatch(left, /MESH_/);
        }
        assert.doesNotMatch(ns.exec('ip', ['rule', 'show']).stdout, /fwmark/);
      } finally {
        ns.close();
      }
    });
  }
});
