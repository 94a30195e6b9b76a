// The shared iptables vectors (../shared/fixtures/iptables): cases.json and the restore files, as
// text and as rule sets (parsed back into Rule[]: a fixture-driven RuleSet, independent of the
// builder). `outbound-owner-groups` names the group `java`; tests give it a group of their own
// (made with groupadd, removed after), so parallel test files never share one.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouteCommand, RuleSet } from '../../src/iptables/rules.js';
import { parseRestore } from '../../src/iptables/save-parse.js';
import { repoRoot } from './repo.js';

export const fixturesDir = join(repoRoot, '..', 'shared', 'fixtures', 'iptables');
export const haveFixtures = existsSync(join(fixturesDir, 'cases.json'));

export interface FixtureCase {
  readonly name: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly podHasIPv6: boolean;
  readonly resolvConfNameservers: readonly string[];
}

export function fixtureCases(): FixtureCase[] {
  if (!haveFixtures) return [];
  const raw = JSON.parse(readFileSync(join(fixturesDir, 'cases.json'), 'utf8')) as Record<string, Omit<FixtureCase, 'name'>>;
  return Object.entries(raw).map(([name, c]) => ({ name, ...c }));
}

/** The restore text of a case's family (undefined when the case has no such file). */
export function fixtureText(name: string, family: 'v4' | 'v6', group?: string): string | undefined {
  const path = join(fixturesDir, `${name}.${family}.rules`);
  if (!existsSync(path)) return undefined;
  const text = readFileSync(path, 'utf8');
  return group ? text.replace(/--gid-owner java\b/g, `--gid-owner ${group}`) : text;
}

/** TPROXY's policy routes, as the builder writes them (DESIGN.md "iptables"). */
export function tproxyRoutes(mark: number, table: number, ipv6 = false): RouteCommand[] {
  const families: ['ipv4' | 'ipv6', string][] = ipv6 ? [['ipv4', 'inet'], ['ipv6', 'inet6']] : [['ipv4', 'inet']];
  return families.flatMap(([family, f]) => [
    { family, args: ['-f', f, 'rule', 'add', 'fwmark', String(mark), 'lookup', String(table)] },
    { family, args: ['-f', f, 'route', 'add', 'local', 'default', 'dev', 'lo', 'table', String(table)] },
  ]);
}

/** A case's rule set from its files; TPROXY cases get their policy routes. */
export function fixtureRuleSet(c: FixtureCase, group?: string): RuleSet {
  const v4 = fixtureText(c.name, 'v4', group) ?? '';
  const v6 = fixtureText(c.name, 'v6', group);
  const tproxy = c.args.includes('TPROXY');
  return {
    ipv4: parseRestore(v4),
    ...(v6 === undefined ? {} : { ipv6: parseRestore(v6) }),
    routes: tproxy ? tproxyRoutes(1337, 133, v6 !== undefined) : [],
  };
}

/** A group of the test's own (for `--gid-owner java`); `remove()` deletes it. */
export function tempGroup(): { readonly name: string; readonly gid: number; remove(): void } {
  const name = `pa-java-${randomBytes(3).toString('hex')}`;
  // Test files run in parallel: /etc/group may be locked by another one's groupadd for a moment.
  let r = spawnSync('groupadd', ['--system', name], { encoding: 'utf8' });
  for (let i = 0; i < 20 && r.status !== 0 && /lock/i.test(r.stderr); i++) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    r = spawnSync('groupadd', ['--system', name], { encoding: 'utf8' });
  }
  if (r.status !== 0) throw new Error(`groupadd ${name}: ${r.stderr}`);
  const line = spawnSync('getent', ['group', name], { encoding: 'utf8' }).stdout;
  const gid = Number(line.split(':')[2]);
  return {
    name,
    gid,
    remove: () => {
      for (let i = 0; i < 20 && spawnSync('groupdel', [name], { stdio: 'ignore' }).status === 10; i++) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100); // 10: /etc/group locked
      }
    },
  };
}
