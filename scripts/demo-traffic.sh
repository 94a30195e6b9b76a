#!/usr/bin/env bash
# `make demo`, third part: traffic management, in network namespaces this script makes and removes.
#   pod      198.19.30.2  an app (the demo's clients) with its sidecar (capture rules, `pilot-agent
#                         proxy` as uid 1337, --outlierLogPath), and resources in its working directory
#   backends 198.19.30.11 (v1), .12 (v1), .13 (v2): three endpoints of the service reviews.demo.local,
#                         whose virtual address is 10.96.30.30 (test/fixtures/traffic-backends.mjs,
#                         each answering with its name; its behaviour set by a line on its stdin)
# It shows a canary split (90/10 between the subsets v1 and v2, counted per version over 200 requests
# on keep-alive connections), fault injection (aborts and delays, their FI / DI flags), mirroring (the client's
# answers from v1, copies received by v2), then an endpoint that starts answering 503 being ejected (the EJECT line
# of the outlier log, its health flag in /clusters, the requests that follow going to the others), and
# why one request went where it went (/debug/decisions). Logs: DEMO_TRAFFIC_LOGS, else a directory of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/demo-logs.sh
agent="$PWD/bin/pilot-agent"
backends_js="$PWD/test/fixtures/traffic-backends.mjs"
client_js="$PWD/test/fixtures/traffic-client.mjs"
node=$(command -v node)
id=$$
pod="pa-demo-tpod-$id"
back="pa-demo-tback-$id"
work=$(mktemp -d)
logs_init "${DEMO_TRAFFIC_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/pilot-agent-demo-traffic.XXXXXX")/logs}"
pids=()
step() { printf '\n== %s\n' "$*"; }

cleanup() {
  local status=$?
  exec 7>&-
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$pod" 2>/dev/null || true
  ip netns del "$back" 2>/dev/null || true
  rm -rf "$work"
  logs_on_failure "$status"
}
trap cleanup EXIT

ip netns add "$pod"
ip netns add "$back"
for ns in "$pod" "$back"; do ip -n "$ns" link set lo up; done
ip -n "$pod" link add pod0 type veth peer name back0 netns "$back"
ip -n "$pod" addr add 198.19.30.2/24 dev pod0
for a in 198.19.30.11 198.19.30.12 198.19.30.13; do ip -n "$back" addr add "$a/24" dev back0; done
ip -n "$pod" link set pod0 up
ip -n "$back" link set back0 up
ip -n "$pod" route add default via 198.19.30.11

# The service and its subsets: a canary route, no retries (each 503 is seen), and outlier detection.
mkdir -p "$work/etc/mesh/resources" "$work/etc/mesh/config"
echo 'accessLogFile: ./access.log' > "$work/etc/mesh/config/mesh"
cat > "$work/etc/mesh/resources/reviews.yaml" <<'EOF'
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews.demo.local]
  addresses: [10.96.30.30]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  resolution: STATIC
  location: MESH_INTERNAL
  endpoints:
  - {address: 198.19.30.11, labels: {version: v1}}
  - {address: 198.19.30.12, labels: {version: v1}}
  - {address: 198.19.30.13, labels: {version: v2}}
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews.demo.local
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 3, interval: 1s, baseEjectionTime: 30s, maxEjectionPercent: 50}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews.demo.local]
  http:
  - name: fault-drill
    match: [{headers: {x-demo: {exact: fault}}}]
    fault:
      abort: {httpStatus: 503, percentage: {value: 30}}
      delay: {fixedDelay: 200ms, percentage: {value: 50}}
    route:
    - {destination: {host: reviews.demo.local, subset: v1}}
  - name: mirror-drill
    match: [{headers: {x-demo: {exact: mirror}}}]
    route:
    - {destination: {host: reviews.demo.local, subset: v1}}
    mirror: {host: reviews.demo.local, subset: v2}
  - route:
    - {destination: {host: reviews.demo.local, subset: v1}, weight: 90}
    - {destination: {host: reviews.demo.local, subset: v2}, weight: 10}
    retries: {attempts: 0}
EOF
chmod -R a+rwX "$work"

step "traffic management: reviews.demo.local (10.96.30.30) has endpoints v1 198.19.30.11, v1 198.19.30.12, v2 198.19.30.13"
sed -n '/^kind: VirtualService/,$p' "$work/etc/mesh/resources/reviews.yaml" | sed 's/^/   /'
mkfifo "$work/control"
exec 7<> "$work/control" # held open (read-write: no wait for a reader): the backends read their modes from it
# Not through `start`: a background command's stdin is /dev/null unless redirected on the command itself.
ip netns exec "$back" "$node" "$backends_js" \
  '[{"name":"v1-a","address":"198.19.30.11"},{"name":"v1-b","address":"198.19.30.12"},{"name":"v2","address":"198.19.30.13"}]' \
  < "$work/control" >> "$(log_of backends)" 2>&1 &
