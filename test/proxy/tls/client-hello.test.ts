import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { connect } from 'node:tls';
import { describe, it } from 'node:test';
import { MAX_CLIENT_HELLO_BYTES, readClientHello } from '../../../src/proxy/tls/client-hello.js';

/** The first flight a real client sends: a listener on port 0 keeps what arrives, then hangs up. */
async function firstFlight(start: (port: number) => { stop(): void }): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const server = createServer((s) => {
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => undefined);
    setTimeout(() => s.destroy(), 300);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = start((server.address() as AddressInfo).port);
  await new Promise((resolve) => setTimeout(resolve, 500));
  client.stop();
  server.close();
  return Buffer.concat(chunks);
}

const nodeClient = (servername: string | undefined, ALPNProtocols?: string[]) => (port: number) => {
  const c = connect({ port, host: '127.0.0.1', rejectUnauthorized: false, ...(servername !== undefined ? { servername } : {}), ...(ALPNProtocols ? { ALPNProtocols } : {}) });
  c.on('error', () => undefined);
  return { stop: () => c.destroy() };
};

const opensslClient = (args: string[]) => (port: number) => {
  const p = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, ...args], { stdio: ['pipe', 'ignore', 'ignore'] });
  return { stop: () => p.kill() };
};

// ---- synthetic ClientHellos for the malformed cases ----

const u16 = (n: number): Buffer => Buffer.from([n >> 8, n & 0xff]);
const vec16 = (b: Buffer): Buffer => Buffer.concat([u16(b.length), b]);
const alpnList = (...names: string[]): Buffer => vec16(Buffer.concat(names.map((n) => Buffer.concat([Buffer.from([n.length]), Buffer.from(n)]))));

function extension(type: number, data: Buffer): Buffer {
  return Buffer.concat([u16(type), vec16(data)]);
}

function sni(name: string | Buffer, nameType = 0): Buffer {
  const host = typeof name === 'string' ? Buffer.from(name, 'latin1') : name;
  return extension(0, vec16(Buffer.concat([Buffer.from([nameType]), vec16(host)])));
}

interface HelloShape {
  readonly extensions?: readonly Buffer[] | undefined;
  readonly sessionId?: number;
  readonly suites?: number;
  readonly compressions?: number;
  /** Added to the extension block's declared length. */
  readonly extensionsSkew?: number;
}

/** A ClientHello handshake message (type, length, body). */
function helloMessage(h: HelloShape = {}): Buffer {
  const exts = h.extensions === undefined ? undefined : Buffer.concat(h.extensions);
  const body = Buffer.concat([
    Buffer.from([3, 3]), Buffer.alloc(32, 7),
    Buffer.from([h.sessionId ?? 0]), Buffer.alloc(h.sessionId ?? 0),
    u16(h.suites ?? 2), Buffer.alloc(h.suites ?? 2, 0x13),
    Buffer.from([h.compressions ?? 1]), Buffer.alloc(h.compressions ?? 1),
    ...(exts ? [u16(exts.length + (h.extensionsSkew ?? 0)), exts] : []),
  ]);
  return Buffer.concat([Buffer.from([1, body.length >> 16, (body.length >> 8) & 0xff, body.length & 0xff]), body]);
}

/** `message` framed into handshake records of at most `size` bytes. */
function records(message: Buffer, size = 16_384): Buffer {
  const out: Buffer[] = [];
  for (let at = 0; at < message.length; at += size) {
    const part = message.subarray(at, at + size);
    out.push(Buffer.from([0x16, 3, 1, part.length >> 8, part.length & 0xff]), part);
  }
  return Buffer.concat(out);
}

describe('readClientHello on real clients', () => {
  const clients: [string, (port: number) => { stop(): void }, string | undefined, string[]][] = [
    ['node, SNI', nodeClient('a.example.com'), 'a.example.com', []],
    ['node, to an IP address: no SNI', nodeClient(undefined), undefined, []],
    ['node, a mesh peer\'s ALPN', nodeClient('outbound_.80_._.b.example.com', ['istio-peer-exchange', 'istio-http/1.1']),
      'outbound_.80_._.b.example.com', ['istio-peer-exchange', 'istio-http/1.1']],
    ['openssl s_client -servername, TLS 1.2', opensslClient(['-servername', 'B.Example.com', '-tls1_2']), 'B.Example.com', []],
    ['openssl s_client -noservername', opensslClient(['-noservername']), undefined, []],
    ['openssl s_client -alpn', opensslClient(['-noservername', '-alpn', 'istio,h2']), undefined, ['istio', 'h2']],
  ];
  for (const [name, client, want, alpn] of clients) {
    it(name, async () => {
      const flight = await firstFlight(client);
      assert.deepEqual(readClientHello(flight), { kind: 'hello', serverName: want, alpn });
      // Every shorter prefix only asks for more.
      for (let n = 0; n < flight.length; n += 7) assert.equal(readClientHello(flight.subarray(0, n)).kind, 'incomplete', `prefix ${n}`);
    });
  }

  it('reads a ClientHello cut into several records, as it reads one', async () => {
    const flight = await firstFlight(nodeClient('c.example.com'));
    const message = flight.subarray(5, 5 + flight.readUInt16BE(3));
    assert.deepEqual(readClientHello(records(message, 100)), { kind: 'hello', serverName: 'c.example.com', alpn: [] });
  });
});

