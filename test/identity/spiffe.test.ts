import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentError } from '../../src/errors/agent-error.js';
import { formatSpiffeId, parseSpiffeId, principalOf, workloadSpiffeId } from '../../src/identity/spiffe.js';

const isSpiffeError = (pattern: RegExp) => (err: unknown): boolean =>
  err instanceof AgentError && err.code === 'ERR_SPIFFE_ID' && pattern.test(err.message);

describe('workloadSpiffeId', () => {
  const cases: [string, { TRUST_DOMAIN: string; POD_NAMESPACE: string; SERVICE_ACCOUNT: string }, string][] = [
    ['all set', { TRUST_DOMAIN: 'example.org', POD_NAMESPACE: 'shop', SERVICE_ACCOUNT: 'cart' }, 'spiffe://example.org/ns/shop/sa/cart'],
    ['empty service account is default', { TRUST_DOMAIN: 'cluster.local', POD_NAMESPACE: 'shop', SERVICE_ACCOUNT: '' }, 'spiffe://cluster.local/ns/shop/sa/default'],
    ['empty trust domain is cluster.local', { TRUST_DOMAIN: '', POD_NAMESPACE: 'shop', SERVICE_ACCOUNT: 'x' }, 'spiffe://cluster.local/ns/shop/sa/x'],
    ['empty namespace is default', { TRUST_DOMAIN: 'cluster.local', POD_NAMESPACE: '', SERVICE_ACCOUNT: 'sleep' }, 'spiffe://cluster.local/ns/default/sa/sleep'],
  ];
  for (const [name, env, id] of cases) it(name, () => assert.equal(workloadSpiffeId(env), id));

  it('refuses a service account that would make a malformed id', () => {
    assert.throws(() => workloadSpiffeId({ TRUST_DOMAIN: 'cluster.local', POD_NAMESPACE: 'a', SERVICE_ACCOUNT: 'x/y' }),
      isSpiffeError(/service account "x\/y"/));
  });
});

describe('parseSpiffeId', () => {
  it('splits an Istio id', () => {
    assert.deepEqual(parseSpiffeId('spiffe://cluster.local/ns/default/sa/sleep'),
      { trustDomain: 'cluster.local', namespace: 'default', serviceAccount: 'sleep' });
  });
  it('accepts upper case in the path', () => {
    assert.equal(parseSpiffeId('spiffe://td/ns/Ab/sa/C_d.e-f').serviceAccount, 'C_d.e-f');
  });

  const bad: [string, RegExp][] = [
    ['', /does not start with spiffe:\/\//],
    ['http://cluster.local/ns/a/sa/b', /does not start/],
    ['SPIFFE://cluster.local/ns/a/sa/b', /does not start/],
    ['spiffe://cluster.local', /no path/],
    ['spiffe:///ns/a/sa/b', /empty trust domain/],
    ['spiffe://Cluster.local/ns/a/sa/b', /trust domain "Cluster.local"/],
    ['spiffe://cluster.local:443/ns/a/sa/b', /trust domain/],
    ['spiffe://user@cluster.local/ns/a/sa/b', /trust domain/],
    ['spiffe://cluster.local/ns/a/sa/b/', /path is not/],
    ['spiffe://cluster.local/ns/a/sa', /path is not/],
    ['spiffe://cluster.local/ns/a/x/b', /path is not/],
    ['spiffe://cluster.local/sa/b/ns/a', /path is not/],
    ['spiffe://cluster.local/ns//sa/b', /empty namespace/],
    ['spiffe://cluster.local/ns/a/sa/', /empty service account/],
    ['spiffe://cluster.local/ns/../sa/b', /relative path segment/],
    ['spiffe://cluster.local/ns/a/sa/b?x=1', /service account "b\?x=1"/],
    ['spiffe://cluster.local/ns/a/sa/b#f', /service account/],
    ['spiffe://cluster.local/ns/a%2F/sa/b', /namespace/],
    [`spiffe://cluster.local/ns/${'a'.repeat(2100)}/sa/b`, /longer than 2048/],
  ];
  for (const [id, why] of bad) it(`rejects ${JSON.stringify(id.slice(0, 60))}`, () => assert.throws(() => parseSpiffeId(id), isSpiffeError(why)));
});

describe('formatSpiffeId / principalOf', () => {
  it('round-trips', () => {
    const id = formatSpiffeId({ trustDomain: 'td.example', namespace: 'ns1', serviceAccount: 'sa1' });
    assert.equal(id, 'spiffe://td.example/ns/ns1/sa/sa1');
    assert.deepEqual(parseSpiffeId(id), { trustDomain: 'td.example', namespace: 'ns1', serviceAccount: 'sa1' });
  });
  it('gives the principal without the scheme', () => {
    assert.equal(principalOf('spiffe://cluster.local/ns/default/sa/sleep'), 'cluster.local/ns/default/sa/sleep');
  });
  it('refuses the principal of a malformed id', () => {
    assert.throws(() => principalOf('cluster.local/ns/default/sa/sleep'), isSpiffeError(/does not start/));
  });
});
