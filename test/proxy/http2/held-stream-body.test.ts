// The HTTP/2 hold on a stand-in stream (a PassThrough with node's rstCode): what its consumers read
// afterwards is the held bytes then the rest, and an end only when the stream ended whole.
import assert from 'node:assert/strict';
import { PassThrough, type Readable } from 'node:stream';
import { it } from 'node:test';
import { HeldStreamBody, type HoldableStream } from '../../../src/proxy/http2/held-stream-body.js';

const fakeStream = (): PassThrough & { rstCode?: number } => new PassThrough();
const asStream = (s: PassThrough): HoldableStream => s as unknown as HoldableStream;

/** Everything `r` gives, and whether it ended or was destroyed without an end. */
function drain(r: Readable): Promise<{ text: string; ended: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    r.on('data', (c: Buffer) => { text += c.toString('latin1'); });
    r.once('end', () => resolve({ text, ended: true }));
    r.once('close', () => resolve({ text, ended: false }));
  });
}

it('a partial body: the first bytes are judged, the consumers get every byte, then the end', async () => {
  const s = fakeStream();
  const hold = new HeldStreamBody(asStream(s), 4, true, -1);
  s.write('abc');
  s.write('defg');
  const held = await hold.held;
  assert.deepEqual(held, { bytes: Buffer.from('abcd'), over: true });
  const out = drain(hold.source!);
  s.end('hij');
  assert.deepEqual(await out, { text: 'abcdefghij', ended: true });
});

it('a stream reset after the wait: its consumers never see an end (the body is not passed on as whole)', async () => {
  const s = fakeStream();
  const hold = new HeldStreamBody(asStream(s), 2, true, -1);
  s.write('abc');
  await hold.held;
  const out = drain(hold.source!);
  s.rstCode = 8; // CANCEL: node ends the readable side of a reset stream too
  s.end('d');
  assert.deepEqual(await out, { text: 'abcd', ended: false });
});

it('a reset before the body is whole, or the stream closing, ends the wait with nothing to forward', async () => {
  const s = fakeStream();
  const hold = new HeldStreamBody(asStream(s), 10, false, -1);
  s.write('ab');
  s.rstCode = 2;
  s.end();
  assert.equal(await hold.held, undefined);
  assert.equal(hold.source, undefined);
  const t = fakeStream();
  const closing = new HeldStreamBody(asStream(t), 10, false, -1);
  closing.cancel();
  assert.equal(await closing.held, undefined);
});

it('a whole body within the limit: judged whole, and the consumers get it with its end', async () => {
  const s = fakeStream();
  const hold = new HeldStreamBody(asStream(s), 10, false, -1);
  s.end('whole');
  assert.deepEqual(await hold.held, { bytes: Buffer.from('whole'), over: false });
  assert.deepEqual(await drain(hold.source!), { text: 'whole', ended: true });
});
