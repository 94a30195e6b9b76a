#!/usr/bin/env bash
# `make bench`, the ingress gateway: the same keep-alive HTTP load (wrk), every request carrying
# Istio's sample token (groups-scope.jwt, RS256), in one run, three ways:
#   nginx   : nginx (worker_processes 1) as a reverse proxy, passing the requests on (no JWT check);
#   floor   : scripts/node-floor-relay.mjs, bytes copied between connection pairs by Node with no
#             HTTP at all: what Node itself costs per request, the floor of any proxy on Node;
#   gateway : `pilot-agent proxy router` validating the JWT (RequestAuthentication), matching the
#             VirtualService rule on `@request.auth.claims.groups` and routing;
# all to the same upstream, nginx serving a 1 KiB file. Each one's CPU per request is printed split
# into kernel (system calls and the network stack run in them) and user time. All in one network
# namespace made here (removed on exit); with 2+ CPUs the proxy under test gets CPU 1, wrk and the
# upstream CPU 0.
# The access logs are off on both sides (nginx `access_log off`, mesh config `accessLogFile: ""`).
# With PILOT_AGENT_BASELINE (another built checkout, see bench-lib.sh), the baseline's gateway runs too,
# in a second namespace made alike (its own upstream nginx on the load side's CPU, a copy of the
# gateway's files): setup gateway@base, run after the new gateway in every round; the end of the
# output compares the two builds (CPU per request, each round's, throughput and p99). A baseline whose
# gateway does not answer 200 to the bench's request is left out, and the output says so.
#   scripts/bench-gateway.sh          (needs root; without it, says so and exits 0)
# Environment: PILOT_AGENT_BIN, PILOT_AGENT_BASELINE (a built checkout to compare with; none by
# default), BENCH_ROUNDS (3), BENCH_DURATION (5), BENCH_WARMUP (1),
# BENCH_CONNECTIONS (32), BENCH_THREADS (1), BENCH_PIN (1), BENCH_CONCURRENCY (the gateway's --concurrency, 1),
# BENCH_GATEWAY_NODE_ARGS (node flags for the gateway, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"),
# BENCH_PROFILE (1; 0 = no profile: after the measurements, the gateway is profiled under the same load).
# Target, reported: gateway >= nginx.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
. scripts/gateway-resources.sh
jwt_dir=$PWD/test/fixtures/jwt
conns=${BENCH_CONNECTIONS:-32}
threads=${BENCH_THREADS:-1}

if [ "$(id -u)" -ne 0 ]; then
  echo "bench-gateway: skipped (needs root: it makes a network namespace)"
  exit 0
fi
check_builds bench-gateway
ensure_bench_tools
node=$(command -v node)
set_pinning

