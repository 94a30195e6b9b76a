// The builder against istio-iptables' own output: the shared fixtures (exact restore text), then
// table-driven cases for every flag and their combinations.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildRuleSet, type PodNetwork } from '../../src/iptables/builder.js';
import { ruleLine, toRestore, type Rule, type RuleSet } from '../../src/iptables/rules.js';
import { optionsFromArgs } from '../helpers/iptables-options.js';
import { builderCases as cases, ruleSetFor, type Case } from './builder-cases.js';
import { assertGolden } from '../helpers/golden.js';
import { fixtureCases, fixtureText, haveFixtures, type FixtureCase } from '../helpers/iptables-fixtures.js';

function podFor(c: FixtureCase): PodNetwork {
  return {
    ipv6: c.podHasIPv6,
    dnsServersV4: c.resolvConfNameservers.filter((s) => !s.includes(':')),
    dnsServersV6: c.resolvConfNameservers.filter((s) => s.includes(':')),
  };
}

describe('the shared istio-iptables fixtures', { skip: !haveFixtures && 'no ../shared/fixtures' }, () => {
  for (const c of fixtureCases()) {
    it(`${c.name}: ${c.args.slice(1).join(' ')}`, () => {
      const set = buildRuleSet(optionsFromArgs(c.args, c.env), podFor(c));
      assert.equal(toRestore(set.ipv4), fixtureText(c.name, 'v4'));
      if (c.podHasIPv6) assert.equal(toRestore(set.ipv6 ?? []), fixtureText(c.name, 'v6'));
      else assert.equal(set.ipv6, undefined);
    });
  }
});

describe('the shared fixtures with --block-inbound-ipv6: IPv4 rules and IPv6 capture untouched', { skip: !haveFixtures && 'no ../shared/fixtures' }, () => {
  for (const c of fixtureCases()) {
    it(c.name, () => {
      const set = buildRuleSet(optionsFromArgs([...c.args, '--block-inbound-ipv6'], c.env), podFor(c));
      assert.equal(toRestore(set.ipv4), fixtureText(c.name, 'v4'));
      if (c.podHasIPv6) assert.equal(toRestore(set.ipv6 ?? []), fixtureText(c.name, 'v6'));
      else assert.doesNotMatch(toRestore(set.ipv6 ?? []), /\*(mangle|nat|raw)/, 'only the filter block');
    });
  }
});

function render(c: Case): string {
  const set = ruleSetFor(c);
  const routes = set.routes.map((r) => `ip ${r.args.join(' ')}\n`).join('');
  return `# ${c.args.join(' ')}${c.env ? ` ${JSON.stringify(c.env)}` : ''}\n# ipv4\n${toRestore(set.ipv4)}`
    + `${set.ipv6 ? `# ipv6\n${toRestore(set.ipv6)}` : ''}${routes ? `# routes\n${routes}` : ''}`;
}

describe('rule sets for every flag (golden files, reviewed against istio-iptables)', () => {
  for (const c of cases) {
    it(c.name, () => assertGolden(`iptables/testdata/${c.name}.golden`, render(c)));
  }
});

describe('--block-inbound-ipv6 adds only the IPv6 block, and only where IPv6 is not captured', () => {
  const optIn = (c: Case): boolean => c.args.some((a) => a.startsWith('--block-inbound-ipv6')) || c.env?.['MESH_BLOCK_INBOUND_IPV6'] !== undefined;
  for (const c of cases.filter((x) => !optIn(x))) {
    it(c.name, () => {
      const off = ruleSetFor(c);
      const on = ruleSetFor({ ...c, args: [...c.args, '--block-inbound-ipv6'] });
      assert.deepEqual(on.ipv4, off.ipv4, 'IPv4 rules unchanged');
      assert.deepEqual(on.routes, off.routes, 'no IPv6 policy route');
      if (c.pod?.ipv6) {
        assert.deepEqual(on.ipv6, off.ipv6, 'IPv6 capture already there: the opt-in adds nothing');
      } else {
        assert.equal(off.ipv6, undefined, 'off: no IPv6 rule at all, as istio-iptables');
        assert.ok((on.ipv6 ?? []).every((r) => r.table === 'filter'), 'on: filter rules only');
      }
    });
  }
});

