// `pilot-agent request` against a real local server on the agent's fixed ports, inside a network
// namespace of the test's own so the host's ports are never touched.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';

describe('pilot-agent request', () => {
  let ns: Netns | undefined;
  before(async () => {
    ns = createNetns();
    await ns?.startServer(['--port', '15000', '--port', '15020']);
  });
  after(() => ns?.close());

  const run = async (args: string[]) => {
    assert.ok(ns, 'needs root to create a network namespace');
    return ns.runCli(['request', ...args]);
  };

  it('prints the body verbatim on stdout and nothing else', async () => {
    const r = await run(['GET', '/stats']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^stand_in\.requests: \d+\n$/);
    assert.equal(r.stderr, '');
  });

  it('treats stats and /stats as the same path', async () => {
    const r = await run(['GET', 'stats']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^stand_in\.requests: \d+\n$/);
  });

  it('sends the method and the body', async () => {
    const r = await run(['post', 'echo', 'level=debug']);
    assert.equal(r.code, 0);
    assert.equal(r.stdout, 'POST /echo\nlevel=debug');
  });

  it('uses --debug-port among the allowed ports', async () => {
    const r = await run(['GET', '/stats', '--debug-port', '15020']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^stand_in\.requests/);
  });

  it('exits 1 with the status on stderr for a non-2xx answer', async () => {
    const r = await run(['GET', '/status/503']);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /received unsuccessful status code 503/);
    assert.match(r.stderr, /status 503/);
  });

  it('still prints the body of a 404 (the admin lists its endpoints) and exits 1', async () => {
    const r = await run(['GET', '/nothing-here']);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /endpoints:/);
    assert.match(r.stderr, /status code 404/);
  });

  it('exits 1 naming the port when nothing listens', async () => {
    const r = await run(['GET', '/stats', '--debug-port', '15021']);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /cannot reach localhost:15021: connect ECONNREFUSED/);
  });

  it('keeps logs off stdout even when asked for debug logs', async () => {
    const r = await run(['GET', '/stats', '--log_output_level', 'all:debug']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^stand_in\.requests: \d+\n$/);
  });
});
