#!/usr/bin/env bash
# `make demo`, second part: mutual TLS between sidecars, in network namespaces this script makes and
# removes. A node namespace holds a bridge (198.20.0.1/24) and a small CA that speaks Istio's CA API
# (test/fixtures/test-ca.mjs); on the bridge:
#   sleep   198.20.0.2  a meshed pod (service account sleep): its app calls httpbin
#   httpbin 198.20.0.3  a meshed pod (httpbin): PeerAuthentication STRICT, an AuthorizationPolicy
#                       that lets only cluster.local/ns/default/sa/sleep in
#   other   198.20.0.4  a meshed pod of another service account
#   legacy  198.20.0.5  no sidecar: a plaintext client
# Each sidecar asks the CA for its certificate (CA_ADDR, the token and root files as Istio's injector
# mounts them). The demo shows the TLS on the wire (tcpdump on httpbin's link), the STRICT refusal of
# the plaintext client, the principal policy allowing sleep and denying other (HTTP/1.1 and a gRPC
# call, HTTP/2 at layer 7 inside the mutual TLS), and the counters. The processes' output goes to log
# files (scripts/demo-logs.sh) in DEMO_MESH_LOGS (scripts/demo.sh sets it), else in a directory of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/demo-logs.sh
agent="$PWD/bin/pilot-agent"
app="$PWD/test/fixtures/echo-app.mjs"
h2apps="$PWD/test/fixtures/h2-apps.mjs"
h2clients="$PWD/test/fixtures/h2-clients.mjs"
node=$(command -v node)
id=$$
nodens="pa-mesh-node-$id"
work=$(mktemp -d)
logs_init "${DEMO_MESH_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/pilot-agent-demo-mesh.XXXXXX")/logs}"
pids=()
namespaces=("$nodens")
step() { printf '\n== %s\n' "$*"; }

cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
  logs_on_failure "$status"
}
trap cleanup EXIT

ip netns add "$nodens"
ip -n "$nodens" link set lo up
ip -n "$nodens" link add br0 type bridge
ip -n "$nodens" addr add 198.20.0.1/24 dev br0
ip -n "$nodens" link set br0 up

# pod NAME N: a namespace on the bridge at 198.20.0.N, eth0 in the pod, "vN" in the node.
pod() {
  local ns="pa-mesh-$1-$id"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip -n "$ns" link set lo up
  ip -n "$ns" link add eth0 type veth peer name "v$2" netns "$nodens"
  ip -n "$ns" addr add "198.20.0.$2/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via 198.20.0.1
  ip -n "$nodens" link set "v$2" master br0
  ip -n "$nodens" link set "v$2" up
}
in_ns() { local ns="pa-mesh-$1-$id"; shift; ip netns exec "$ns" "$@"; }

step "a CA on the node that speaks Istio's CA API (gRPC, CreateCertificate)"
start ca ip netns exec "$nodens" "$node" test/fixtures/test-ca.mjs --listen 198.20.0.1:15012 --root-out "$work/root-cert.pem" --token demo-token
for _ in $(seq 50); do [ -s "$work/root-cert.pem" ] && break; sleep 0.1; done
echo "   its log: $(log_of ca)"

# meshed NAME N SA RESOURCES: a pod with its init rules and its sidecar (uid 1337), certificates from the CA.
meshed() {
  local dir="$work/$1"
  pod "$1" "$2"
  mkdir -p "$dir/etc/mesh/resources" "$dir/etc/mesh/pod" "$dir/var/run/secrets/tokens" "$dir/var/run/secrets/istio"
  echo "app=\"$1\"" > "$dir/etc/mesh/pod/labels"
  printf '%s' "$4" > "$dir/etc/mesh/resources/mesh.yaml"
  echo demo-token > "$dir/var/run/secrets/tokens/istio-token"
  cp "$work/root-cert.pem" "$dir/var/run/secrets/istio/root-cert.pem"
  chmod -R a+rX "$work"
  quiet "$1-init" in_ns "$1" "$agent" mesh-iptables -i '*' -b '*' -d 15020,15021,15090
  # The sidecar reads ./etc/... and ./var/run/... from its working directory.
  start "$1-sidecar" env -C "$dir" POD_NAMESPACE=default SERVICE_ACCOUNT="$3" CA_ADDR=198.20.0.1:15012 \
    ip netns exec "pa-mesh-$1-$id" setpriv --reuid=1337 --regid=1337 --clear-groups -- "$node" "$agent" proxy --log_target stderr
}

mesh_to_httpbin='apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: httpbin, namespace: default}
spec:
  hosts: [httpbin.default.svc.cluster.local]
  addresses: [198.20.0.3]
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 7070, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: 198.20.0.3}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: httpbin, namespace: default}
spec:
  host: httpbin.default.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
