import assert from 'node:assert/strict';
import { it } from 'node:test';
import { prepareAdminRequest } from '../../src/admin/client.js';
import { AgentError } from '../../src/errors/agent-error.js';

it('normalises the path and the method', () => {
  assert.deepEqual(prepareAdminRequest({ port: 15000, method: 'get', path: 'stats' }), { port: 15000, method: 'GET', path: '/stats' });
  assert.deepEqual(prepareAdminRequest({ port: 15021, method: 'POST', path: '/logging?level=debug', body: 'x' }),
    { port: 15021, method: 'POST', path: '/logging?level=debug', body: 'x' });
});

it('allows only the agent\'s local ports', () => {
  for (const port of [15000, 15004, 15020, 15021]) assert.doesNotThrow(() => prepareAdminRequest({ port, method: 'GET', path: '/' }));
  for (const port of [0, 80, 15001, 15090, -1]) {
    assert.throws(() => prepareAdminRequest({ port, method: 'GET', path: '/' }), (e: unknown) =>
      e instanceof AgentError && e.exitCode === 2 && e.message.includes(`port ${port} is not allowed; allowed ports are 15000, 15004, 15020, 15021`));
  }
});

it('rejects a method that is not an HTTP token and a path with spaces', () => {
  assert.throws(() => prepareAdminRequest({ port: 15000, method: 'GE T', path: '/' }), /is not an HTTP method/);
  assert.throws(() => prepareAdminRequest({ port: 15000, method: 'GET', path: '/a b' }), /contains white space/);
});
