# Sourced by the demo and the gateway bench. `gateway_resources PORT PREFIX HOST HOST_PORT KEYS`
# prints the mesh resources of an ingress gateway: a Gateway (HTTP on PORT, every host), a
# VirtualService sending requests under PREFIX whose JWT has `groups` containing group1 to
# HOST:HOST_PORT, and a RequestAuthentication for Istio's sample issuer whose keys line is KEYS
# (`jwksUri: http://...` or `jwks: '<inline JSON>'`).
gateway_resources() {
  cat <<EOF
apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: ingressgateway, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: $1, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: app, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [ingressgateway]
  http:
  - match:
    - uri: {prefix: $2}
      headers:
        "@request.auth.claims.groups": {exact: group1}
    route:
    - destination: {host: $3, port: {number: $4}}
---
apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  jwtRules:
  - issuer: testing@secure.istio.io
    $5
EOF
}
