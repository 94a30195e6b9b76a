import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveConcurrency, resolveServiceCluster } from '../../src/agent/agent.js';

describe('resolveConcurrency', () => {
  const cases: [string, number, number | undefined, number, number, number][] = [
    ['the flag when above 0', 3, 2, 4, 8, 3],
    ['else the mesh config / PROXY_CONFIG', 0, 2, 4, 8, 2],
    ['else MESH_CPU_LIMIT', 0, undefined, 4, 8, 4],
    ['else the cores', 0, 0, 0, 8, 8],
    ['the flag beyond the cores', 4, 2, 0, 1, 4],
    ['the mesh config capped by the cores the process may run on', 0, 2, 0, 1, 1],
    ['MESH_CPU_LIMIT capped by the cores', 0, undefined, 4, 2, 2],
    ['at least one', 0, undefined, 0, 0, 1],
  ];
  for (const [name, flag, configured, cpuLimit, cores, expected] of cases) {
    it(name, () => assert.equal(resolveConcurrency(flag, configured, cpuLimit, cores), expected));
  }
});

describe('resolveServiceCluster (Istio\'s order: the mesh config\'s, when set, wins)', () => {
  it('the mesh config\'s (or PROXY_CONFIG\'s) serviceCluster over the flag', () => assert.equal(resolveServiceCluster('from-flag', 'shop'), 'shop'));
  it('the flag when the config sets none', () => assert.equal(resolveServiceCluster('from-flag', undefined), 'from-flag'));
  it('the flag when the config\'s is empty (Istio fills an empty one from the flag)', () => assert.equal(resolveServiceCluster('from-flag', ''), 'from-flag'));
});
