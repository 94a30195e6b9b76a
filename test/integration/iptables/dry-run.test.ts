// `mesh-iptables --dry-run` run as a process inside a namespace set up like each fixture's pod
// (its addresses, its resolv.conf): the printed restore input must be the fixture, to the byte.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';
import { fixtureCases, fixtureText, haveFixtures, type FixtureCase } from '../../helpers/iptables-fixtures.js';
import { cleanEnv } from '../../helpers/run-cli.js';

/** The restore sections of the dry-run output, keyed by the comment line that heads them. */
function sections(stdout: string): Map<string, string> {
  const out = new Map<string, string>();
  let key = '';
  for (const line of stdout.split('\n')) {
    if (line.startsWith('# ') && /restore|routes/.test(line)) key = line.slice(2);
    else if (key && line !== '' && !line.startsWith('#')) out.set(key, `${out.get(key) ?? ''}${line}\n`);
  }
  return out;
}

function ip(...args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `ip ${args.join(' ')}: ${r.stderr}`);
}

/** A namespace whose first address is IPv6 or IPv4, with the case's resolv.conf. */
function podNamespace(c: FixtureCase): Netns {
  const ns = createNetns();
  assert.ok(ns, 'needs root to create a network namespace');
  ip('-n', ns.name, 'link', 'add', 'pod0', 'type', 'veth', 'peer', 'name', 'peer0');
  ip('-n', ns.name, 'addr', 'add', c.podHasIPv6 ? 'fd00:10::2/64' : '10.10.0.2/24', 'dev', 'pod0', ...(c.podHasIPv6 ? ['nodad'] : []));
  ip('-n', ns.name, 'link', 'set', 'pod0', 'up');
  ip('-n', ns.name, 'link', 'set', 'peer0', 'up');
  // `ip netns exec` shows /etc/netns/NAME/resolv.conf as /etc/resolv.conf.
  mkdirSync(`/etc/netns/${ns.name}`, { recursive: true });
  writeFileSync(`/etc/netns/${ns.name}/resolv.conf`, c.resolvConfNameservers.map((s) => `nameserver ${s}\n`).join(''));
  return ns;
}

describe('mesh-iptables --dry-run on the fixtures\' pods', { skip: !haveFixtures && 'no ../shared/fixtures' }, () => {
  const made: Netns[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'pa-dry-'));
  after(() => {
    for (const ns of made) {
      ns.close();
      rmSync(`/etc/netns/${ns.name}`, { recursive: true, force: true });
    }
    rmSync(dir, { recursive: true, force: true });
  });

  for (const c of fixtureCases()) {
    const name = c.name;
    it(name, async () => {
      const ns = podNamespace(c);
      made.push(ns);
      const dryRunFile = join(dir, `${name}.rules`);
      const r = await ns.runCli(['mesh-iptables', ...c.args.slice(1), '--dry-run'],
        { env: cleanEnv({ ...c.env, DRY_RUN_FILE_PATH: dryRunFile }) });
      assert.equal(r.code, 0, r.stderr);
      const got = sections(r.stdout);
      const v4 = fixtureText(name, 'v4');
      assert.equal(got.get('iptables-restore --noflush'), v4);
      const v6 = c.podHasIPv6 ? fixtureText(name, 'v6') : undefined;
      assert.equal(got.get('ip6tables-restore --noflush'), v6);
      assert.equal(readFileSync(dryRunFile, 'utf8'), v4 + (v6 ?? ''));
      assert.match(r.stdout, /^# pilot-agent mesh-iptables --dry-run: nothing was applied\.$/m);
    });
  }
});