/** The family's rules as restore lines (`-A CHAIN ...`), per table. */
const lines = (rules: readonly Rule[] | undefined, table: string): string[] =>
  (rules ?? []).filter((r) => r.table === table).map(ruleLine);

describe('details of istio-iptables (capture/run.go) the goldens pin down, spelled out', () => {
  const pod = (p: Partial<PodNetwork> = {}): PodNetwork => ({ ipv6: false, dnsServersV4: [], dnsServersV6: [], ...p });
  const build = (args: string[], p: Partial<PodNetwork> = {}, env: Record<string, string> = {}): RuleSet =>
    buildRuleSet(optionsFromArgs(['mesh-iptables', '-u', '1337', '-g', '1337', ...args], env), pod(p));

  // handleOutboundIncludeRules: the CIDR rules end MESH_OUTPUT; nothing closes it with `-j RETURN`.
  const cidrCases: [string, string[], Partial<PodNetwork>, string, string | undefined][] = [
    ['an IPv4 CIDR', ['-i', '10.0.0.0/8'], {}, '-A MESH_OUTPUT -d 10.0.0.0/8 -j MESH_REDIRECT', undefined],
    ['a CIDR and -k', ['-i', '10.0.0.0/8', '-k', 'tap0'], {}, '-A MESH_OUTPUT -d 10.0.0.0/8 -j MESH_REDIRECT', undefined],
    ['CIDRs of both families', ['-i', '10.0.0.0/8,fd00::/8'], { ipv6: true },
      '-A MESH_OUTPUT -d 10.0.0.0/8 -j MESH_REDIRECT', '-A MESH_OUTPUT -d fd00::/8 -j MESH_REDIRECT'],
    ['a loopback CIDR', ['-i', '127.1.2.3/32'], {}, '-A MESH_OUTPUT -d 127.1.2.3/32 -j MESH_REDIRECT', undefined],
    ['a loopback CIDR with DNS capture', ['-i', '127.1.2.3/32', '--redirect-dns'], { dnsServersV4: ['127.0.0.53'] },
      '-A MESH_OUTPUT -d 127.1.2.3/32 -j MESH_REDIRECT', undefined],
  ];
  for (const [name, args, p, lastV4, lastV6] of cidrCases) {
    it(`-i with ${name}: MESH_OUTPUT ends with the last CIDR's redirect`, () => {
      const set = build(args, p);
      assert.equal(lines(set.ipv4, 'nat').filter((l) => l.startsWith('-A MESH_OUTPUT ')).at(-1), lastV4);
      if (lastV6) assert.equal(lines(set.ipv6, 'nat').filter((l) => l.startsWith('-A MESH_OUTPUT ')).at(-1), lastV6);
    });
  }

  it('no case of the table closes MESH_OUTPUT with an unconditional RETURN', () => {
    // (MESH_OUTBOUND_OWNER_GROUPS='' writes one mid-chain, as istio-iptables: "no group is captured".)
    for (const c of cases) {
      const set = ruleSetFor(c);
      for (const rules of [set.ipv4, set.ipv6 ?? []]) {
        assert.notEqual(lines(rules, 'nat').filter((l) => l.startsWith('-A MESH_OUTPUT ')).at(-1), '-A MESH_OUTPUT -j RETURN', c.name);
      }
    }
  });

  it('every jump into a MESH_ chain, in every case and family, lands on a chain that family creates', () => {
    for (const c of cases) {
      const set = ruleSetFor(c);
      for (const [family, rules] of [['ipv4', set.ipv4], ['ipv6', set.ipv6 ?? []]] as const) {
        const created = new Set(rules.map((r) => `${r.table} ${r.chain}`));
        for (const r of rules) {
          const target = r.args[r.args.indexOf('-j') + 1] ?? '';
          if (target.startsWith('MESH_')) assert.ok(created.has(`${r.table} ${target}`), `${c.name} ${family}: ${r.table} ${ruleLine(r)}`);
        }
      }
    }
  });

  // SetupDNSRedir / addDNSConntrackZones: the nat and raw jumps per family, only where that family has servers.
  it('DNS servers of IPv4 only, dual stack, TPROXY, -c: IPv6 gets no jump into MESH_OUTPUT_DNS (nat) nor MESH_INBOUND (raw)', () => {
    const set = build(['-m', 'TPROXY', '-b', '*', '--redirect-dns', '-c', 'eth1'], { ipv6: true, dnsServersV4: ['10.96.0.10'] });
    assert.ok(lines(set.ipv4, 'nat').includes('-A MESH_OUTPUT -j MESH_OUTPUT_DNS'));
    assert.ok(lines(set.ipv4, 'raw').includes('-A PREROUTING -j MESH_INBOUND'));
    assert.ok(!lines(set.ipv6, 'nat').some((l) => l.includes('MESH_OUTPUT_DNS')));
    assert.ok(!lines(set.ipv6, 'raw').some((l) => l.includes('MESH_INBOUND')));
    assert.ok(lines(set.ipv6, 'raw').includes('-A OUTPUT -j MESH_OUTPUT_DNS'), 'raw OUTPUT jumps in both (its chain has the proxy\'s zones)');
  });

  it('DNS servers of IPv6 only: IPv4 gets neither jump; --capture-all-dns: both families get both', () => {
    const v6only = build(['--redirect-dns'], { ipv6: true, dnsServersV6: ['fd00::a'] });
    assert.ok(!lines(v6only.ipv4, 'nat').includes('-A MESH_OUTPUT -j MESH_OUTPUT_DNS'));
    assert.ok(!lines(v6only.ipv4, 'raw').includes('-A PREROUTING -j MESH_INBOUND'));
    assert.ok(lines(v6only.ipv6, 'nat').includes('-A MESH_OUTPUT -j MESH_OUTPUT_DNS'));
    const all = build(['--redirect-dns', '--capture-all-dns'], { ipv6: true });
    for (const rules of [all.ipv4, all.ipv6]) {
      assert.ok(lines(rules, 'nat').includes('-A MESH_OUTPUT -j MESH_OUTPUT_DNS'));
      assert.ok(lines(rules, 'raw').includes('-A PREROUTING -j MESH_INBOUND'));
    }
  });

  // shortCircuitExcludeInterfaces: in TPROXY mode, mangle PREROUTING and OUTPUT both skip the interface.
  it('TPROXY with -c: mangle OUTPUT -o <nic> -j RETURN in both families, right after PREROUTING -i <nic>', () => {
    const set = build(['-m', 'TPROXY', '-b', '*', '-c', 'eth1,veth+'], { ipv6: true });
    for (const rules of [set.ipv4, set.ipv6]) {
      assert.deepEqual(lines(rules, 'mangle').slice(0, 4), [
        '-A PREROUTING -i eth1 -j RETURN', '-A OUTPUT -o eth1 -j RETURN', '-A PREROUTING -i veth+ -j RETURN', '-A OUTPUT -o veth+ -j RETURN']);
    }
    assert.ok(!lines(build(['-b', '*', '-c', 'eth1']).ipv4, 'mangle').length, 'REDIRECT: no mangle rule at all');
  });

  // configureTProxyRoutes (run_linux.go): the policy routes only when inbound ports are captured.
  it('TPROXY without inbound ports: no policy route; with them, per family', () => {
    assert.deepEqual(build(['-m', 'TPROXY']).routes, []);
    assert.deepEqual(build(['-m', 'TPROXY', '-b', '80']).routes.map((r) => r.args.join(' ')),
      ['-f inet rule add fwmark 1337 lookup 133', '-f inet route add local default dev lo table 133']);
  });

  // configureIPv6Addresses: ::6/128 on lo whenever IPv6 is on, whatever the mode.
  it('IPv6 on: ::6/128 is added to lo; IPv4 only: not', () => {
    assert.deepEqual(build(['-b', '*'], { ipv6: true }).routes, [{ family: 'ipv6', args: ['-f', 'inet6', 'addr', 'add', '::6/128', 'dev', 'lo'] }]);
    assert.deepEqual(build(['-b', '*']).routes, []);
  });
});