pids+=($!)
quiet pod-init ip netns exec "$pod" "$agent" mesh-iptables -i '*' -b '*' -d 15020,15021,15090
start sidecar ip netns exec "$pod" setpriv --reuid=1337 --regid=1337 --clear-groups -- \
  env -C "$work" POD_NAMESPACE=default "$node" "$agent" proxy --outlierLogPath ./outlier.log --log_target stderr
quiet sidecar ip netns exec "$pod" "$agent" wait --periodMillis 100 --timeoutSeconds 15
for _ in $(seq 50); do grep -q listening "$(log_of backends)" && break; sleep 0.1; done
echo "   the sidecar is ready; logs: $(log_of sidecar), $(log_of backends)"

# Requests from the pod: N requests on C keep-alive connections (then JSON fields to add, e.g. headers);
# prints "status backend" per request.
requests() {
  ip netns exec "$pod" "$node" "$client_js" http "{\"url\":\"http://10.96.30.30/\",\"count\":$1,\"concurrency\":$2${3:+,$3}}" |
    "$node" -e "let t=''; process.stdin.on('data', (d) => t += d).on('end', () => { for (const a of JSON.parse(t)) console.log(a.status, a.backend ?? '-'); })"
}
counts() { sort | uniq -c | sort -rn | sed 's/^ */   /'; }

step "a canary split, 90/10 between the subsets: 200 requests on 4 keep-alive connections, counted per endpoint"
requests 200 4 > "$work/split"
counts < "$work/split"
awk '$1 == 200 { n++; if ($2 ~ /^v2/) v2++; else v1++ } END { printf "   per version: v1 %d (%.1f%%), v2 %d (%.1f%%)\n", v1, 100 * v1 / n, v2, 100 * v2 / n }' "$work/split"

step "fault injection: 100 requests with x-demo: fault (the rule fault-drill aborts 30% with 503, delays 50% by 200 ms)"
requests 100 4 '"headers":{"x-demo":"fault"}' | counts
sleep 1 # the access log is written as each request ends
awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[A-Z]+(,[A-Z]+)*$/) { if ($i ~ /(^|,)FI(,|$)/) fi++; if ($i ~ /(^|,)DI(,|$)/) di++ } } END { printf "   the access log: %d requests with flag FI (aborted, never sent), %d with DI (delayed 200 ms first)\n", fi, di }' "$work/access.log"

step "mirroring: 20 requests to /mirrored with x-demo: mirror (the rule mirror-drill routes to v1 and copies each request to v2)"
echo "   what the client got:"
requests 20 2 '"headers":{"x-demo":"mirror"},"url":"http://10.96.30.30/mirrored"' | counts
sleep 0.5 # the copies are fire and forget: their requests reach v2 just after
echo "   what each backend received on /mirrored (its request log): the copies went to v2, whose answers were dropped"
grep '"path":"/mirrored"' "$(log_of backends)" | sed 's/.*"backend":"\([^"]*\)".*/\1/' | counts

step "v1-a (198.19.30.11) starts answering 503: outlier detection ejects it after 3 in a row"
printf '%s\n' '{"name":"v1-a","mode":"503","id":1}' >&7
for _ in $(seq 50); do grep -q '"ack":1' "$(log_of backends)" && break; sleep 0.1; done
requests 60 2 | counts
for _ in $(seq 50); do [ -s "$work/outlier.log" ] && break; sleep 0.1; done
echo "   the outlier log (--outlierLogPath):"
sed 's/^/   /' "$work/outlier.log"
echo "   pilot-agent request GET /clusters (health flags):"
ip netns exec "$pod" "$agent" request GET clusters | grep 'health_flags' | grep 'outbound|80|v1|' | sed 's/^/   /'

step "the next 100 requests: the ejected endpoint gets none"
requests 100 2 | counts

step "why one request went where it went: pilot-agent request GET /debug/decisions (the last one)"
ip netns exec "$pod" "$agent" request GET '/debug/decisions?limit=1' | "$node" -e "let t=''; process.stdin.on('data', (d) => t += d).on('end', () => {
  for (const d of JSON.parse(t).decisions) console.log('  ', d.status, d.cluster, '->', d.upstream, '|', (d.attempts ?? ['one attempt']).join(' | ')); })"
