// The TLS parameter tables against the running Node: what they claim OpenSSL can and cannot do is
// checked here, with real handshakes where a list of names would not tell.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { connect, createServer, getCiphers, type SecureVersion } from 'node:tls';
import { describe, it } from 'node:test';
import {
  DEFAULT_CIPHER_SUITES, ISTIO_CIPHER_SUITES, nodeTlsSettings, rangeProblem, TLS13_CIPHER_SUITES, UNAVAILABLE_CIPHER_SUITES,
  type TlsParameters,
} from '../../../src/config/resources/tls-parameters.js';
import { FIXTURES } from '../../helpers/gateway.js';

const CERT = { cert: readFileSync(join(FIXTURES, 'localhost.crt')), key: readFileSync(join(FIXTURES, 'localhost.key')) };

/** The protocol a client limited to `client` gets from a server with `server` settings, or the client's error code. */
async function negotiate(server: { minVersion?: SecureVersion; ciphers?: string }, client: { minVersion?: SecureVersion; maxVersion?: SecureVersion; ciphers?: string }): Promise<string> {
  const s = createServer({ ...CERT, ...server }, (c) => c.end());
  s.on('tlsClientError', () => undefined);
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  try {
    return await new Promise((resolve) => {
      const c = connect({ port: (s.address() as { port: number }).port, host: '127.0.0.1', rejectUnauthorized: false, ...client }, () => {
        resolve(`${c.getProtocol()} ${c.getCipher().name}`);
        c.destroy();
      });
      c.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
  } finally {
    s.close();
  }
}

describe('TLS parameters against this Node\'s OpenSSL', () => {
  const offered = new Set(getCiphers().map((c) => c.toUpperCase()));

  it('offers every accepted cipher suite and none of the ones said unavailable', () => {
    for (const name of ISTIO_CIPHER_SUITES) assert.equal(offered.has(name), !UNAVAILABLE_CIPHER_SUITES.has(name), name);
    for (const name of TLS13_CIPHER_SUITES) assert.ok(offered.has(name), name);
  });

  it('cannot negotiate TLS 1.0 or 1.1 at its security level, even when a server allows them', async () => {
    for (const version of ['TLSv1', 'TLSv1.1'] as const) {
      assert.doesNotMatch(await negotiate({ minVersion: 'TLSv1' }, { minVersion: version, maxVersion: version, ciphers: 'DEFAULT@SECLEVEL=0' }), /^TLSv1/, version);
    }
  });

  it('by default: TLS 1.3, or TLS 1.2 with forward secrecy only; TLS 1.2 clients without ECDHE are refused', async () => {
    const settings = nodeTlsSettings({});
    assert.deepEqual([settings.minVersion, settings.maxVersion], ['TLSv1.2', 'TLSv1.3']);
    assert.match(await negotiate(settings, {}), /^TLSv1\.3 TLS_/);
    assert.equal(await negotiate(settings, { maxVersion: 'TLSv1.2' }), 'TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256');
    assert.equal(await negotiate(settings, { maxVersion: 'TLSv1.2', ciphers: 'AES128-SHA:AES256-GCM-SHA384' }), 'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE');
    assert.ok(DEFAULT_CIPHER_SUITES.every((c) => c.startsWith('ECDHE-')));
  });

  it('honours minProtocolVersion and cipherSuites', async () => {
    const only13 = nodeTlsSettings({ minProtocolVersion: 'TLSV1_3' });
    assert.equal(await negotiate(only13, { maxVersion: 'TLSv1.2' }), 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION');
    const one = nodeTlsSettings({ cipherSuites: ['ECDHE-RSA-AES256-GCM-SHA384'] });
    assert.equal(await negotiate(one, { maxVersion: 'TLSv1.2' }), 'TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384');
    assert.match(await negotiate(one, {}), /^TLSv1\.3 /, 'TLS 1.3 stays on: its suites are always added');
    assert.equal(await negotiate(nodeTlsSettings({ maxProtocolVersion: 'TLSV1_2' }), {}), 'TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256');
  });
});

describe('rangeProblem', () => {
  const cases: [TlsParameters['minProtocolVersion'], TlsParameters['maxProtocolVersion'], RegExp | undefined][] = [
    [undefined, undefined, undefined],
    ['TLSV1_3', 'TLSV1_3', undefined],
    ['TLSV1_2', 'TLS_AUTO', undefined],
    ['TLS_AUTO', 'TLSV1_2', undefined],
    ['TLSV1_3', 'TLSV1_2', /TLSV1_2 is below minProtocolVersion TLSV1_3/],
    [undefined, 'TLSV1_1', /TLSV1_1 is below minProtocolVersion TLS_AUTO \(TLS 1\.2\)/],
  ];
  for (const [min, max, want] of cases) {
    it(`${min ?? '-'} .. ${max ?? '-'}`, () => {
      const problem = rangeProblem(min, max);
      if (want) assert.match(problem ?? '', want);
      else assert.equal(problem, undefined);
    });
  }
});
