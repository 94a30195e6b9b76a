// After a protocol switch (101 to an Upgrade, 2xx to CONNECT) the client connection and its
// upstream carry raw bytes both ways until both have ended: back-pressure each way, a FIN passed on
// as a FIN, an error on either side ending both. Only a switch the upstream confirmed gets here:
// any other answer keeps the connection HTTP, each later request judged on its own.
import { resetSocket } from '../../net/reset.js';
import type { Socket } from 'node:net';
import type { UpstreamConnection } from './upstream-pool.js';
import { writeCopy } from '../read-buffers.js';
import { forwardReads } from '../tcp/relay.js';

/**
 * Joins `client` and `up` (already past the switch). `clientBytes`: what the client sent after the
 * request, not yet forwarded. `done` is called once, when both sockets are closed.
 */
export function runTunnel(client: Socket, up: UpstreamConnection, clientBytes: Buffer | undefined, done: (err: Error | undefined) => void): void {
  const upstream = up.socket;
  let error: Error | undefined;
  let closed = 0;
  let finished = false;
  const close = (err: Error | undefined): void => {
    error ??= err;
    if (err) {
      if (!client.destroyed) resetSocket(client);
      if (!upstream.destroyed) resetSocket(upstream);
    }
  };
  const oneClosed = (): void => {
    if (++closed === 2 && !finished) {
      finished = true;
      done(error);
    }
  };
  let upstreamClosed = false;
  up.carryRaw({
    onData: (bytes) => writeCopy(client, bytes), // a view of the shared read buffer: written from a pooled copy
    onEnd: () => client.end(),
    onClose: (err) => {
      close(err);
      if (!upstreamClosed) {
        upstreamClosed = true;
        if (!client.destroyed && !client.writableEnded) client.end();
        oneClosed();
      }
    },
  });
  client.on('drain', () => up.resume());
  client.on('error', (err: Error) => close(err));
  client.once('close', oneClosed);
  if (clientBytes && clientBytes.length > 0) upstream.write(clientBytes);
  forwardReads(client, upstream);
  client.resume();
}
