// Every rule set of the builder's cases is accepted by the kernel: iptables-restore (and
// ip6tables-restore) in a fresh namespace each, and iptables-save then lists every mesh chain.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { toRestore } from '../../../src/iptables/rules.js';
import { createNetns } from '../../helpers/netns.js';
import { builderCases, ruleSetFor } from '../../iptables/builder-cases.js';

function restore(ns: string, binary: string, input: string): string {
  const r = spawnSync('ip', ['netns', 'exec', ns, binary, '--noflush'], { input, encoding: 'utf8' });
  assert.equal(r.status, 0, `${binary}: ${r.stderr}\n${input}`);
  return spawnSync('ip', ['netns', 'exec', ns, binary.replace('-restore', '-save')], { encoding: 'utf8' }).stdout;
}

describe('iptables-restore accepts every rule set the builder makes', () => {
  for (const c of builderCases) {
    it(c.name, () => {
      const ns = createNetns();
      assert.ok(ns, 'needs root to create a network namespace');
      try {
        const set = ruleSetFor(c);
        for (const [binary, rules] of [['iptables-restore', set.ipv4], ['ip6tables-restore', set.ipv6]] as const) {
          if (!rules) continue;
          const saved = restore(ns.name, binary, toRestore(rules));
          for (const chain of new Set(rules.map((r) => r.chain).filter((ch) => ch.startsWith('MESH_')))) {
            assert.match(saved, new RegExp(`^:${chain} - `, 'm'), `${chain} exists`);
          }
        }
      } finally {
        ns.close();
      }
    });
  }
});
