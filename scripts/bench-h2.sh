#!/usr/bin/env bash
# `make bench`, HTTP/2 and gRPC: h2load (h2c with prior knowledge, one thread, -c8 -m16: 8
# connections of 16 concurrent streams) from a pod to an HTTP/2 service, in one run, two workloads:
#   http : GET of the 1 KiB file (as bench-proxy);
#   grpc : a unary gRPC call: POST /bench.Echo/Ping, content-type application/grpc, te: trailers, a
#          length-prefixed protobuf message; the answer is one message and grpc-status 0 in trailers;
# each three ways:
#   direct  : from a pod namespace with no capture rules, straight to the service;
#   haproxy : the same namespace, through haproxy (nbthread 1) speaking HTTP/2 on both sides
#             (bind ... proto h2, server ... proto h2). nginx cannot be the peer: it proxies HTTP/2
#             upstream only as grpc_pass;
#   nghttpx : the same namespace, through nghttpx (Debian's nghttp2-proxy: nghttp2's own proxy, the
#             library node:http2 is built on), one process, one thread, h2c both sides: the second peer;
#   floor   : the same namespace, through scripts/h2-floor-relay.mjs: the HTTP/2 frame layer of our
#             own (src/proxy/http2/codec/) relaying each stream to one upstream connection, with no
#             routing or policy: the floor of a Node proxy on that layer, next to the sidecar's;
#   nodefloor: the same relay on node:http2 (scripts/h2-node-floor-relay.mjs): node:http2's own floor,
#             what the sidecar's HTTP/2 path cannot go below while it runs on node:http2;
#   sidecar : from a pod namespace with the capture rules and `pilot-agent proxy` (uid 1337): the
#             connection to the service is captured to 15001. Whether the sidecar relays HTTP/2 as
#             opaque TCP or proxies it at layer 7, this measures it; its counters say which.
# The service is nginx (one worker, `listen 8080 http2`): C, faster than either proxy, the same for
# every path. For gRPC it answers from a static file (a real response: headers, one message, the
# grpc-status trailer) rather than from a @grpc/grpc-js server: on one core that tops out near 20k
# calls/s, below the proxies, so every path would measure the server and no ratio the proxy. That the
# answer is real gRPC is checked: before measuring, a @grpc/grpc-js client makes one call by each path
# (status OK and the expected reply, so the trailers got through); direct must pass, the proxies'
# outcome is reported. Latency: h2load prints only min/max/mean/sd, so p50/p99 come from its
# --log-file (record_h2load). Rounds, medians and pinning as in bench-proxy: the setups run
# interleaved, each figure is the median of the rounds, each ratio the median of per-round ratios;
# with 2+ CPUs the proxy under test gets CPU 1, the load side (h2load, the service) CPU 0.
# With PILOT_AGENT_BASELINE (another built checkout, see bench-lib.sh), a second captured pod runs the
# baseline's sidecar: a path of its own (sidecar@base), run after the new sidecar's in every round; the
# end of the output compares the two builds (CPU per request, each round's, throughput and p99).
#
# Topology (made here, removed on exit, failure or Ctrl-C; processes ended by their own PIDs):
#   plain pod 198.19.8.2 --veth-- 198.19.8.1 service 198.19.7.1 --veth-- 198.19.7.2 captured pod
#                                            service 198.19.10.1 --veth-- 198.19.10.2 baseline pod
#
#   scripts/bench-h2.sh             (needs root; without it, says so and exits 0)
# Environment: PILOT_AGENT_BIN (default bin/pilot-agent; another tree's bin/ works),
# PILOT_AGENT_BASELINE (a built checkout to compare with; none by default), BENCH_ROUNDS (3),
# BENCH_DURATION (s measured per run, 5), BENCH_WARMUP (s before it, same connections, 1),
# BENCH_CONNECTIONS (8), BENCH_STREAMS (concurrent streams per connection, 16), BENCH_PIN (1; 0 = no
# CPU pinning), BENCH_CONCURRENCY (the sidecar's --concurrency, 1), BENCH_SIDECAR_NODE_ARGS (node flags).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
grpc_js=$PWD/node_modules/@grpc/grpc-js
conns=${BENCH_CONNECTIONS:-8}
streams=${BENCH_STREAMS:-16}

