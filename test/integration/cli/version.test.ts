import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { runCli } from '../../helpers/run-cli.js';

const SEMVER = /^\d+\.\d+\.\d+(-[\w.]+)?$/;

describe('pilot-agent version', () => {
  it('prints the version alone by default (--short is on)', async () => {
    const r = await runCli(['version']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^\d+\.\d+\.\d+\S*\n$/);
    const short = await runCli(['version', '--short']);
    assert.equal(short.stdout, r.stdout);
  });

  it('prints the full build information with --short=false', async () => {
    const r = await runCli(['version', '--short=false']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^version\.BuildInfo\{Version:"[^"]+", GitRevision:"[0-9a-f]{40}|unknown", NodeVersion:"v\d+/);
    assert.ok(r.stdout.includes(`NodeVersion:"${process.version}"`));
    assert.ok(r.stdout.includes(`Platform:"${process.platform}/${process.arch}"`));
    assert.match(r.stdout, /BuildTime:"\d{4}-\d\d-\d\dT/);
    const s = await runCli(['version', '-s=false']);
    assert.equal(s.stdout, r.stdout);
  });

  const parsers: [string, (text: string) => unknown][] = [['json', (t) => JSON.parse(t)], ['yaml', (t) => parseYaml(t)]];
  for (const [format, parse] of parsers) {
    it(`prints structured information with -o ${format}`, async () => {
      const r = await runCli(['version', '-o', format]);
      assert.equal(r.code, 0);
      const info = (parse(r.stdout) as { clientVersion: Record<string, string> }).clientVersion;
      assert.match(info['version']!, SEMVER);
      assert.equal(info['node_version'], process.version);
      assert.equal(info['platform'], `${process.platform}/${process.arch}`);
      assert.ok(info['revision'] && info['build_time'] && info['status']);
      const long = await runCli(['version', `--output=${format}`]);
      assert.equal(long.stdout, r.stdout);
    });
  }
});