'
httpbin_policies='apiVersion: security.mesh.io/v1
kind: PeerAuthentication
metadata: {name: httpbin, namespace: default}
spec:
  selector: {matchLabels: {app: httpbin}}
  mtls: {mode: STRICT}
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: only-sleep, namespace: default}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: ALLOW
  rules:
  - from: [{source: {principals: ["cluster.local/ns/default/sa/sleep"]}}]
'

step "three meshed pods (sleep, httpbin, other) and a plaintext one (legacy); each sidecar gets its identity from the CA"
pod legacy 5
meshed httpbin 3 httpbin "$httpbin_policies"
start httpbin-app ip netns exec "pa-mesh-httpbin-$id" "$node" "$app" 0.0.0.0 8080 httpbin
start httpbin-grpc-app ip netns exec "pa-mesh-httpbin-$id" "$node" "$h2apps" 0.0.0.0 httpbin # gRPC on 7070
meshed sleep 2 sleep "$mesh_to_httpbin"
meshed other 4 other "$mesh_to_httpbin"
for p in httpbin sleep other; do quiet "$p-sidecar" in_ns "$p" "$agent" wait --periodMillis 100 --timeoutSeconds 20; done
echo "   ready; the sidecars' logs: $(log_of '{httpbin,sleep,other}-sidecar')"
for p in sleep httpbin; do
  printf '   %-8s ' "$p"
  in_ns "$p" "$agent" request GET certs | "$node" -e "let t = ''; process.stdin.on('data', (d) => t += d).on('end', () => {
    const c = JSON.parse(t); const leaf = c.certificates[0].cert_chain[0]; console.log(c.identity, 'serial', leaf.serial_number, 'until', leaf.expiration_time); })"
done

get() { "$node" -e "fetch(process.argv[1]).then(async (r) => console.log(r.status, (await r.text()).trim()), (e) => console.log('failed:', e.cause?.code ?? e.message))" "$1"; }

step "sleep -> httpbin over mutual TLS, while tcpdump watches httpbin's link"
start tcpdump ip netns exec "$nodens" tcpdump -i v3 -n --immediate-mode -U -s 0 -w "$work/wire.pcap" tcp
sleep 1
in_ns sleep "$node" -e "fetch('http://198.20.0.3:8080/headers').then(async (r) => { const h = (await r.json()).headers; console.log('   ', r.status, 'x-forwarded-client-cert:', h['x-forwarded-client-cert']); })"
sleep 0.5
kill -INT "${pids[-1]}" 2>/dev/null || true; sleep 0.5
packets=$(tcpdump -r "$work/wire.pcap" -n 2>/dev/null | wc -l)
plain=$(tcpdump -r "$work/wire.pcap" -n -A 2>/dev/null | grep -c 'GET /headers' || true)
alpn=$(grep -c 'istio-http/1.1' "$work/wire.pcap" || true)
echo "    captured $packets packets; ClientHello with ALPN istio-http/1.1: $([ "$alpn" -gt 0 ] && echo yes || echo no); plaintext 'GET /headers' on the wire: $plain"

step "legacy (no sidecar) -> httpbin in plaintext: STRICT resets it"
printf '    '; in_ns legacy bash -c "$(declare -f get); node=$node; get http://198.20.0.3:8080/"
step "other (meshed, service account other) -> httpbin: mutual TLS works, the principal policy denies it"
printf '    '; in_ns other bash -c "$(declare -f get); node=$node; get http://198.20.0.3:8080/"
step "sleep -> httpbin: allowed"
printf '    '; in_ns sleep bash -c "$(declare -f get); node=$node; get http://198.20.0.3:8080/hello"

# grpc NAME: a gRPC call (grpc-js, h2c from the app) from pod NAME to httpbin's gRPC port; prints its status.
grpc() {
  in_ns "$1" "$node" "$h2clients" grpc 198.20.0.3:7070 '[{"method":"Ping","text":"hello over HTTP/2"}]' | "$node" -e "let t = '';
    process.stdin.on('data', (d) => t += d).on('end', () => { const [r] = JSON.parse(t); console.log('    grpc status', r.code, r.code === 0 ? r.texts[0] : r.details); })"
}
step "sleep -> httpbin, a gRPC call: HTTP/2 judged per call inside the mutual TLS"
grpc sleep
step "other -> httpbin, the same gRPC call: the principal policy denies it (PERMISSION_DENIED = 7)"
grpc other

step "httpbin's sidecar: pilot-agent request GET /stats (mTLS, policy, HTTP/2 and gRPC counters)"
in_ns httpbin "$agent" request GET stats | grep -E '15006\.mtls\.|http\.inbound\.(downstream_rq_(2|4)xx|downstream_rq_http2_total|grpc\.)' | sed 's/^/    /'
