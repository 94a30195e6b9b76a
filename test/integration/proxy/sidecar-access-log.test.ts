// The sidecar's access log, as in a pod: the pod's rules applied by `pilot-agent mesh-iptables`
// (REDIRECT), the sidecar as uid 1337 in a working directory whose mesh config sets `accessLogFile`
// to a file there, no policy in force. Every HTTP request and every TCP connection, both ways, gets
// Istio's default line with what this proxy knows; a refused upstream is UF.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, PEER_V4, POD_V4, type Namespace, type Pod } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { startSidecarPod, statusFrom, tcpFrom, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';

const APP = join(repoRoot, 'test', 'fixtures', 'echo-app.mjs');

/** The requests of these tests: a user agent and a request id the log lines show. */
const fetchFrom = (ns: Namespace, url: string): number => statusFrom(ns, url, { 'user-agent': 'probe/1', 'x-request-id': 'r-1' });

describe('the sidecar\'s access log (accessLogFile in the mesh config)', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let pod: Pod;
  let file = '';

  /** The line of the log that matches `marker` (waiting at most 5 s for it). */
  async function lineWith(marker: RegExp): Promise<string> {
    for (let i = 0; i < 100; i++) {
      const line = (existsSync(file) ? readFileSync(file, 'utf8') : '').split('\n').find((l) => marker.test(l));
      if (line) return line;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.fail(`no line matching ${marker} in ${existsSync(file) ? readFileSync(file, 'utf8') : '(no file)'}\n${sp.stderr()}`);
  }

  before(async () => {
    sp = await startSidecarPod({
      // The sidecar (uid 1337) creates the file in its working directory.
      files: { 'etc/mesh/config/mesh': 'accessLogFile: ./access.log\n' },
      writable: true,
      prepare: async (p) => {
        await untilFirstOutput(p.peer.start(process.execPath, [APP, PEER_V4, '8080', 'peer']));
        await untilFirstOutput(p.start(process.execPath, [APP, '0.0.0.0', '9080', 'app']));
      },
    });
    pod = sp.pod;
    file = join(sp.dir, 'access.log');
  });
  after(() => sp?.close());

  it('an outbound HTTP request: the original destination, PassthroughCluster, route allow_any', async () => {
    assert.equal(fetchFrom(pod, `http://${PEER_V4}:8080/out?x=1`), 200);
    const line = await lineWith(/"GET \/out\?x=1 /);
    assert.match(line, new RegExp(`^\\[[^\\]]+Z\\] "GET /out\\?x=1 HTTP/1\\.1" 200 - via_upstream - "-" 0 \\d+ \\d+ \\d+ "-" "probe/1" "r-1" `
      + `"${PEER_V4}:8080" "${PEER_V4}:8080" PassthroughCluster ${POD_V4}:\\d+ ${PEER_V4}:8080 ${POD_V4}:\\d+ - allow_any$`));
  });

  it('an inbound HTTP request: from 127.0.0.6 to the app, InboundPassthroughCluster, route default', async () => {
    assert.equal(fetchFrom(pod.peer, `http://${POD_V4}:9080/in`), 200);
    const line = await lineWith(/"GET \/in /);
    assert.match(line, new RegExp(`"GET /in HTTP/1\\.1" 200 - via_upstream - "-" 0 \\d+ \\d+ \\d+ "-" "probe/1" "r-1" `
      + `"${POD_V4}:9080" "${POD_V4}:9080" InboundPassthroughCluster 127\\.0\\.0\\.6:\\d+ ${POD_V4}:9080 ${PEER_V4}:\\d+ - default$`));
  });

  it('an inbound TCP connection: Envoy\'s TCP line, bytes both ways, when it closes', async () => {
    const greeting = 'app-tcp-hello from 127.0.0.6\n';
    assert.equal(tcpFrom(pod.peer, POD_V4, 9081), `${greeting}ping\n`);
    const line = await lineWith(new RegExp(`"- - -" 0 .* "${POD_V4}:9081" `));
    assert.match(line, new RegExp(`"- - -" 0 - - - "-" 5 ${greeting.length + 5} \\d+ - "-" "-" "-" "-" "${POD_V4}:9081" InboundPassthroughCluster `
      + `127\\.0\\.0\\.6:\\d+ ${POD_V4}:9081 ${PEER_V4}:\\d+ - -$`));
  });

  it('an outbound TCP connection, the server speaking first', async () => {
    const greeting = `peer-tcp-hello from ${POD_V4}\n`;
    assert.equal(tcpFrom(pod, PEER_V4, 8081), `${greeting}ping\n`);
    const line = await lineWith(new RegExp(`"- - -" 0 .* "${PEER_V4}:8081" `));
    assert.match(line, new RegExp(`"- - -" 0 - - - "-" 5 ${greeting.length + 5} \\d+ - "-" "-" "-" "-" "${PEER_V4}:8081" PassthroughCluster `
      + `${POD_V4}:\\d+ ${PEER_V4}:8081 ${POD_V4}:\\d+ - -$`));
  });

  it('a refused upstream: UF, for HTTP (503) and for TCP (reset)', async () => {
    assert.equal(fetchFrom(pod, `http://${PEER_V4}:8099/nothing`), 503);
    const http = await lineWith(/"GET \/nothing /);
    assert.match(http, new RegExp(`"GET /nothing HTTP/1\\.1" 503 UF upstream_reset_before_response_started\\{connection_failure,ECONNREFUSED\\} - "-" 0 \\d+ \\d+ - `
      + `"-" "probe/1" "r-1" "${PEER_V4}:8099" "${PEER_V4}:8099" PassthroughCluster - ${PEER_V4}:8099 ${POD_V4}:\\d+ - allow_any$`));
    assert.match(tcpFrom(pod.peer, POD_V4, 9099), /^error|^$/);
    const tcp = await lineWith(new RegExp(`"- - -" 0 UF .*"${POD_V4}:9099" `));
    assert.match(tcp, new RegExp(`"- - -" 0 UF - ECONNREFUSED "-" \\d+ 0 \\d+ - "-" "-" "-" "-" "${POD_V4}:9099" InboundPassthroughCluster - ${POD_V4}:9099 ${PEER_V4}:\\d+ - -$`));
  });

  it('every line whole: one per request or connection, nothing else in the file', async () => {
    const lines = readFileSync(file, 'utf8').split('\n');
    assert.equal(lines.pop(), '', 'ends with a newline');
    for (const l of lines) assert.match(l, /^\[\d{4}-\d\d-\d\dT[^\]]+Z\] "/);
    assert.doesNotMatch(sp.stderr(), /GET \/out/, 'the access log is not the agent\'s log');
  });
});
