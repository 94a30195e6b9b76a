import assert from 'node:assert/strict';
import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import { it } from 'node:test';
import { installLeanAsyncBind } from '../../../src/proxy/http2/lean-async-bind.js';

installLeanAsyncBind();
installLeanAsyncBind(); // idempotent

it('a bound function runs in the async scope of the resource, wherever it is called', async () => {
  const als = new AsyncLocalStorage<string>();
  const resource = als.run('made here', () => new AsyncResource('Test'));
  const bound = resource.bind((a: number, b: number) => `${als.getStore() ?? 'none'} ${a + b}`);
  assert.equal(await als.run('called here', () => new Promise((resolve) => setImmediate(() => resolve(bound(1, 2))))), 'made here 3');
  assert.equal(bound(2, 3), 'made here 5');
});

it('`this` is the one given, else the caller\'s; length and asyncResource are kept', () => {
  const resource = new AsyncResource('Test');
  function who(this: unknown, _a: unknown, _b: unknown): unknown { return this; }
  const given = { given: true };
  assert.equal((resource.bind as (fn: unknown, thisArg: unknown) => typeof who)(who, given).call({ other: true }, 1, 2), given);
  const caller = { caller: true };
  assert.equal(resource.bind(who).call(caller, 1, 2), caller);
  const bound = resource.bind(who) as unknown as { length: number; asyncResource: AsyncResource };
  assert.equal(bound.length, 2);
  assert.equal(bound.asyncResource, resource);
  assert.equal(Object.keys(bound).includes('asyncResource'), true, 'enumerable, as node has it');
});

it('a non-function is refused with node\'s own error', () => {
  assert.throws(() => new AsyncResource('Test').bind(42 as unknown as () => void), { code: 'ERR_INVALID_ARG_TYPE' });
});
