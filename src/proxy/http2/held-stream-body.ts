// An HTTP/2 stream's request body held for a decider (held-body.ts): read until more than `limit`
// bytes are known or END_STREAM, then the stream is paused and what its body consumers read from
// then on is `source`: the bytes held, whole, then the rest of the stream as it comes (with
// back-pressure). An end is passed on only when it is one: a reset stream destroys `source`
// instead, so no upstream ever sees a body cut short as whole.
import type { CodecServerStream } from './codec-server.js';
import { PassThrough } from 'node:stream';
import { heldBodyReady, type HeldBody } from '../held-body.js';
import { endedWhole, type EndedStream } from './node-http2.js';

/** What the hold reads of a request's stream. */
export type HoldableStream = Pick<CodecServerStream, 'on' | 'off' | 'once' | 'pause' | 'resume' | 'readableEnded'> & EndedStream;

export class HeldStreamBody {
  readonly held: Promise<HeldBody | undefined>;
  /** Set once the wait is over with a body to forward: what the body's consumers read instead of the stream. */
  source: PassThrough | undefined = undefined;
  private settle: (held: HeldBody | undefined) => void = () => {};
  private dropped = false;

  /** `declared`: the request's content-length (-1: none). */
  constructor(private readonly stream: HoldableStream, limit: number, partial: boolean, declared: number) {
    this.held = new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      const finish = (held: HeldBody | undefined, ended: boolean): void => {
        if (settled) return;
        settled = true;
        stream.off('data', onData);
        stream.off('end', onEnd);
        stream.pause();
        if (held !== undefined && !this.dropped) this.bridge(chunks, ended);
        resolve(held);
      };
      const onData = (chunk: Buffer): void => {
        chunks.push(chunk);
        size += chunk.length;
        const held = heldBodyReady(chunks, size, false, limit, declared, partial);
        if (held !== undefined) finish(held, false);
      };
      const onEnd = (): void => {
        finish(endedWhole(stream) ? heldBodyReady(chunks, size, true, limit, declared, partial) : undefined, true);
      };
      this.settle = (held) => finish(held, true);
      // A request whose END_STREAM came with nothing to read has ended already.
      if (stream.readableEnded) {
        onEnd();
        return;
      }
      // 'end' first: a stream that held the rest of its body gives it, and its end, as soon as it is read.
      stream.once('end', onEnd);
      stream.on('data', onData);
      stream.resume();
    });
  }

  /** The stream closed before the wait was over: the decider is told (nothing to forward). */
  cancel(): void {
    this.settle(undefined);
  }

  /** The request is answered locally (the caller resumes the stream): whatever is or would be held is dropped. */
  drop(): void {
    this.dropped = true;
    this.settle(undefined);
    this.source?.destroy();
  }

  private bridge(chunks: readonly Buffer[], ended: boolean): void {
    const pass = new PassThrough();
    this.source = pass;
    for (const c of chunks) pass.write(c);
    if (ended) {
      pass.end();
      return;
    }
    const stream = this.stream;
    stream.on('data', (chunk: Buffer) => {
      if (pass.destroyed) return; // answered locally: the rest is read and dropped
      if (!pass.write(chunk)) {
        stream.pause();
        pass.once('drain', () => stream.resume());
      }
    });
    stream.once('end', () => {
      if (endedWhole(stream)) pass.end();
      else pass.destroy();
    });
    stream.resume();
  }
}