describe('readClientHello on what is not a well-formed ClientHello', () => {
  const ok = (extensions?: Buffer[]): Buffer => records(helloMessage({ extensions }));
  const cases: [name: string, bytes: Buffer, want: string | RegExp][] = [
    ['no extensions at all', ok(), 'hello:'],
    ['other extensions, no SNI', ok([extension(10, Buffer.alloc(4))]), 'hello:'],
    ['an SNI among others', ok([extension(10, Buffer.alloc(4)), sni('x.example.com')]), 'hello:x.example.com'],
    ['ALPN beside the SNI', ok([sni('x.example.com'), extension(16, alpnList('istio', 'h2'))]), 'hello:x.example.com alpn:istio,h2'],
    ['an empty ALPN list', ok([extension(16, u16(0))]), /ALPN list/],
    ['an ALPN list longer than its extension', ok([extension(16, Buffer.concat([u16(9), Buffer.from([5]), Buffer.from('istio')]))]), /ALPN list/],
    ['an empty ALPN name', ok([extension(16, vec16(Buffer.from([0, 1, 97])))]), /empty ALPN protocol name/],
    ['an ALPN name past the list', ok([extension(16, vec16(Buffer.from([6, 105, 115])))]), /beyond the message/],
    ['plain HTTP', Buffer.from('GET / HTTP/1.1\r\n'), /not a TLS handshake record/],
    ['one byte of something else', Buffer.from('G'), /not a TLS handshake record/],
    ['SSL 2 style', Buffer.from([0x80, 0x2e, 0x01]), /not a TLS handshake record/],
    ['a record version that is not 3.x', Buffer.from([0x16, 2, 0]), /not a TLS record version/],
    ['an empty record', Buffer.from([0x16, 3, 1, 0, 0]), /a record of 0 bytes/],
    ['a record over 2^14', Buffer.from([0x16, 3, 1, 0x40, 0x01]), /a record of 16385 bytes/],
    ['a handshake that is not a ClientHello', records(Buffer.concat([Buffer.from([2, 0, 0, 1]), Buffer.alloc(1)])), /not a ClientHello/],
    ['a session id of 33 bytes', records(helloMessage({ sessionId: 33 })), /a session id longer than 32 bytes/],
    ['an odd cipher suite list', records(helloMessage({ suites: 3 })), /cipher suite list of odd or no length/],
    ['no compression method', records(helloMessage({ compressions: 0 })), /no compression method/],
    ['an extension block too long', records(helloMessage({ extensions: [sni('a.com')], extensionsSkew: 1 })), /extension block/],
    ['the SNI extension twice', ok([sni('a.com'), sni('b.com')]), /extension 0 repeated/],
    ['a name type other than host_name', ok([sni('a.com', 1)]), /not a host name/],
    ['an empty host name', ok([sni('')]), /a host name of 0 bytes/],
    ['a host name over 255 bytes', ok([sni('a'.repeat(256))]), /a host name of 256 bytes/],
    ['a NUL in the host name', ok([sni(Buffer.from('a.com\0.evil.com', 'latin1'))]), /a host name with a NUL byte/],
    ['a ClientHello longer than the maximum', records(helloMessage({ extensions: [extension(21, Buffer.alloc(MAX_CLIENT_HELLO_BYTES))] })), /a ClientHello too long/],
    ['a ClientHello in more than 8 records', records(helloMessage({ extensions: [extension(21, Buffer.alloc(200))] }), 20), /more than 8 records/],
  ];
  for (const [name, bytes, want] of cases) {
    it(name, () => {
      const r = readClientHello(bytes);
      const text = r.kind === 'hello' ? `hello:${r.serverName ?? ''}${r.alpn.length ? ` alpn:${r.alpn.join(',')}` : ''}` : r.kind === 'invalid' ? r.reason : 'incomplete';
      if (typeof want === 'string') assert.equal(text, want);
      else assert.match(text, want);
    });
  }

  it('an alert record in the middle of a ClientHello is refused', () => {
    const message = helloMessage({ extensions: [sni('a.com')] });
    const first = records(message.subarray(0, 10));
    const alert = Buffer.from([0x15, 3, 3, 0, 2, 2, 40]);
    assert.deepEqual(readClientHello(Buffer.concat([first, alert])), { kind: 'invalid', reason: 'a record that is not a handshake before the ClientHello ended' });
  });
});
