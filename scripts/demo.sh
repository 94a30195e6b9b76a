#!/usr/bin/env bash
# `make demo`: a pod with a sidecar, for real, in network namespaces this script makes and removes.
# pod (198.19.0.2): an app on :9080 (HTTP) / :9081 (TCP), capture rules from `pilot-agent mesh-iptables`,
#                   the sidecar `pilot-agent proxy` as uid 1337;
# peer (198.19.0.1): a service on :8080 (HTTP) / :8081 (TCP).
# gateway (198.19.1.1, joined to the pod by a second veth): the ingress gateway `pilot-agent proxy
#                   router`, routing by the claims of Istio's sample JWTs to the app (198.19.1.2).
# The app talks out to the peer and the peer talks in to the app, over HTTP and raw TCP; then the
# sidecar's own counters (`pilot-agent request GET /stats`) show what went through it. Then a client
# calls the gateway with no token, a bad token and the two sample tokens, with and without a policy
# that requires one, and `pilot-agent request GET /debug/decisions` shows why each got its answer.
# Then scripts/demo-mesh.sh: mutual TLS between meshed pods (identity from a CA, STRICT, principals);
# last, scripts/demo-traffic.sh: traffic management (a canary split, an ejection, a decision explained).
# What the agents and apps print goes to log files under the demo's directory (scripts/demo-logs.sh):
# named as each starts, kept at the end, their ends printed if the demo fails.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway-resources.sh
. scripts/demo-logs.sh
agent="$PWD/bin/pilot-agent"
app="$PWD/test/fixtures/echo-app.mjs"
node=$(command -v node)
id=$$
pod="pa-demo-pod-$id"
peer="pa-demo-peer-$id"
gw="pa-demo-gw-$id"
demo=$(mktemp -d "${TMPDIR:-/tmp}/pilot-agent-demo.XXXXXX")
gwdir="$demo/gateway"
logs_init "$demo/logs"
pids=()
step() { printf '\n== %s\n' "$*"; }

cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true # before their files go
  ip netns del "$pod" 2>/dev/null || true
  ip netns del "$peer" 2>/dev/null || true
  ip netns del "$gw" 2>/dev/null || true
  rm -rf "$gwdir"
  logs_on_failure "$status"
}
trap cleanup EXIT

if [ "$(id -u)" -ne 0 ] || ! ip netns add "$pod" 2>/dev/null; then
  echo "make demo needs root (it makes network namespaces): run it as root" >&2
  exit 1
fi
ip netns add "$peer"
ip netns add "$gw"
for ns in "$pod" "$peer" "$gw"; do ip -n "$ns" link set lo up; done
veth() { # ns ifname addr peer-ns peer-ifname peer-addr: a veth pair, both ends up
  ip -n "$1" link add "$2" type veth peer name "$5" netns "$4"
  ip -n "$1" addr add "$3/24" dev "$2"
  ip -n "$4" addr add "$6/24" dev "$5"
  ip -n "$1" link set "$2" up
  ip -n "$4" link set "$5" up
}
veth "$pod" pod0 198.19.0.2 "$peer" peer0 198.19.0.1
veth "$pod" pod1 198.19.1.2 "$gw" gw0 198.19.1.1
ip -n "$pod" route add default via 198.19.0.1

in_pod() { ip netns exec "$pod" "$@"; }
in_peer() { ip netns exec "$peer" "$@"; }
http_get() { "$node" -e "fetch(process.argv[1]).then(async (r) => process.stdout.write(r.status + ' ' + await r.text()), (e) => console.log('failed:', e.cause?.code ?? e.message))" "$1"; }
tcp_ping() { "$node" -e "const s=require('net').connect(+process.argv[2], process.argv[1], () => s.end('ping\n')); s.pipe(process.stdout); s.on('error', (e) => console.log('failed:', e.code))" "$1" "$2"; }
# `ip netns exec` execs its command, so $! (in `start`) is the process itself (ended by PID on exit).

step "init container: pilot-agent mesh-iptables -i '*' -b '*' -d 15020,15021,15090 (explained, then applied)"
in_pod "$agent" mesh-iptables -i '*' -b '*' -d 15020,15021,15090 --dry-run | sed -n '/^# Families/,/^#$/p'
quiet pod-init in_pod "$agent" mesh-iptables -i '*' -b '*' -d 15020,15021,15090
echo "   $(grep -o 'mesh rules applied (.*)' "$(log_of pod-init)" | tail -n 1); log: $(log_of pod-init)"

step "the peer service and the app"
start peer ip netns exec "$peer" "$node" "$app" 198.19.0.1 8080 peer
start app ip netns exec "$pod" "$node" "$app" 0.0.0.0 9080 app
echo "   logs: $(log_of peer), $(log_of app)"

