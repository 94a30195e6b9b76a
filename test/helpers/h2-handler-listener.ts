// A listener on 127.0.0.1 that hands each connection to an Http2Handler the way the capture listener
// does: its first bytes read, the socket paused, half-open allowed. For tests of the handler alone.
import { createServer, type AddressInfo, type Server } from 'node:net';
import type { Http2Handler } from '../../src/proxy/http2/handler.js';

export async function listenFor(handler: Http2Handler): Promise<{ server: Server; port: number }> {
  const server = createServer({ pauseOnConnect: true, allowHalfOpen: true }, (s) => {
    s.once('data', (head: Buffer) => {
      s.pause();
      handler.accept(s, head);
    });
    s.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}
