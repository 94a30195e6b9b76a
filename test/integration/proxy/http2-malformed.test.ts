// Malformed HTTP/2 messages (RFC 9113 8.1.1) through the sidecar's inbound listener, from raw frames
// the test writes itself (HPACK literals without indexing, no Huffman), to apps that print every
// request they receive (test/fixtures/h2-malformed.mjs): what the client gets back and what the
// application saw, for each class docs/HTTP2.md names ("Malformed messages"):
//   - 8.2.1 field names and values (CR, LF, NUL, controls, whitespace at either end, a name outside
//     the token set or upper-case), 8.2.2 connection-specific fields, 8.3 pseudo-header faults: the
//     stream is reset with PROTOCOL_ERROR (our frame layer) and nothing reaches the application;
//   - content-length contradicted by the DATA frames: reset with PROTOCOL_ERROR, nothing reaches it;
// and the same for responses from an HTTP/2 upstream (a raw server answering the chosen block).
// The gateway's side is test/integration/gateway/http2-malformed.test.ts.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import {
  BAD_RESPONSES, blockHex, FIELD_FAULTS, FIELD_RESPONSES, H2_MALFORMED, PROTOCOL_ERROR, REFUSED,
  requestFields, seenAt, type Field, type Sent,
} from '../../helpers/h2-malformed-cases.js';
import { netnsSkip, POD_V4, type Pod } from '../../helpers/pod-netns.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const H2C = 7080;
const HTTP1 = 7090;
const RAW = 7081;
const protocol = (port: number): string => (port === H2C ? 'HTTP/2' : 'HTTP/1.1');

describe('malformed HTTP/2 messages through the sidecar (inbound)', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let pod: Pod;
  let apps: ChildProcess;
  let printed = '';

  before(async () => {
    sp = await startSidecarPod({
      prepare: async (p) => {
        apps = p.start(process.execPath, [H2_MALFORMED, 'apps', '0.0.0.0']);
        apps.stdout!.setEncoding('utf8').on('data', (d: string) => { printed += d; });
        await untilFirstOutput(apps);
      },
    });
    pod = sp.pod;
  });
  after(() => sp?.close());

  const request = (path: string, port: number, method?: string): Field[] => requestFields(path, `${POD_V4}:${port}`, method);
  /** Raw frames from the peer to the pod's `port`. */
  const send = (port: number, fields: readonly Field[], data?: string): Sent => {
    const r = pod.peer.exec(process.execPath, [H2_MALFORMED, 'send', POD_V4, String(port), blockHex(fields), ...(data === undefined ? [] : [data])]);
    return JSON.parse(r.stdout.trim()) as Sent;
  };
  let syncs = 0;
  /**
   * Until the apps' output so far is read: a well-formed request sent after the others, awaited in
   * what they printed (the client runs synchronously, so their lines are read only now).
   */
  const flushed = async (): Promise<void> => {
    const path = `/sync/${++syncs}`;
    assert.equal(send(H2C, request(path, H2C)).status, 200);
    await waitFor(`the apps to print ${path}`, () => seenAt(printed, path).length > 0 || undefined);
  };

  for (const port of [H2C, HTTP1]) {
    for (const [name, malformed] of REFUSED) {
      it(`${name} to an ${protocol(port)} app: RST_STREAM PROTOCOL_ERROR, the app saw nothing`, async () => {
        const path = `/refused/${port}/${encodeURIComponent(name)}`;
        const r = send(port, malformed(request(path, port)));
        assert.equal(r.reset, PROTOCOL_ERROR, JSON.stringify(r));
        assert.equal(r.status, null, JSON.stringify(r));
        await flushed();
        assert.deepEqual(seenAt(printed, path), []);
      });
    }

    it(`no :path, and an empty :path (8.3.1), to ${protocol(port)}: RST_STREAM PROTOCOL_ERROR`, () => {
      for (const fields of [request('/', port).filter(([n]) => n !== ':path'), request('', port)]) {
        const r = send(port, fields);
        assert.equal(r.reset, PROTOCOL_ERROR, JSON.stringify(r));
        assert.equal(r.status, null);
      }
    });

    it(`content-length contradicted by the DATA, to ${protocol(port)}: RST_STREAM PROTOCOL_ERROR, the app saw nothing`, async () => {
      for (const cl of ['10', '1']) {
        const path = `/length/${port}/${cl}`;
        const r = send(port, [...request(path, port, 'POST'), ['content-length', cl]], Buffer.from('abcde').toString('hex'));
        assert.equal(r.reset, PROTOCOL_ERROR, JSON.stringify(r));
        assert.equal(r.status, null, JSON.stringify(r));
        await flushed();
        assert.deepEqual(seenAt(printed, path), []);
      }
    });

    it(`8.2.1 to ${protocol(port)}: RST_STREAM PROTOCOL_ERROR, the app saw nothing (nghttp2 dropped the field and forwarded the rest)`, async () => {
      for (const [name, field] of FIELD_FAULTS) {
        const path = `/field/${port}/${encodeURIComponent(name)}`;
        const r = send(port, [...request(path, port), field, ['x-after', 'kept']]);
        assert.equal(r.reset, PROTOCOL_ERROR, `${name}: ${JSON.stringify(r)}`);
        assert.equal(r.status, null, `${name}: ${JSON.stringify(r)}`);
        await flushed();
        assert.deepEqual(seenAt(printed, path), [], name);
      }
    });
  }

  // Responses from an HTTP/2 upstream: the raw server on 7081 answers the block the path names.
  const respond = (fields: readonly Field[]): Sent => send(RAW, request(`/resp/${blockHex(fields)}`, RAW));
  it('a response nghttp2 refuses (connection-specific field, upper-case name, pseudo-header last): the client gets 503', () => {
    for (const fields of BAD_RESPONSES) assert.equal(respond(fields).status, 503, JSON.stringify(fields));
  });

  it('a response with a malformed 8.2.1 field: refused, the client answered 503 (our frame layer upstream; nghttp2 dropped the field)', () => {
    for (const fields of FIELD_RESPONSES) assert.equal(respond(fields).status, 503, JSON.stringify(fields));
  });

  it('a well-formed request and response pass (the control)', async () => {
    const path = '/control';
    const r = send(H2C, [...request(path, H2C), ['x-a', 'v']]);
    assert.equal(r.status, 200, JSON.stringify(r));
    assert.equal(r.reset, null);
    await flushed();
    assert.ok(seenAt(printed, path)[0]?.includes('x-a'));
    assert.equal(respond([[':status', '200'], ['x-a', 'v']]).status, 200);
  });
});
