import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { AgentError } from '../../../src/errors/agent-error.js';
import { formatRejection } from '../../../src/config/resources/format.js';
import type { Rejection, ResourceSnapshot } from '../../../src/config/resources/types.js';
import { sourceDirectories, watchResources, type ResourceWatcher, type WatchResourcesOptions } from '../../../src/config/resources/watcher.js';

const root = mkdtempSync(join(tmpdir(), 'resources-watch-'));
const open: ResourceWatcher[] = [];
after(() => {
  for (const w of open) w.close();
  rmSync(root, { recursive: true, force: true });
});

const se = (name: string, address = '10.0.0.1'): string => `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: ${name}}
spec: {hosts: [${name}.example.com], addresses: [${address}]}
`;

const names = (s: ResourceSnapshot): string[] => s.serviceEntries.map((e) => `${e.meta.name}@${e.addresses[0]}`);

/** Starts a watcher whose changes can be awaited: `until(pred)` resolves with the first snapshot satisfying pred. */
async function start(dirs: string[], extra: Partial<WatchResourcesOptions> = {}) {
  const changes: { snapshot: ResourceSnapshot; rejections: Rejection[] }[] = [];
  const rejections: Rejection[] = [];
  const waiters: { pred: (s: ResourceSnapshot) => boolean; resolve: (s: ResourceSnapshot) => void }[] = [];
  const w = await watchResources({
    directories: dirs,
    defaultNamespace: 'default',
    debounceMs: 20,
    pollIntervalMs: 20,
    cwd: root,
    onChange: (snapshot, rs) => {
      changes.push({ snapshot, rejections: rs });
      for (const waiter of [...waiters]) {
        if (waiter.pred(snapshot)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(snapshot);
        }
      }
    },
    onRejection: (r) => rejections.push(r),
    onError: (err) => { throw err; },
    ...extra,
  });
  open.push(w);
  const until = (pred: (s: ResourceSnapshot) => boolean, what: string): Promise<ResourceSnapshot> => {
    if (pred(w.snapshot())) return Promise.resolve(w.snapshot());
    return new Promise((resolve, reject) => {
      // A guard against a hang, not a timing assertion: the change normally lands within ~debounce.
      const guard = setTimeout(() => reject(new Error(`no change to ${what}; now ${JSON.stringify(names(w.snapshot()))}`)), 10_000);
      waiters.push({ pred, resolve: (s) => { clearTimeout(guard); resolve(s); } });
    });
  };
  return { w, changes, rejections, until };
}

it('resolves configSources to directories (default ./etc/mesh/resources) and refuses other schemes', () => {
  assert.deepEqual(sourceDirectories([], '/srv/app'), ['/srv/app/etc/mesh/resources']);
  assert.deepEqual(sourceDirectories(['fs://./conf', 'fs:///abs/dir', 'fs://conf'], '/srv/app'), ['/srv/app/conf', '/abs/dir']);
  for (const bad of ['k8s://', 'xds://meshd:15010', 'fs://', './dir']) {
    assert.throws(() => sourceDirectories([bad], '/srv'), (e: unknown) => e instanceof AgentError && e.code === 'ERR_CONFIG' && e.message.includes(JSON.stringify(bad)), bad);
  }
});

it('reads the directory first: good files load beside broken ones; subdirectories, dot-files and other names are not read', async () => {
  const dir = join(root, 'initial');
  mkdirSync(join(dir, 'sub'), { recursive: true });
  writeFileSync(join(dir, 'b.yaml'), se('bee'));
  writeFileSync(join(dir, 'a.json'), JSON.stringify({ apiVersion: 'networking.mesh.io/v1', kind: 'ServiceEntry', metadata: { name: 'ay' }, spec: { hosts: ['ay.example.com'], addresses: ['10.0.0.2'] } }));
  writeFileSync(join(dir, 'c.yml'), `${se('sea')}---\n${se('bad', 'not-an-ip')}`);
  writeFileSync(join(dir, 'd.yaml'), 'spec: [\n');
  writeFileSync(join(dir, 'sub', 'e.yaml'), se('sub'));
  writeFileSync(join(dir, '.hidden.yaml'), se('hidden'));
  writeFileSync(join(dir, 'notes.txt'), se('txt'));
  symlinkSync(join(dir, 'sub', 'e.yaml'), join(dir, 'linked.yaml'));
  symlinkSync(join(dir, 'missing.yaml'), join(dir, 'dangling.yaml'));
  const { w, rejections } = await start([dir]);
  assert.deepEqual(names(w.snapshot()), ['ay@10.0.0.2', 'bee@10.0.0.1', 'sea@10.0.0.1', 'sub@10.0.0.1']);
  assert.deepEqual(w.snapshot().serviceEntries.map((e) => e.meta.origin.file), ['initial/a.json', 'initial/b.yaml', 'initial/c.yml', 'initial/linked.yaml'], 'path order; a symlinked file is read');
  assert.deepEqual(w.initialRejections.map(formatRejection).map((l) => l.replace(/: .*/, '')), ['initial/c.yml[1] ServiceEntry default/bad', 'initial/d.yaml[0]']);
  assert.deepEqual(rejections, w.initialRejections, 'onRejection sees the initial read\'s rejections');
  assert.equal(w.rejectCounts.get('ServiceEntry'), 1);
  w.close();
});

