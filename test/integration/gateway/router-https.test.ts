// `pilot-agent proxy router` serving HTTPS (tls.mode SIMPLE with mounted certificate files), an
// HTTP port that redirects to https (tls.httpsRedirect), host matching across two VirtualServices,
// weights and a direct response.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { mountCredential, startGatewayPod, type GatewayPod, type RequestSpec } from '../../helpers/gateway.js';

const RESOURCES = `apiVersion: networking.mesh.io/v1beta1
kind: Gateway
metadata: {name: public, namespace: edge}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8443, name: https, protocol: HTTPS}
    hosts: ["*.example.com"]
    tls: {mode: SIMPLE, credentialName: example-cert}
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*.example.com"]
    tls: {httpsRedirect: true}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: shop, namespace: edge}
spec:
  hosts: [shop.example.com]
  gateways: [public]
  http:
  - match: [{uri: {exact: /teapot}}]
    directResponse: {status: 418, body: {string: "short and stout"}}
  - route:
    - destination: {host: 127.0.0.1, port: {number: 9080}}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: blog, namespace: edge}
spec:
  hosts: ["*.example.com"]
  gateways: [edge/public]
  http:
  - match: [{method: {exact: GET}}]
    route:
    - destination: {host: 127.0.0.1, port: {number: 9180}}
      weight: 100
    - destination: {host: 127.0.0.1, port: {number: 9080}}
      weight: 0
`;

/** Conditions on the connection: the SNI the client sent, the address and port it connected to. */
const POLICY = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: by-connection, namespace: edge}
spec:
  action: DENY
  rules:
  - to: [{operation: {paths: ["/guarded/sni"]}}]
    when: [{key: connection.sni, values: ["blog.example.com"]}]
  - to: [{operation: {paths: ["/guarded/ip"]}}]
    when: [{key: destination.ip, values: ["127.0.0.2"]}]
  - to: [{operation: {paths: ["/guarded/port"]}}]
    when: [{key: destination.port, values: ["8443"]}]
`;

describe('pilot-agent proxy router: HTTPS, redirect, hosts', () => {
  let pod: GatewayPod;
  const send = (specs: RequestSpec[]) => pod.send(specs);

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'edge.yaml': RESOURCES, 'policy.yaml': POLICY },
      namespace: 'edge',
      apps: { 9080: 'shop', 9180: 'blog' },
      prepare: (p) => mountCredential(p.dir, 'example-cert'),
    });
  });
  after(() => pod?.close());

  it('terminates TLS with the mounted credential and routes by host: the exact host before the wildcard', async () => {
    const [shop, blog, other] = send([
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'shop.example.com' }, servername: 'shop.example.com' },
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'blog.example.com' }, servername: 'blog.example.com' },
      // The client's SNI names a server of the port (node would send the Host as SNI, which no server
      // lists: refused in the handshake, tls.test.ts); the Host is outside every server.
      { url: 'https://127.0.0.1:8443/x', headers: { host: 'elsewhere.org' }, servername: 'shop.example.com' },
    ]);
    assert.equal(shop?.status, 200, pod.output());
    assert.match(shop!.body, /^shop saw /);
    assert.equal(blog?.status, 200);
    assert.match(blog!.body, /^blog saw /, 'weight 100 to the blog, 0 to the shop');
    assert.equal(other?.status, 404, 'a host no server accepts');
    // The access log (stdout, the gateway's default) names the SNI each connection gave.
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.match(pod.output(), /"GET \/x HTTP\/1\.1" 200 .* "blog\.example\.com" "127\.0\.0\.1:9180" outbound\|9180\|\|127\.0\.0\.1 \S+ \S+:8443 \S+ blog\.example\.com /);
    assert.match(pod.output(), /"GET \/x HTTP\/1\.1" 404 NR route_not_found .* "elsewhere\.org" "-" - - \S+:8443 \S+ shop\.example\.com - /);
  });

  it('AuthorizationPolicy sees the connection: connection.sni is the client\'s SNI, destination.ip|port where it connected', () => {
    const shop = { host: 'shop.example.com' };
    const answers = send([
      { url: 'https://127.0.0.1:8443/guarded/sni', headers: shop, servername: 'blog.example.com' },
      { url: 'https://127.0.0.1:8443/guarded/sni', headers: shop, servername: 'BLOG.example.com' },
      { url: 'https://127.0.0.1:8443/guarded/sni', headers: shop, servername: 'shop.example.com' },
      { url: 'https://127.0.0.1:8443/guarded/sni', headers: { host: 'blog.example.com' }, servername: 'shop.example.com' },
      { url: 'https://127.0.0.2:8443/guarded/ip', headers: shop, servername: 'shop.example.com' },
      { url: 'https://127.0.0.1:8443/guarded/ip', headers: shop, servername: 'shop.example.com' },
      { url: 'https://127.0.0.1:8443/guarded/port', headers: shop, servername: 'shop.example.com' },
    ]);
    assert.deepEqual(answers.map((a) => a.status), [
      403, // the SNI the DENY names
      403, // in any case
      200, // another SNI
      200, // the Host is not the SNI
      403, // connected to 127.0.0.2
      200, // to 127.0.0.1
      403, // to port 8443
    ], JSON.stringify(answers.map((a) => a.error ?? a.body)));
  });

  it('a method the rule does not match: 404; a direct response: its status and body', () => {
    const [post, teapot] = send([
      { url: 'https://127.0.0.1:8443/x', method: 'POST', headers: { host: 'blog.example.com' } },
      { url: 'https://127.0.0.1:8443/teapot', headers: { host: 'shop.example.com' } },
    ]);
    assert.equal(post?.status, 404);
    assert.equal(teapot?.status, 418);
    assert.equal(teapot?.body, 'short and stout');
  });

  it('the HTTP port redirects to https (tls.httpsRedirect)', () => {
    const [r] = send([{ url: 'http://127.0.0.1:8080/a?b=c', headers: { host: 'shop.example.com:8080' } }]);
    assert.equal(r?.status, 301);
    assert.equal(r?.headers['location'], 'https://shop.example.com/a?b=c');
  });

  it('/config_dump lists the loaded resources and the gateway listeners', async () => {
    const dump = await pod.ns.runCli(['request', 'GET', '/config_dump']);
    assert.equal(dump.code, 0, dump.stderr);
    const body = JSON.parse(dump.stdout) as { listeners: { name: string }[]; loaded_resources: { kind: string; name: string }[] };
    assert.deepEqual(body.listeners.map((l) => l.name).sort(), ['gateway_8080', 'gateway_8443']);
    assert.deepEqual(body.loaded_resources.map((r) => `${r.kind}/${r.name}`), ['Gateway/public', 'VirtualService/shop', 'VirtualService/blog', 'AuthorizationPolicy/by-connection']);
  });
});