bench_preamble bench-h2
[ -d "$grpc_js" ] || { echo "bench-h2: no $grpc_js (run make build)" >&2; exit 1; }
pod="pa-bench-h2-pod-$$"     # captured: rules + sidecar
plain="pa-bench-h2-plain-$$" # no rules: direct and haproxy
peer="pa-bench-h2-peer-$$"   # the service
base_pod="pa-bench-h2-bpod-$$" # with a baseline: captured, its sidecar
namespaces=("$pod" "$plain" "$peer")
if [ ${#builds[@]} -gt 1 ]; then namespaces+=("$base_pod"); fi
bench_setup bench-h2 "${namespaces[@]}"
veth_link "$pod" pod0 198.19.7.2 "$peer" peer0 198.19.7.1
veth_link "$plain" plain0 198.19.8.2 "$peer" peer1 198.19.8.1
if [ ${#builds[@]} -gt 1 ]; then veth_link "$base_pod" pod0 198.19.10.2 "$peer" peer2 198.19.10.1; fi

# ---- the service: nginx, h2c on 8080; GET /1k.html, and POST /bench.Echo/Ping answered from
# www/ping.grpc. nginx's static module refuses POST, hence `return 418` and an error_page that
# serves the file as a GET with status 200 (and the trailer). gRPC messages: flag 0, 4-byte length,
# then protobuf field 1 (a string): "ping" asked, "pong" answered.
mkdir -p "$work/www" "$work/service"
head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k.html"
printf '\x00\x00\x00\x00\x06\x0a\x04ping' > "$work/ping.req"
printf '\x00\x00\x00\x00\x06\x0a\x04pong' > "$work/www/ping.grpc"
nginx_static_conf "$work/service" "8080 http2" '
    location = /bench.Echo/Ping { error_page 418 =200 /ping.grpc; return 418; }
    location = /ping.grpc { internal; default_type application/grpc; add_trailer grpc-status 0 always; }'
start_nginx "$peer" "$work/service" ${pin_load[@]+"${pin_load[@]}"}

# ---- the peer proxy: haproxy, one thread, HTTP/2 both sides (maxconn within this host's FD limit)
cat > "$work/haproxy.cfg" <<'EOF'
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 300s
  timeout server 300s
frontend h2
  bind 127.0.0.1:8000 proto h2
  default_backend service
backend service
  server nginx 198.19.8.1:8080 proto h2
EOF
# -db: in the foreground, one process (ip netns exec and taskset exec in turn: $! is haproxy).
ip netns exec "$plain" ${pin_proxy[@]+"${pin_proxy[@]}"} haproxy -db -f "$work/haproxy.cfg" > "$work/haproxy.log" 2>&1 &
haproxy=$!
pids+=("$haproxy")
# ---- the second peer: nghttpx, one process and one thread (its PID is the one measured), h2c both
# sides, no Via (haproxy adds nothing either), its default stream limit (100) above -m.
ip netns exec "$plain" ${pin_proxy[@]+"${pin_proxy[@]}"} nghttpx --conf=/dev/null --single-process --single-thread --workers=1 \
  --frontend='127.0.0.1,8001;no-tls' --backend='198.19.8.1,8080;;proto=h2' --no-via --no-ocsp \
  --errorlog-file="$work/nghttpx.log" > "$work/nghttpx.out" 2>&1 &
nghttpx=$!
pids+=("$nghttpx")
# ---- the floor of our own frame layer: scripts/h2-floor-relay.mjs (src/proxy/http2/codec/, no
# policy, no routing): what the sidecar could cost per request once its HTTP/2 path runs on it.
ip netns exec "$plain" ${pin_proxy[@]+"${pin_proxy[@]}"} "$node" scripts/h2-floor-relay.mjs 127.0.0.1:8002 198.19.8.1:8080 > "$work/floor.log" 2>&1 &
floor=$!
pids+=("$floor")
# ... and node:http2's: scripts/h2-node-floor-relay.mjs, the same relay on node:http2 (what the sidecar runs on).
ip netns exec "$plain" ${pin_proxy[@]+"${pin_proxy[@]}"} "$node" scripts/h2-node-floor-relay.mjs 127.0.0.1:8003 198.19.8.1:8080 > "$work/node-floor.log" 2>&1 &
nodefloor=$!
pids+=("$nodefloor")
wait_port "$peer" 198.19.7.1 8080
wait_port "$plain" 127.0.0.1 8000
wait_port "$plain" 127.0.0.1 8001
wait_port "$plain" 127.0.0.1 8002
wait_port "$plain" 127.0.0.1 8003

start_sidecar "$pod" "$work/sidecar.log"
sidecar=$started

# ---- the gRPC check: one unary call by a real client, by each path
cat > "$work/grpc-call.cjs" <<'EOF'
// GRPC_JS ADDR: one unary call of /bench.Echo/Ping at ADDR with @grpc/grpc-js (GRPC_JS: the package's
// directory); prints "ok" or why not.
const [grpcJs, addr] = process.argv.slice(2);
const grpc = require(grpcJs);
const bytes = (b) => b;
const client = new grpc.Client(addr, grpc.credentials.createInsecure());
const options = { deadline: Date.now() + 5000 };
client.makeUnaryRequest('/bench.Echo/Ping', bytes, bytes, Buffer.from('\n\x04ping'), new grpc.Metadata(), options, (err, reply) => {
  if (err) console.log(`${grpc.status[err.code]}: ${err.details}`);
  else console.log(reply.toString() === '\n\x04pong' ? 'ok' : `unexpected reply ${reply.toString('hex')}`);
  client.close();
});
EOF
declare -A ns_of=([direct]=$plain [haproxy]=$plain [nghttpx]=$plain [floor]=$plain [nodefloor]=$plain [sidecar]=$pod)
declare -A addr_of=([direct]=198.19.8.1:8080 [haproxy]=127.0.0.1:8000 [nghttpx]=127.0.0.1:8001 [floor]=127.0.0.1:8002 [nodefloor]=127.0.0.1:8003 [sidecar]=198.19.7.1:8080)
declare -A proxy_of=([haproxy]=$haproxy [nghttpx]=$nghttpx [floor]=$floor [nodefloor]=$nodefloor [sidecar]=$sidecar)
if [ ${#builds[@]} -gt 1 ]; then
  as_build base start_sidecar "$base_pod" "$work/sidecar-base.log"
  ns_of[sidecar@base]=$base_pod addr_of[sidecar@base]=198.19.10.1:8080 proxy_of[sidecar@base]=$started
fi
declare -A grpc_check
# shellcheck disable=SC2207 # path names have no spaces
paths=(direct haproxy nghttpx floor nodefloor $(and_baseline sidecar))
for p in "${paths[@]}"; do
  grpc_check[$p]=$(ip netns exec "${ns_of[$p]}" "$node" "$work/grpc-call.cjs" "$grpc_js" "${addr_of[$p]}" 2>&1 | tail -1)
done
if [ "${grpc_check[direct]}" != ok ]; then
  echo "bench-h2: the gRPC call straight to the service failed (${grpc_check[direct]}): the bench is broken" >&2
  exit 1
fi

# ---- measurements: setups are WORKLOAD-PATH
declare -A rps p50 p99 errs sent cpu_ticks sys_ticks cpu_ns ratios
workloads=(http grpc)
setups=()
for w in "${workloads[@]}"; do for p in "${paths[@]}"; do setups+=("$w-$p"); done; done
run_h2load() { # workload path
  local w=$1 p=$2 target=(http://"${addr_of[$2]}"/1k.html)
  [ "$w" = grpc ] && target=(-d "$work/ping.req" -H 'content-type: application/grpc' -H 'te: trailers' http://"${addr_of[$p]}"/bench.Echo/Ping)
  measure "$w-$p" "${proxy_of[$p]:-}" ip netns exec "${ns_of[$p]}" ${pin_load[@]+"${pin_load[@]}"} h2load -t1 -c"$conns" -m"$streams" \
    -D"$duration" --warm-up-time="$warmup" --log-file="$work/h2load.log" "${target[@]}"
  record_h2load "$w-$p" "$out" "$work/h2load.log"
}

echo "== bench-h2: h2load -t1 -c$conns -m$streams (h2c prior knowledge), ${rounds} rounds of ${warmup}s warm-up + ${duration}s per setup"
echo "   service: nginx, 1 worker, h2c; sidecar: $agent; CPU pinning: ${pin_proxy[*]:-none} for the proxy, ${pin_load[*]:-none} for the load side"
builds_banner
for ((r = 1; r <= rounds; r++)); do
  for w in "${workloads[@]}"; do
    for p in "${paths[@]}"; do run_h2load "$w" "$p"; done
    for p in direct haproxy nghttpx floor; do ratios[$w/$p]+="$(ratio "$(last "${rps[$w-sidecar]}")" "$(last "${rps[$w-$p]}")") "; done
    printf '   round %d %-4s: %s sidecar/haproxy %sx sidecar/nghttpx %sx\n' "$r" "$w" "$(round_summary "${paths[@]/#/$w-}")" \
      "$(last "${ratios[$w/haproxy]}")" "$(last "${ratios[$w/nghttpx]}")"
  done
done
sidecar_rss=$(rss_mib "$sidecar") haproxy_rss=$(rss_mib "$haproxy") nghttpx_rss=$(rss_mib "$nghttpx") floor_rss=$(rss_mib "$floor")
stats=$(ip netns exec "$pod" "$agent" request GET stats 2>/dev/null || true)
counter() { awk -F': ' -v k="$1" '$1 == k { print $2 }' <<< "$stats"; }
rq=$(counter http.outbound.downstream_rq_total)
if [ ${#builds[@]} -gt 1 ]; then # whether the baseline proxied HTTP/2 at layer 7 too (an older one may relay it as TCP)
  base_rq=$(outbound_http_requests "$base_pod")
fi
stop_sidecar "$pod" "$sidecar"
if [ ${#builds[@]} -gt 1 ]; then stop_sidecar "$base_pod" "${proxy_of[sidecar@base]}"; fi

# ---- the table
declare -A m_rps m_p50 m_p99
setup_medians "${setups[@]}"
declare -A what=([http]='HTTP/2 GET 1 KiB' [grpc]='gRPC unary' [direct]='direct (no proxy)'
  [haproxy]='haproxy, 1 thread, h2 both sides' [nghttpx]='nghttpx, 1 thread, h2 both sides'
  [floor]='floor: our frame layer, relay only' [nodefloor]='floor: node:http2, relay only' [sidecar]='sidecar (captured to 15001)' [sidecar@base]='the baseline'"'"'s sidecar')
echo
echo "== results: medians of $rounds rounds; proxy CPU = % of one core while measuring (warm-up included),"
echo "   µs/req = the proxy's CPU time per request (that CPU share over the median req/s)"
# CPU per request: with two cores the load side (h2load and the service share CPU 0) is often the
# bottleneck, leaving the proxies below 100%; their cost per request still compares them.
per_rq() { awk -v t="${cpu_ticks[$1]}" -v hz="$(getconf CLK_TCK)" -v ns="${cpu_ns[$1]}" -v r="${m_rps[$1]}" \
  'BEGIN { if (r > 0) printf "%.1f", 1e6 * t / hz / (ns / 1e9) / r; else print "n/a" }'; }
row() { printf '%-17s %-33s %9s %8s %8s %10s %8s\n' "$@"; }
row workload path req/s "p50 ms" "p99 ms" "proxy CPU" "µs/req"
for w in "${workloads[@]}"; do
  for p in "${paths[@]}"; do
    if [ "$p" = direct ]; then cpu=(- -); else cpu=("$(cpu_pct "$w-$p")" "$(per_rq "$w-$p")"); fi
    row "${what[$w]}" "${what[$p]}" "${m_rps[$w-$p]}" "${m_p50[$w-$p]}" "${m_p99[$w-$p]}" "${cpu[@]}"
  done
done
echo
printf '%-17s %15s %16s %16s   (medians of per-round req/s ratios)\n' "" sidecar/direct sidecar/haproxy sidecar/nghttpx
# shellcheck disable=SC2086 # the per-round lists split on spaces
for w in "${workloads[@]}"; do
  printf '%-17s %14sx %15sx %15sx\n' "${what[$w]}" "$(median ${ratios[$w/direct]})" "$(median ${ratios[$w/haproxy]})" "$(median ${ratios[$w/nghttpx]})"
done
echo
# Issue targets for HTTP/2 at HTTP/1.1's cost: CPU per request at most 1.5x the peer's, req/s at least 0.8x.
for w in "${workloads[@]}"; do
  printf '%-17s CPU per request floor/haproxy: %sx (what the frame layer of our own costs with no policy); node:http2 floor/haproxy: %sx\n' "${what[$w]}" \
    "$(awk -v a="$(per_rq "$w-floor")" -v b="$(per_rq "$w-haproxy")" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')" \
    "$(awk -v a="$(per_rq "$w-nodefloor")" -v b="$(per_rq "$w-haproxy")" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
  for p in haproxy nghttpx; do
    printf '%-17s CPU per request sidecar/%s: %sx (target <= 1.5x)\n' "${what[$w]}" "$p" \
      "$(awk -v a="$(per_rq "$w-sidecar")" -v b="$(per_rq "$w-$p")" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
  done
done
echo
checks=()
for p in "${paths[@]}"; do checks+=("$p ${grpc_check[$p]}"); done
echo "gRPC call by @grpc/grpc-js (status OK, reply checked): $(join_by ', ' "${checks[@]}")"
if [ -z "$rq" ]; then
  echo "the sidecar's counters could not be read: whether it proxied HTTP/2 at layer 7 is unknown"
elif [ "$rq" -gt 0 ]; then
  printf 'the sidecar proxied HTTP/2 at layer 7: %s outbound HTTP requests counted (HTTP/2 %s, gRPC %s); h2load completed %s (+ warm-ups)\n' \
    "$rq" "$(counter http.outbound.downstream_rq_http2_total)" "$(counter http.outbound.grpc.total)" \
    "$(( ${sent[http-sidecar]} + ${sent[grpc-sidecar]} ))"
else
  printf 'the sidecar relayed HTTP/2 as opaque TCP: no outbound HTTP request counted (%s TCP connections)\n' "$(counter tcp.outbound.downstream_cx_total)"
fi
if [ ${#builds[@]} -gt 1 ]; then
  echo "the baseline's sidecar counted ${base_rq:-?} outbound HTTP requests (0: it relayed HTTP/2 as opaque TCP; compare with care)"
fi
printf 'RSS at the end: sidecar %s MiB, haproxy %s MiB, nghttpx %s MiB, floor relay %s MiB\n' "$sidecar_rss" "$haproxy_rss" "$nghttpx_rss" "$floor_rss"
error_notes "${setups[@]}"

comparison_header
compare_builds "HTTP/2 GET 1 KiB through the sidecar" http-sidecar
compare_builds "gRPC unary through the sidecar" grpc-sidecar
exit 0