it('sees a file added, changed, replaced by rename (as editors do), broken, and removed', async () => {
  const dir = join(root, 'live');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), se('a'));
  const { w, changes, rejections, until } = await start([dir]);
  assert.deepEqual(names(w.snapshot()), ['a@10.0.0.1']);
  const v0 = w.snapshot().version;

  writeFileSync(join(dir, 'b.yaml'), se('b'));
  await until((s) => names(s).includes('b@10.0.0.1'), 'add b.yaml');

  writeFileSync(join(dir, 'a.yaml'), se('a', '10.0.0.9'));
  await until((s) => names(s).includes('a@10.0.0.9'), 'change a.yaml');

  writeFileSync(join(dir, '.a.yaml.swp'), se('a', '10.0.0.7'));
  renameSync(join(dir, '.a.yaml.swp'), join(dir, 'a.yaml'));
  await until((s) => names(s).includes('a@10.0.0.7'), 'replace a.yaml by rename');

  // Broken: the last good a.yaml stays, so no change is reported, only the rejection.
  const before = rejections.length;
  writeFileSync(join(dir, 'a.yaml'), 'kind: [\n');
  writeFileSync(join(dir, 'c.yaml'), se('c'));
  const s = await until((x) => names(x).includes('c@10.0.0.1'), 'add c.yaml beside a broken a.yaml');
  assert.deepEqual(names(s), ['a@10.0.0.7', 'b@10.0.0.1', 'c@10.0.0.1']);
  assert.ok(rejections.slice(before).some((r) => r.file === 'live/a.yaml' && /not valid YAML/.test(r.message)), 'the broken file is reported');

  unlinkSync(join(dir, 'b.yaml'));
  await until((x) => !names(x).some((n) => n.startsWith('b@')), 'remove b.yaml');

  const versions = changes.map((c) => c.snapshot.version);
  assert.ok(versions.every((v, i) => v > (i === 0 ? v0 : versions[i - 1]!)), `versions increase: ${versions.join(',')}`);
  w.close();
});

it('waits for a directory that does not exist yet, and notices when it goes away', async () => {
  const dir = join(root, 'later', 'resources');
  const { w, until } = await start([dir]);
  assert.deepEqual(names(w.snapshot()), []);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'x.yaml'), se('x'));
  await until((s) => names(s).includes('x@10.0.0.1'), 'directory created');
  writeFileSync(join(dir, 'y.yaml'), se('y'));
  await until((s) => names(s).includes('y@10.0.0.1'), 'a file added once watched');
  rmSync(join(root, 'later'), { recursive: true });
  await until((s) => names(s).length === 0, 'directory removed');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'z.yaml'), se('z'));
  await until((s) => names(s).includes('z@10.0.0.1'), 'directory made again');
  w.close();
});

it('a watch that cannot be set up is reported and the directory is polled instead', async () => {
  const dir = join(root, 'unwatchable');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), se('a'));
  const failures: string[] = [];
  const { w, until } = await start([dir], {
    watch: () => { throw Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' }); },
    onWatchFailure: (d, err) => failures.push(`${d}: ${err.message}`),
  });
  assert.deepEqual(failures, [`${dir}: ENOSPC: System limit for number of file watchers reached`]);
  assert.deepEqual(names(w.snapshot()), ['a@10.0.0.1']);
  writeFileSync(join(dir, 'b.yaml'), se('b'));
  await until((s) => names(s).includes('b@10.0.0.1'), 'polling picks up b.yaml');
  assert.equal(failures.length, 1, 'counted once, not at every poll');
  w.close();
});

it('close() stops watching: later changes are not reported and nothing keeps running', async () => {
  const dir = join(root, 'closed');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), se('a'));
  const { w, changes } = await start([dir]);
  w.close();
  writeFileSync(join(dir, 'b.yaml'), se('b'));
  // Several debounce periods: a watcher still running would have reported b.yaml by now.
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(changes.length, 0);
  assert.deepEqual(names(w.snapshot()), ['a@10.0.0.1']);
  await w.reload();
  assert.equal(changes.length, 0, 'reload after close is a no-op');
});

it('reload() re-reads at once and reports the change', async () => {
  const dir = join(root, 'reload');
  mkdirSync(dir);
  const { w, changes } = await start([dir], { debounceMs: 60_000 });
  writeFileSync(join(dir, 'a.yaml'), se('a'));
  await w.reload();
  assert.deepEqual(names(w.snapshot()), ['a@10.0.0.1']);
  assert.equal(changes.at(-1)?.snapshot, w.snapshot());
  w.close();
});
