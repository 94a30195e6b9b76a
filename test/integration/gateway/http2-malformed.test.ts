// Malformed HTTP/2 messages (RFC 9113 8.1.1) at the ingress gateway's HTTP2 port, from raw frames
// the test writes (test/helpers/h2-malformed-cases.ts): the same classes and outcomes as the
// sidecar's test (test/integration/proxy/http2-malformed.test.ts), through VirtualService routes to
// apps that print what they receive (test/fixtures/h2-malformed.mjs on 127.0.0.1): every class
// (8.2.1 fields included) reset with PROTOCOL_ERROR and never routed, responses from an HTTP/2
// upstream answered 503.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';
import {
  BAD_RESPONSES, blockHex, FIELD_FAULTS, FIELD_RESPONSES, H2_MALFORMED, PROTOCOL_ERROR, REFUSED,
  requestFields, seenAt, type Field, type Sent,
} from '../../helpers/h2-malformed-cases.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { waitFor } from '../../helpers/wait-for.js';

const PORT = 8080;
const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: gw, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${PORT}, name: http2, protocol: HTTP2}
    hosts: ["*"]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: edge, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /h1/}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 7090}}}]
  - match: [{uri: {prefix: /resp/}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 7081}}}]
  - route: [{destination: {host: 127.0.0.1, port: {number: 7080}}}]
`;

describe('malformed HTTP/2 messages at the gateway (HTTP2 port)', { skip: netnsSkip }, () => {
  let pod: GatewayPod;
  let printed = '';

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'gw.yaml': RESOURCES },
      prepare: async (p) => {
        const apps: ChildProcess = await p.start([H2_MALFORMED, 'apps', '127.0.0.1']);
        apps.stdout!.setEncoding('utf8').on('data', (d: string) => { printed += d; });
      },
    });
  });
  after(() => pod?.close());

  const request = (path: string, method?: string): Field[] => requestFields(path, 'gw.example', method);
  const send = async (fields: readonly Field[], data?: string): Promise<Sent> => {
    const r = await pod.exec(process.execPath, [H2_MALFORMED, 'send', '127.0.0.1', String(PORT), blockHex(fields), ...(data === undefined ? [] : [data])]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout.trim()) as Sent;
  };
  let syncs = 0;
  /** Until the apps printed a well-formed request sent after the others (so their earlier lines are in). */
  const flushed = async (): Promise<void> => {
    const path = `/sync/${++syncs}`;
    assert.equal((await send(request(path))).status, 200);
    await waitFor(`the apps to print ${path}`, () => seenAt(printed, path).length > 0 || undefined);
  };

  for (const prefix of ['/h2', '/h1']) {
    it(`8.2.2, 8.3, an upper-case name, routed to ${prefix}: RST_STREAM PROTOCOL_ERROR, the app saw nothing`, async () => {
      for (const [name, malformed] of REFUSED) {
        const path = `${prefix}/refused/${encodeURIComponent(name)}`;
        const r = await send(malformed(request(path)));
        assert.equal(r.reset, PROTOCOL_ERROR, `${name}: ${JSON.stringify(r)}`);
        assert.equal(r.status, null, `${name}: ${JSON.stringify(r)}`);
        await flushed();
        assert.deepEqual(seenAt(printed, path), [], name);
      }
    });

    it(`content-length contradicted by the DATA, routed to ${prefix}: RST_STREAM PROTOCOL_ERROR, the app saw nothing`, async () => {
      for (const cl of ['10', '1']) {
        const path = `${prefix}/length/${cl}`;
        const r = await send([...request(path, 'POST'), ['content-length', cl]], Buffer.from('abcde').toString('hex'));
        assert.equal(r.reset, PROTOCOL_ERROR, JSON.stringify(r));
        await flushed();
        assert.deepEqual(seenAt(printed, path), []);
      }
    });

    it(`8.2.1, routed to ${prefix}: RST_STREAM PROTOCOL_ERROR, never routed (nghttp2 dropped the field and forwarded the rest)`, async () => {
      for (const [name, field] of FIELD_FAULTS) {
        const path = `${prefix}/field/${encodeURIComponent(name)}`;
        const r = await send([...request(path), field, ['x-after', 'kept']]);
        assert.equal(r.reset, PROTOCOL_ERROR, `${name}: ${JSON.stringify(r)}`);
        assert.equal(r.status, null, `${name}: ${JSON.stringify(r)}`);
        await flushed();
        assert.deepEqual(seenAt(printed, path), [], name);
      }
    });
  }

  it('responses from an HTTP/2 upstream: every malformed one answered 503, 8.2.1 fields included (refused by our frame layer)', async () => {
    for (const fields of BAD_RESPONSES) assert.equal((await send(request(`/resp/${blockHex(fields)}`))).status, 503, JSON.stringify(fields));
    for (const fields of FIELD_RESPONSES) assert.equal((await send(request(`/resp/${blockHex(fields)}`))).status, 503, JSON.stringify(fields));
  });
});
