// A TCP front for a TLS server that records the server name (SNI) of every ClientHello it passes on,
// read from the bytes on the wire (src/proxy/tls/client-hello.ts), so a test sees what a client
// really sent, whatever the TLS library behind it does with it. Everything is forwarded unchanged.
//
// Usage:
//   const front = await startSniRecorder({ host: '127.0.0.1', port: ca.port });   // 127.0.0.1, a free port
//   ... a client connects to front.port ...
//   assert.deepEqual(front.serverNames, [undefined]);                             // no SNI sent
//   await front.close();
import { connect, createServer, type Socket } from 'node:net';
import { readClientHello } from '../../src/proxy/tls/client-hello.js';

export interface SniRecorder {
  readonly host: string;
  readonly port: number;
  /** One entry per connection, in order: the name its ClientHello sent, undefined when none was. */
  readonly serverNames: readonly (string | undefined)[];
  close(): Promise<void>;
}

export async function startSniRecorder(target: { readonly host: string; readonly port: number }, host = '127.0.0.1'): Promise<SniRecorder> {
  const serverNames: (string | undefined)[] = [];
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const server = createServer((client) => {
    track(client);
    client.on('error', () => {});
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const hello = readClientHello(head);
      if (hello.kind === 'incomplete') return;
      client.off('data', onData);
      client.pause();
      if (hello.kind === 'invalid') {
        serverNames.push(`(not a ClientHello: ${hello.reason})`); // fails any assertion on the names, readably
        client.destroy();
        return;
      }
      serverNames.push(hello.serverName);
      const upstream = connect(target.port, target.host, () => {
        upstream.write(head);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      track(upstream);
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    host,
    port,
    serverNames,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
