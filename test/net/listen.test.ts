// Listening without node's address lookup: an IPv6 address bound through libc and handed over,
// IPv4 and "every address" through node itself; a taken port is an error with node's code.
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { after, describe, it } from 'node:test';
import { listenAll, listenOnce } from '../../src/net/listen.js';
import { localAddresses } from '../../src/net/local-addresses.js';

const servers: Server[] = [];
after(() => { for (const s of servers) s.close(); });

function server(): Server {
  const s = createServer((socket) => socket.end('hi'));
  servers.push(s);
  return s;
}

function greeting(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    connect({ host, port }).setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve(text)).on('error', reject);
  });
}

const hasV6Loopback = localAddresses().includes('::1');

describe('listenOnce / listenAll', () => {
  it('listens on an IPv4 address', async () => {
    const s = server();
    await listenOnce(s, 0, '127.0.0.1');
    const a = s.address() as AddressInfo;
    assert.equal(a.address, '127.0.0.1');
    assert.equal(await greeting('127.0.0.1', a.port), 'hi');
  });

  it('listens on an IPv6 address through a socket of its own', { skip: !hasV6Loopback && 'no ::1 here' }, async () => {
    const s = server();
    await listenOnce(s, 0, '::1');
    const a = s.address() as AddressInfo;
    assert.deepEqual([a.address, a.family], ['::1', 'IPv6']);
    assert.equal(await greeting('::1', a.port), 'hi');
  });

  it('refuses a taken port on an IPv6 address with node\'s error code', { skip: !hasV6Loopback && 'no ::1 here' }, async () => {
    const first = server();
    await listenOnce(first, 0, '::1');
    const { port } = first.address() as AddressInfo;
    await assert.rejects(listenOnce(server(), port, '::1'), (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE');
  });

  it('listens on every address without a host', async () => {
    const s = server();
    await listenAll(s, 0);
    const { port } = s.address() as AddressInfo;
    assert.equal(await greeting('127.0.0.1', port), 'hi');
  });
});
