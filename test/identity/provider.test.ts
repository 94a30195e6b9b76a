import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readEnvironment } from '../../src/config/env/registry.js';
import { AgentError } from '../../src/errors/agent-error.js';
import { chooseIdentitySource, identitySourceFrom, tokenFileFor } from '../../src/identity/provider.js';
import { recordingLogger } from '../helpers/recording-logger.js';

const env = (vars: Record<string, string>) => readEnvironment(vars).values;

describe('chooseIdentitySource (precedence)', () => {
  const cases: [string, Record<string, string>, ReturnType<typeof chooseIdentitySource>][] = [
    ['nothing set: none', {}, { kind: 'none' }],
    ['CA_ADDR: the CA', { CA_ADDR: 'istiod.istio-system.svc:15012' }, { kind: 'ca', address: 'istiod.istio-system.svc:15012' }],
    ['FILE_MOUNTED_CERTS: ./etc/certs', { FILE_MOUNTED_CERTS: 'true' }, { kind: 'files', dir: '/pod/etc/certs' }],
    ['files win over CA_ADDR', { FILE_MOUNTED_CERTS: 'true', CA_ADDR: 'ca:15012' }, { kind: 'files', dir: '/pod/etc/certs' }],
    ['PROV_CERT, relative to the working directory', { PROV_CERT: 'vm/certs' }, { kind: 'files', dir: '/pod/vm/certs' }],
    ['PROV_CERT absolute, over FILE_MOUNTED_CERTS and CA_ADDR', { PROV_CERT: '/certs', FILE_MOUNTED_CERTS: 'true', CA_ADDR: 'ca:1' }, { kind: 'files', dir: '/certs' }],
  ];
  for (const [name, vars, expected] of cases) it(name, () => assert.deepEqual(chooseIdentitySource(env(vars), '/pod'), expected));
});

describe('identitySourceFrom', () => {
  it('none: state none, no certificate', async () => {
    const source = identitySourceFrom(env({}), '/pod', recordingLogger());
    await source.start();
    assert.deepEqual(source.state(), { state: 'none' });
    assert.equal(source.current(), undefined);
    source.close();
  });

  const bad: [Record<string, string>, RegExp][] = [
    [{ CA_ADDR: 'istiod' }, /CA_ADDR="istiod" is not host:port/],
    [{ CA_ADDR: 'ca:15012', JWT_POLICY: 'none' }, /JWT_POLICY="none" is not supported/],
    [{ CA_ADDR: 'ca:15012', ECC_SIGNATURE_ALGORITHM: 'ECDSA', ECC_CURVE: 'P999' }, /ECC_CURVE="P999"/],
    [{ CA_ADDR: 'ca:15012', SECRET_GRACE_PERIOD_RATIO: '1.5' }, /SECRET_GRACE_PERIOD_RATIO=1.5 is not a ratio/],
    [{ CA_ADDR: 'ca:15012', SECRET_TTL: '0s' }, /SECRET_TTL=0s is not a positive duration/],
    [{ CA_ADDR: 'ca:15012', SERVICE_ACCOUNT: 'a/b' }, /invalid SPIFFE id/],
    [{ MESH_GPRC_MAXRECVMSGSIZE: '0' }, /MESH_GPRC_MAXRECVMSGSIZE=0 is not a positive integer/],
  ];
  it('MESH_GPRC_MAXSTREAMS is not read (it bounds a gRPC server; this agent serves none): any value starts', () => {
    const source = identitySourceFrom(env({ CA_ADDR: 'ca:15012', MESH_GPRC_MAXSTREAMS: '-5' }), '/pod', recordingLogger());
    assert.equal(source.state().state, 'pending');
    source.close();
  });

  for (const [vars, pattern] of bad) {
    it(`refuses ${JSON.stringify(vars)} before starting`, () => {
      assert.throws(() => identitySourceFrom(env(vars), '/pod', recordingLogger()), (err: unknown) => err instanceof AgentError && pattern.test(err.message));
    });
  }

  it('token files by JWT_POLICY', () => {
    assert.equal(tokenFileFor('third-party-jwt', '/pod'), '/pod/var/run/secrets/tokens/istio-token');
    assert.equal(tokenFileFor('first-party-jwt', '/pod'), '/pod/var/run/secrets/kubernetes.io/serviceaccount/token');
  });

  it('IPv6 CA addresses are accepted', () => {
    const source = identitySourceFrom(env({ CA_ADDR: '[fd00::1]:15012' }), '/pod', recordingLogger());
    assert.equal(source.state().state, 'pending');
    source.close();
  });
});