step "the sidecar: pilot-agent proxy, as uid 1337; pilot-agent wait"
start sidecar ip netns exec "$pod" setpriv --reuid=1337 --regid=1337 --clear-groups -- "$node" "$agent" proxy --log_target stderr
quiet sidecar in_pod "$agent" wait --periodMillis 100 --timeoutSeconds 15
echo "   ready; its log: $(log_of sidecar)"

step "app -> peer, HTTP (captured, through 15001)"
in_pod bash -c "$(declare -f http_get); node=$node; http_get http://198.19.0.1:8080/hello"
step "app -> peer, raw TCP (the server speaks first)"
in_pod bash -c "$(declare -f tcp_ping); node=$node; tcp_ping 198.19.0.1 8081"
step "peer -> app, HTTP (captured, through 15006; the app sees 127.0.0.6)"
in_peer bash -c "$(declare -f http_get); node=$node; http_get http://198.19.0.2:9080/in"
step "peer -> app, raw TCP"
in_peer bash -c "$(declare -f tcp_ping); node=$node; tcp_ping 198.19.0.2 9081"
step "app -> peer on a closed port: the sidecar answers 503"
in_pod bash -c "$(declare -f http_get); node=$node; http_get http://198.19.0.1:8099/closed"

step "what went through the sidecar: pilot-agent request GET /stats"
in_pod "$agent" request GET stats | grep -E '^(http\.(out|in)bound\.downstream_rq_(total|[2-5]xx)|listener\..*downstream_cx_total|cluster\..*upstream_cx_(total|connect_fail)|server\.(live|state))' || true

step "the ingress gateway: pilot-agent proxy router, with a Gateway, a VirtualService routing on the groups claim, a RequestAuthentication"
jwt="$PWD/test/fixtures/jwt"
mkdir -p "$gwdir/etc/mesh/resources" "$gwdir/etc/mesh/pod"
echo 'mesh="ingressgateway"' > "$gwdir/etc/mesh/pod/labels"
gateway_resources 8080 /headers 198.19.1.2 9080 'jwksUri: http://127.0.0.1:9999/jwks.json' > "$gwdir/etc/mesh/resources/gateway.yaml"
sed -n '/^---$/!p' "$gwdir/etc/mesh/resources/gateway.yaml" | grep -E '^(kind|  - match|    - uri|        "@request|    - destination|    jwksUri)' | sed 's/^/   /'
in_gw() { ip netns exec "$gw" "$@"; }
start jwks ip netns exec "$gw" "$node" -e "require('http').createServer((q, r) => r.end(require('fs').readFileSync('$jwt/jwks.json'))).listen(9999, '127.0.0.1')"
cd "$gwdir"  # the gateway reads ./etc/mesh/... from its working directory
start gateway env POD_NAMESPACE=mesh-system FILE_DEBOUNCE_DURATION=50ms ip netns exec "$gw" "$node" "$agent" proxy router --log_target stderr
cd - > /dev/null
quiet gateway in_gw "$agent" wait --periodMillis 100 --timeoutSeconds 15
echo "   ready; its log: $(log_of gateway)"
call() {
  local label=$1; shift
  printf '   %-46s -> ' "$label"
  in_gw "$node" -e "fetch('http://127.0.0.1:8080/headers', { headers: process.argv[1] ? { authorization: 'Bearer ' + process.argv[1] } : {} })
    .then(async (r) => { const b = await r.text(); console.log(r.status, r.status === 200 ? 'routed to ' + JSON.parse(b).app : b.trim()); }, (e) => console.log('failed:', e.message))" "${1:-}"
}
call "no token"
call "a token that does not verify" "$(sed 's/.$/x/' "$jwt/groups-scope.jwt")"
call "demo.jwt (no groups claim)" "$(cat "$jwt/demo.jwt")"
call "groups-scope.jwt (groups: [group1, group2])" "$(cat "$jwt/groups-scope.jwt")"

step "add an AuthorizationPolicy denying requests without a principal (hot reload, no restart)"
cat > "$gwdir/etc/mesh/resources/require-jwt.yaml" <<EOF
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules:
  - from:
    - source: {notRequestPrincipals: ["*"]}
EOF
sleep 0.5
call "no token"
call "groups-scope.jwt" "$(cat "$jwt/groups-scope.jwt")"

step "why: pilot-agent request GET /debug/decisions (last 3)"
in_gw "$agent" request GET '/debug/decisions?limit=3' | "$node" -e "let t = ''; process.stdin.on('data', (d) => t += d).on('end', () => {
  for (const d of JSON.parse(t).decisions) console.log('  ', d.status, 'jwt=' + d.jwt, '|', d.authz, '|', d.route ?? '-'); })"

DEMO_MESH_LOGS="$demo_logs/mesh" scripts/demo-mesh.sh
DEMO_TRAFFIC_LOGS="$demo_logs/traffic" scripts/demo-traffic.sh

step "done: the namespaces and processes are removed; the logs stay in $demo_logs"
