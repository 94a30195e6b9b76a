// The parser and normaliser against the real tools: each fixture restored in a fresh namespace and
// read back with iptables-save (nft and legacy backends) must be seen as exactly those mesh rules,
// chain by chain and in order, each printed exactly as normalizeRule renders it; and every rule of
// the normalisation corpus must come back exactly as the corpus says.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { systemIdResolver } from '../../../src/iptables/apply.js';
import type { Family } from '../../../src/iptables/rules.js';
import { expectedMesh, extractMesh, parseRestore, parseSave, type MeshChain } from '../../../src/iptables/save-parse.js';
import { fixtureCases, fixtureText, haveFixtures, tempGroup } from '../../helpers/iptables-fixtures.js';
import { NORMALIZE_CORPUS } from '../../helpers/normalize-corpus.js';
import { createNamespace, netnsSkip } from '../../helpers/pod-netns.js';

const BACKENDS = ['nft', 'legacy'] as const;
const byChain = (chains: readonly MeshChain[]): Record<string, readonly string[]> =>
  Object.fromEntries(chains.map((c) => [`${c.table} ${c.chain}`, c.rules]));

describe('fixtures read back with iptables-save', { skip: netnsSkip || (!haveFixtures && 'no ../shared/fixtures') }, () => {
  let group: ReturnType<typeof tempGroup>;
  before(() => { group = tempGroup(); });
  after(() => group?.remove());

  for (const backend of BACKENDS) {
    for (const c of fixtureCases()) {
      it(`${backend}: ${c.name}`, () => {
        const ns = createNamespace();
        try {
          const resolveId = systemIdResolver();
          for (const [f, family, base] of [['v4', 'ipv4', 'iptables'], ['v6', 'ipv6', 'ip6tables']] as const) {
            const text = fixtureText(c.name, f, group.name);
            if (text === undefined) continue;
            ns.exec(`${base}-${backend}-restore`, ['-w', '--noflush'], { input: text });
            const saved = parseSave(ns.exec(`${base}-${backend}-save`, []).stdout);
            const o = { family: family as Family, resolveId };
            const want = expectedMesh(parseRestore(text), o);
            const got = extractMesh(saved, o);
            assert.deepEqual(byChain(got), byChain(want), `${c.name}.${f}: mesh part chain by chain`);
            // The kernel's own text of each rule is the canonical form, to the byte.
            for (const chain of got) assert.deepEqual(chain.raw, chain.rules, `${c.name}.${f} ${chain.chain}`);
            // A fresh namespace holds only our rules: the mesh part is everything.
            const total = saved.reduce((n, t) => n + t.chains.reduce((m, ch) => m + ch.rules.length, 0), 0);
            assert.equal(got.reduce((n, ch) => n + ch.rules.length, 0), total, 'every rule recognised as ours');
            // and exactly the fixture's number of rules
            assert.equal(total, parseRestore(text).length);
          }
        } finally {
          ns.close();
        }
      });
    }
  }
});

describe('normalisation corpus read back with iptables-save', { skip: netnsSkip }, () => {
  for (const backend of BACKENDS) {
    for (const family of ['ipv4', 'ipv6'] as const) {
      it(`${backend} ${family}`, () => {
        const cases = NORMALIZE_CORPUS.filter(([f]) => f === family);
        const base = family === 'ipv6' ? 'ip6tables' : 'iptables';
        const ns = createNamespace();
        try {
          let input = '';
          const tables = [...new Set(cases.map(([, t]) => t))];
          for (const table of tables) {
            const bodies = cases.filter(([, t]) => t === table).map(([, , body]) => body);
            const targets = [...new Set(bodies.flatMap((b) => /-j (MESH_\w+)/.exec(b)?.[1] ?? []))];
            input += `*${table}\n-N MESH_CORPUS\n${targets.map((t) => `-N ${t}\n`).join('')}`
              + `${bodies.map((b) => `-A MESH_CORPUS ${b}\n`).join('')}COMMIT\n`;
          }
          ns.exec(`${base}-${backend}-restore`, ['-w', '--noflush'], { input });
          const saved = parseSave(ns.exec(`${base}-${backend}-save`, []).stdout);
          for (const table of tables) {
            const got = saved.find((t) => t.name === table)!.chains.find((ch) => ch.name === 'MESH_CORPUS')!.rules;
            const want = cases.filter(([, t]) => t === table).flatMap(([, , , s]) => s);
            assert.deepEqual(got, want, `${table}`);
          }
        } finally {
          ns.close();
        }
      });
    }
  }
});
