// Istio's public sample key set and tokens (test/fixtures/jwt, from the shared fixtures), with the
// key set given inline as `jwks`: both tokens verify for issuer testing@secure.istio.io.
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { claimValues, matchClaim } from '../../../src/security/claims.js';
import { JwtAuthenticator, type AuthnResult } from '../../../src/security/jwt/authenticator.js';
import { fixture, rule } from './support.js';

const ISSUER = 'testing@secure.istio.io';
const a = new JwtAuthenticator({ refreshIntervalMs: 20 * 60_000, insecureSkipVerify: false });
a.setRules([rule({ issuer: ISSUER, jwks: fixture('jwks.json') })]);
after(() => a.close());

async function valid(token: string): Promise<Extract<AuthnResult, { outcome: 'valid' }>> {
  const r = await a.authenticate({ headers: { authorization: `Bearer ${token}` }, url: '/headers' });
  assert.equal(r.outcome, 'valid', r.outcome === 'invalid' ? r.message : '');
  return r as Extract<AuthnResult, { outcome: 'valid' }>;
}

it('demo.jwt is valid, with its claims', async () => {
  const v = await valid(fixture('demo.jwt'));
  assert.equal(v.principal, `${ISSUER}/${ISSUER}`);
  assert.deepEqual(claimValues(v.claims, ['foo']), ['bar']);
  assert.equal(claimValues(v.claims, ['groups']), undefined);
  assert.equal(matchClaim({ kind: 'exact', value: 'group1' }, v.claims, ['groups']), false);
});

it('groups-scope.jwt is valid, and its groups list contains group1', async () => {
  const v = await valid(fixture('groups-scope.jwt'));
  assert.deepEqual(v.claims.groups, ['group1', 'group2']);
  assert.deepEqual(claimValues(v.claims, ['scope']), ['scope1', 'scope2']);
  assert.equal(matchClaim({ kind: 'exact', value: 'group1' }, v.claims, ['groups']), true);
  assert.equal(matchClaim({ kind: 'exact', value: 'group3' }, v.claims, ['groups']), false);
});

it('a fixture token for another issuer, or altered, is refused', async () => {
  const other = new JwtAuthenticator({ refreshIntervalMs: 20 * 60_000, insecureSkipVerify: false });
  other.setRules([rule({ issuer: 'someone@else', jwks: fixture('jwks.json') })]);
  const r = await other.authenticate({ headers: { authorization: `Bearer ${fixture('demo.jwt')}` }, url: '/' });
  assert.equal(r.outcome === 'invalid' && r.reason, 'unknown_issuer');
  other.close();
  const [h, , s] = fixture('demo.jwt').split('.');
  const forged = `${h}.${Buffer.from(JSON.stringify({ iss: ISSUER, sub: ISSUER, groups: ['group1'] })).toString('base64url')}.${s}`;
  const f = await a.authenticate({ headers: { authorization: `Bearer ${forged}` }, url: '/' });
  assert.equal(f.outcome === 'invalid' && f.reason, 'bad_signature');
});
