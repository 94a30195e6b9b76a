import assert from 'node:assert/strict';
import { it } from 'node:test';
import { AgentError } from '../../src/errors/agent-error.js';
import { DEFAULT_READY_URL, parseReadyUrl } from '../../src/status/ready-url.js';

it('reads the spec default as the local agent over https', () => {
  const t = parseReadyUrl(DEFAULT_READY_URL);
  assert.equal(t.url.href, 'https://localhost:15021/healthz/ready');
  assert.equal(t.local, true);
});

it('fills in an empty host in any form', () => {
  assert.equal(parseReadyUrl('http://:8080').url.href, 'http://localhost:8080/');
  assert.equal(parseReadyUrl('http:///ready').url.href, 'http://localhost/ready');
});

it('tells local from remote targets', () => {
  assert.equal(parseReadyUrl('http://127.0.0.1:15021/healthz/ready').local, true);
  assert.equal(parseReadyUrl('https://[::1]:15021/').local, true);
  assert.equal(parseReadyUrl('https://proxy.example:15021/').local, false);
});

it('rejects what is not an http(s) URL, naming the flag', () => {
  for (const bad of ['localhost:15021/healthz', 'ftp://host/x', '']) {
    assert.throws(() => parseReadyUrl(bad), (e: unknown) => e instanceof AgentError && e.exitCode === 2 && e.message.startsWith('--url:'));
  }
});
