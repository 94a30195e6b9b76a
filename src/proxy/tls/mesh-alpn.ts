// The ALPN values Istio's sidecars put in their mesh ClientHellos. They say "this is a sidecar's
// mutual TLS" (not the app's own TLS passing through), so an inbound listener in PERMISSIVE mode
// can tell mesh traffic from plaintext and from other TLS on the same port. The inner protocol is
// sniffed after the handshake all the same; these only choose the listener's path.
// `istio-peer-exchange` selects Istio's TCP metadata exchange (src/proxy/tcp/metadata-exchange.ts):
// a frame each way before the application's bytes. As Istio's sidecars, this agent offers it first
// for a connection it carries as TCP (then `istio`), and never for HTTP (an Envoy client does the
// same: its HTTP connections offer `istio-http/*`). As a server it selects it over `istio` when a
// client offers it and `istio-http/*` does not come first in its own order: a client that offers
// an HTTP value is an HTTP client, and gets that.

/** An HTTP connection between sidecars (HTTP/1.0, HTTP/1.1 or HTTP/2 inside). */
export const MESH_ALPN_HTTP: readonly string[] = ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
/** HTTP/2 between sidecars (the proxy's own HTTP/2 upstream sessions). */
export const MESH_ALPN_H2: readonly string[] = ['istio-h2'];
/** Opaque TCP between sidecars: the exchange offered first, as Istio's sidecars do. */
export const MESH_ALPN_TCP: readonly string[] = ['istio-peer-exchange', 'istio'];
/** Opaque TCP from a side that cannot speak the exchange (no metadata of its own to send). */
export const MESH_ALPN_TCP_NO_EXCHANGE: readonly string[] = ['istio'];
/** What the inbound side selects from, in its order (a ClientHello with none of them is not mesh TLS). */
export const MESH_ALPN_SERVER: readonly string[] = ['istio-http/1.1', 'istio-http/1.0', 'istio-h2', 'istio-peer-exchange', 'istio'];
/** The same without the exchange, for an inbound side that cannot speak it. */
export const MESH_ALPN_SERVER_NO_EXCHANGE: readonly string[] = MESH_ALPN_SERVER.filter((p) => p !== 'istio-peer-exchange');

const MESH = new Set(MESH_ALPN_SERVER);

/** Whether a ClientHello's ALPN list marks it as a mesh peer's. */
export function offersMeshAlpn(alpn: readonly string[]): boolean {
  return alpn.some((p) => MESH.has(p));
}
