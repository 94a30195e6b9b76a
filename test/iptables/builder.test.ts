// The builder against istio-iptables' own output: the shared fixtures (exact restore text), then
// table-driven cases for every flag and their combinations.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildRuleSet, type PodNetwork } from '../../src/iptables/builder.js';
import { toRestore } from '../../src/iptables/rules.js';
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
