// node:http2's client request() binds each stream's start to an AsyncResource. Node 20's
// AsyncResource#bind gives every bound function an `asyncResource` accessor wrapped twice in
// util.deprecate (DEP0172): two closures, two prototype changes and a property definition per
// request, 6–7% of the CPU of an HTTP/2 request through the proxy (profiled under h2load). The
// bound function here runs the same way (in the resource's async scope, `this` as given or as
// called) and keeps the deprecated property as a plain value, without the deprecation warning.
// Installed once per process, by the first pool of HTTP/2 upstream sessions.
import { AsyncResource } from 'node:async_hooks';

type AnyFunction = (...args: unknown[]) => unknown;

const nodeBind = AsyncResource.prototype.bind as (this: AsyncResource, fn: unknown, thisArg?: unknown) => AnyFunction;

function leanBind(this: AsyncResource, fn: AnyFunction, thisArg?: unknown): AnyFunction {
  if (typeof fn !== 'function') return nodeBind.call(this, fn, thisArg); // node's own error
  const resource = this;
  const bound = thisArg === undefined
    ? function (this: unknown, ...args: unknown[]): unknown { return resource.runInAsyncScope(fn, this, ...args); }
    : (...args: unknown[]): unknown => resource.runInAsyncScope(fn, thisArg, ...args);
  Object.defineProperties(bound, {
    length: { configurable: true, enumerable: false, writable: false, value: fn.length },
    asyncResource: { configurable: true, enumerable: true, writable: true, value: resource },
  });
  return bound;
}

let installed = false;

/** Puts the lean bind in place of node's (idempotent). */
export function installLeanAsyncBind(): void {
  if (installed) return;
  installed = true;
  AsyncResource.prototype.bind = leanBind as typeof AsyncResource.prototype.bind;
}