ns="pa-bench-gw-$$"
base_ns="pa-bench-gw-base-$$" # with a baseline: its gateway and an upstream of its own
namespaces=("$ns")
if [ ${#builds[@]} -gt 1 ]; then namespaces+=("$base_ns"); fi
bench_setup bench-gateway "${namespaces[@]}"

# ---- the upstream (nginx, 1 KiB on :8080) and the reference proxy (nginx on :8001)
mkdir -p "$work/www" "$work/upstream" "$work/proxy" "$work/gw/etc/mesh/resources" "$work/gw/etc/mesh/pod" "$work/gw/etc/mesh/config"
head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k.html"
nginx_static_conf "$work/upstream" 127.0.0.1:8080
nginx_proxy_conf "$work/proxy" 127.0.0.1:8001 127.0.0.1:8080
start_nginx "$ns" "$work/upstream" ${pin_load[@]+"${pin_load[@]}"}
start_nginx "$ns" "$work/proxy" ${pin_proxy[@]+"${pin_proxy[@]}"}
nginx_worker=$worker

# ---- the gateway: Gateway :8000, a claim-matching route, the RequestAuthentication (inline key set)
echo 'mesh="ingressgateway"' > "$work/gw/etc/mesh/pod/labels"
echo 'accessLogFile: ""' > "$work/gw/etc/mesh/config/mesh"
gateway_resources 8000 /1k 127.0.0.1 8080 "jwks: '$(tr -d '\n' < "$jwt_dir/jwks.json")'" > "$work/gw/etc/mesh/resources/gateway.yaml"
# start_gateway NS DIR [ENV...] [RUN...]: `RUN proxy router` in NS on the proxy's CPU, from DIR (it
# reads ./etc/mesh/...), logging to DIR.log, through `env POD_NAMESPACE=mesh-system ENV...`; RUN is
# $agent as users run it (the node flags of its first line) unless given. Waits until it is ready;
# sets $gateway (the node process: env, ip netns exec and taskset exec in turn).
start_gateway() {
  local ns=$1 dir=$2 envs=() run=()
  shift 2
  while [ $# -gt 0 ] && [[ $1 == *=* ]]; do envs+=("$1"); shift; done
  run=("$@")
  [ ${#run[@]} -gt 0 ] || run=("$agent")
  (cd "$dir" && exec env POD_NAMESPACE=mesh-system ${envs[@]+"${envs[@]}"} ip netns exec "$ns" ${pin_proxy[@]+"${pin_proxy[@]}"} \
    "${run[@]}" proxy router --concurrency "${BENCH_CONCURRENCY:-1}" --log_target stderr >> "$dir.log" 2>&1) &
  gateway=$!
  pids+=("$gateway")
  wait_ready "$ns" "$dir.log" "the gateway"
}
# With BENCH_GATEWAY_NODE_ARGS: through node, with those flags after the ones of its first line.
# shellcheck disable=SC2046,SC2086 # node flags, split on spaces
if [ -n "${BENCH_GATEWAY_NODE_ARGS:-}" ]; then start_gateway "$ns" "$work/gw" "$node" $(shebang_flags "$agent") ${BENCH_GATEWAY_NODE_ARGS} "$agent"; else start_gateway "$ns" "$work/gw"; fi
declare -A ns_of=([nginx]=$ns [floor]=$ns [gateway]=$ns) proxy_of=([gateway]=$gateway)
if [ ${#builds[@]} -gt 1 ]; then # the baseline: the same files, its own upstream
  cp -a "$work/gw" "$work/gw@base"
  mkdir -p "$work/upstream@base"
  nginx_static_conf "$work/upstream@base" 127.0.0.1:8080
  start_nginx "$base_ns" "$work/upstream@base" ${pin_load[@]+"${pin_load[@]}"}
  as_build base start_gateway "$base_ns" "$work/gw@base"
  ns_of[gateway@base]=$base_ns proxy_of[gateway@base]=$gateway
fi
wait_port "$ns" 127.0.0.1 8001
# shellcheck disable=SC2046 # node flags, split on spaces
ip netns exec "$ns" ${pin_proxy[@]+"${pin_proxy[@]}"} "$node" $(shebang_flags "$agent") "$PWD/scripts/node-floor-relay.mjs" 8002 8080 &
floor=$!
pids+=("$floor")
wait_port "$ns" 127.0.0.1 8002
token=$(cat "$jwt_dir/groups-scope.jwt")
check() { # SETUP: the status of a request with the token to that gateway, or why none came
  ip netns exec "${ns_of[$1]}" "$node" -e "fetch('http://127.0.0.1:8000/1k.html', { headers: { authorization: 'Bearer $token' } }).then((r) => console.log(r.status), (e) => console.log(e.message))"
}
if [ ${#builds[@]} -gt 1 ] && [ "$(check gateway@base)" != 200 ]; then
  baseline_note="note: the baseline is left out of this bench: its gateway answered $(check gateway@base), not 200, to a request with the token"
  echo "bench-gateway: $baseline_note" >&2
  builds=(new)
  stop_pids "${proxy_of[gateway@base]}"
  forget "${proxy_of[gateway@base]}"
fi
status=$(check gateway)
if [ "$status" != 200 ]; then
  echo "bench-gateway: a request with the token got $status, not 200" >&2
  cat "$work/gw.log" >&2
  exit 1
fi

# ---- measurements
declare -A url_of=([nginx]=http://127.0.0.1:8001/1k.html [floor]=http://127.0.0.1:8002/1k.html
  [gateway]=http://127.0.0.1:8000/1k.html [gateway@base]=http://127.0.0.1:8000/1k.html)
proxy_of[nginx]=$nginx_worker proxy_of[floor]=$floor
declare -A rps p50 p99 errs sent cpu_ticks sys_ticks cpu_ns
# shellcheck disable=SC2207 # setup names have no spaces
setups=(nginx floor $(and_baseline gateway))
echo "== bench-gateway: wrk -t$threads -c$conns with a JWT on every request, ${rounds} rounds of ${warmup}s + ${duration}s per setup"
builds_banner
round_ratio=''
for ((r = 1; r <= rounds; r++)); do
  for s in "${setups[@]}"; do run_wrk "$s" -H "Authorization: Bearer $token"; done
  rr=$(ratio "$(last "${rps[gateway]}")" "$(last "${rps[nginx]}")")
  round_ratio+="$rr "
  printf '   round %d: %s gateway/nginx %sx\n' "$r" "$(round_summary "${setups[@]}")" "$rr"
done
gw_rss=$(rss_mib "$gateway")
counters=$(ip netns exec "$ns" "$agent" request GET stats 2>/dev/null | grep -E '^http\.gateway\.decisions\.(jwt\.valid|route\.routed):' | tr '\n' ' ' || true)
if [ ${#builds[@]} -gt 1 ]; then stop_pids "${proxy_of[gateway@base]}"; forget "${proxy_of[gateway@base]}"; fi

echo
echo "== results: medians of $rounds rounds; proxy CPU = % of one core while measuring"
row() { printf '%-40s %9s %8s %8s %10s\n' "$@"; }
row setup req/s "p50 ms" "p99 ms" "proxy CPU"
declare -A label=([nginx]='nginx, 1 worker (no JWT check)' [floor]='node floor: a byte relay (no HTTP)' [gateway]='gateway (JWT + claim route)'
  [gateway@base]='the baseline'"'"'s gateway')
# shellcheck disable=SC2086 # the per-round lists split on spaces
for s in "${setups[@]}"; do
  row "${label[$s]}" "$(printf '%.0f' "$(median ${rps[$s]})")" "$(printf '%.2f' "$(median ${p50[$s]})")" \
    "$(printf '%.2f' "$(median ${p99[$s]})")" "$(cpu_pct "$s")"
done
# shellcheck disable=SC2086
r_nginx=$(median $round_ratio)
printf 'throughput gateway/nginx  %6sx  (median of per-round ratios)  target >= 1.00: %s\n' "$r_nginx" \
  "$(awk -v r="$r_nginx" 'BEGIN { print (r >= 1) ? "met" : "MISSED" }')"
for s in "${setups[@]}"; do
  printf 'CPU per request, %-12s %6s us = %s\n' "$s" "$(cpu_us_per_request "$s")" "$(cpu_split_per_request "$s")"
done
echo '(the floor is Node alone; the gateway minus the floor is its HTTP/1.1 engine, policy and routing)'
printf 'gateway RSS %s MiB; its counters: %s\n' "$gw_rss" "${counters:-?}"
error_notes "${setups[@]}"

# ---- where the time goes: a CPU profile of the gateway (unbundled, so that functions are named by
# their source files) under the same load for BENCH_DURATION s, summarized by scripts/profile-summary.mjs
if [ "${BENCH_PROFILE:-1}" != 0 ]; then
  stop_pids "$gateway"
  forget "$gateway"
  mkdir -p "$work/prof"
  # shellcheck disable=SC2046 # node flags, split on spaces
  start_gateway "$ns" "$work/gw" PILOT_AGENT_UNBUNDLED=1 "$node" $(shebang_flags "$agent") --cpu-prof --cpu-prof-dir="$work/prof" "$agent"
  ip netns exec "$ns" ${pin_load[@]+"${pin_load[@]}"} wrk -t"$threads" -c"$conns" -H "Authorization: Bearer $token" -d"${duration}s" "${url_of[gateway]}" > /dev/null
  ip netns exec "$ns" "$agent" request POST quitquitquit > /dev/null 2>&1 || true
  stop_pids "$gateway"
  forget "$gateway"
  echo
  echo "== where the gateway's CPU goes under that load (node --cpu-prof; socket calls are kernel time)"
  for f in "$work"/prof/*.cpuprofile; do node scripts/profile-summary.mjs "$f" --top 15; done
fi

comparison_header
compare_builds "gateway (JWT + claim route)" gateway
if [ -n "${baseline_note:-}" ]; then echo "$baseline_note"; fi
exit 0
