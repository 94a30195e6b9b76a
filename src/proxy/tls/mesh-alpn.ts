// The ALPN values Istio's sidecars put in their mesh ClientHellos. They say "this is a sidecar's
// mutual TLS" (not the app's own TLS passing through), so an inbound listener in PERMISSIVE mode
// can tell mesh traffic from plaintext and from other TLS on the same port. The inner protocol is
// sniffed after the handshake all the same; these only choose the listener's path.
// Istio's sidecars also offer `istio-peer-exchange` first: an Envoy server that selects it runs the
// TCP metadata exchange on the connection (a header each way before the application's bytes). This
// agent does not speak that exchange, so it never offers it: an Envoy peer then takes `istio` (or an
// `istio-http/*` value) and relays the bytes as they are. Offered by an Envoy client, this side
// selects `istio` over it (MESH_ALPN_SERVER's order).

/** An HTTP connection between sidecars (HTTP/1.0, HTTP/1.1 or HTTP/2 inside). */
export const MESH_ALPN_HTTP: readonly string[] = ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
/** HTTP/2 between sidecars (the proxy's own HTTP/2 upstream sessions). */
export const MESH_ALPN_H2: readonly string[] = ['istio-h2'];
/** Opaque TCP between sidecars. */
export const MESH_ALPN_TCP: readonly string[] = ['istio'];
/** What the inbound side accepts (one of them is chosen in the handshake; a ClientHello with none is not mesh TLS). */
export const MESH_ALPN_SERVER: readonly string[] = ['istio-http/1.1', 'istio-http/1.0', 'istio-h2', 'istio', 'istio-peer-exchange'];

const MESH = new Set(MESH_ALPN_SERVER);

/** Whether a ClientHello's ALPN list marks it as a mesh peer's. */
export function offersMeshAlpn(alpn: readonly string[]): boolean {
  return alpn.some((p) => MESH.has(p));
}
