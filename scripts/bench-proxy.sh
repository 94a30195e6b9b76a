#!/usr/bin/env bash
# `make bench`, the data plane: the same keep-alive HTTP load (wrk) from inside a pod to a peer
# service, in one run, three ways:
#   direct  : from a pod namespace with no capture rules, wrk -> the peer service;
#   nginx   : the same namespace, through nginx (worker_processes 1) as a keep-alive reverse proxy;
#   sidecar : from a pod namespace with the capture rules (`pilot-agent mesh-iptables`) and
#             `pilot-agent proxy` running as uid 1337: wrk (uid 0) -> the peer, captured to 15001;
# and raw TCP throughput (N MiB one way to a sink in the peer), direct and through the sidecar.
# The peer service is nginx (one worker) serving a 1 KiB static file: C, never the bottleneck, the
# same for every setup, so the differences are the proxies'. The setups run interleaved, in rounds,
# and each figure is the median of the rounds; ratios are taken within a round (on this KVM guest,
# setups that keep both vCPUs busy swing up to 2x from minute to minute, while direct stays put).
# With 2+ CPUs the proxy under test gets CPU 1 to itself and the load side (wrk, the peer) CPU 0.
#
# Topology (made here, removed on exit, failure or Ctrl-C; processes ended by their own PIDs):
#   plain pod 198.19.3.2 --veth-- 198.19.3.1 peer 198.19.2.1 --veth-- 198.19.2.2 captured pod
#
#   scripts/bench-proxy.sh          (needs root; without it, says so and exits 0)
# Environment: PILOT_AGENT_BIN (default bin/pilot-agent; another tree's bin/ works), BENCH_ROUNDS (3),
# BENCH_DURATION (s per run, 5), BENCH_WARMUP (s, 1), BENCH_CONNECTIONS (32), BENCH_THREADS (1),
# BENCH_TCP_MIB (1024), BENCH_TCP_RUNS (3), BENCH_PIN (1; 0 = no CPU pinning),
# BENCH_SIDECAR_NODE_ARGS (node flags for the sidecar, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"),
# BENCH_CONCURRENCY (the sidecar's --concurrency, 1: one worker, like the one nginx worker).
# Targets, reported and never fatal: sidecar throughput >= nginx's, p99 within 1 ms of nginx's,
# sidecar RSS < 60 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
agent=${PILOT_AGENT_BIN:-$PWD/bin/pilot-agent}
agent_root=$(cd "$(dirname "$agent")/.." && pwd)
rounds=${BENCH_ROUNDS:-3}
duration=${BENCH_DURATION:-5}
warmup=${BENCH_WARMUP:-1}
conns=${BENCH_CONNECTIONS:-32}
threads=${BENCH_THREADS:-1}
tcp_mib=${BENCH_TCP_MIB:-1024}
tcp_runs=${BENCH_TCP_RUNS:-3}

bench_preamble bench-proxy
hz=$(getconf CLK_TCK)

id=$$
pod="pa-bench-pod-$id"     # captured: rules + sidecar
plain="pa-bench-plain-$id" # no rules: direct and nginx
peer="pa-bench-peer-$id"
work=$(mktemp -d /tmp/pa-bench-proxy.XXXXXX)
chmod 755 "$work" # nginx workers run as nobody
pids=()

cleanup() {
  trap - EXIT INT TERM
  [ ${#pids[@]} -gt 0 ] && stop_pids "${pids[@]}"
  for ns in "$pod" "$plain" "$peer"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "bench-proxy: interrupted" >&2; exit 130' INT TERM


# ---- namespaces
for ns in "$pod" "$plain" "$peer"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
link() { # ns ifname addr peer-ifname peer-addr
  ip -n "$1" link add "$2" type veth peer name "$4" netns "$peer"
  ip -n "$1" addr add "$3/24" dev "$2"
  ip -n "$peer" addr add "$5/24" dev "$4"
  ip -n "$1" link set "$2" up
  ip -n "$peer" link set "$4" up
  ip -n "$1" route add default via "$5"
}
link "$pod" pod0 198.19.2.2 peer0 198.19.2.1
link "$plain" plain0 198.19.3.2 peer1 198.19.3.1

# ---- configuration files
mkdir -p "$work/www" "$work/peer" "$work/proxy"
head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k.html"
nginx_static_conf "$work/peer" 8080
nginx_proxy_conf "$work/proxy" 127.0.0.1:8000 198.19.3.1:8080
cat > "$work/sink.cjs" <<'EOF'
// Counts what each connection sends; at its end, answers the count and closes.
require('net').createServer({ allowHalfOpen: true }, (s) => {
  let n = 0;
  s.on('data', (d) => { n += d.length; });
  s.on('end', () => s.end(String(n)));
  s.on('error', () => {});
}).listen(8081);
EOF
cat > "$work/send.cjs" <<'EOF'
// Pushes MIB MiB to HOST:PORT, half-closes, waits for the sink's count; prints MiB/s.
const [host, port, mib] = process.argv.slice(2);
const chunk = Buffer.alloc(256 * 1024, 'a');
let left = (Number(mib) * 1024 * 1024) / chunk.length;
let t0 = 0n;
let reply = '';
const s = require('net').connect(+port, host, () => { t0 = process.hrtime.bigint(); pump(); });
function pump() {
  while (left > 0) { left--; if (!s.write(chunk)) { s.once('drain', pump); return; } }
  s.end();
}
s.on('data', (d) => { reply += d; });
s.on('end', () => {
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  if (Number(reply) !== Number(mib) * 1048576) { console.error(`the sink got ${reply} bytes`); process.exit(1); }
  console.log((Number(reply) / 1048576 / secs).toFixed(0));
});
s.on('error', (e) => { console.error(e.message); process.exit(1); });
setTimeout(() => { console.error('timeout'); process.exit(1); }, 60000).unref();
EOF

# ---- processes
start_nginx "$peer" "$work/peer" ${pin_load[@]+"${pin_load[@]}"}
ip netns exec "$peer" ${pin_load[@]+"${pin_load[@]}"} "$node" "$work/sink.cjs" & pids+=($!)
start_nginx "$plain" "$work/proxy" ${pin_proxy[@]+"${pin_proxy[@]}"}
nginx_worker=$worker
wait_port "$peer" 198.19.2.1 8080
wait_port "$peer" 198.19.2.1 8081
wait_port "$plain" 127.0.0.1 8000

ip netns exec "$pod" "$agent" mesh-iptables -i '*' -b '*' -d 15020,15021,15090 > "$work/iptables.log" 2>&1
# shellcheck disable=SC2086 # BENCH_SIDECAR_NODE_ARGS: node flags, split on spaces
ip netns exec "$pod" ${pin_proxy[@]+"${pin_proxy[@]}"} setpriv --reuid=1337 --regid=1337 --clear-groups -- \
  "$node" ${BENCH_SIDECAR_NODE_ARGS:-} "$agent" proxy --concurrency "${BENCH_CONCURRENCY:-1}" --log_target stderr > "$work/sidecar.log" 2>&1 &
sidecar=$!
pids+=("$sidecar")
if ! ip netns exec "$pod" "$agent" wait --periodMillis 100 --timeoutSeconds 15 > /dev/null 2>&1; then
  echo "bench-proxy: the sidecar did not become ready:" >&2
  cat "$work/sidecar.log" >&2
  exit 1
fi

# ---- measurements
declare -A ns_of=([direct]=$plain [nginx]=$plain [sidecar]=$pod)
declare -A url_of=([direct]=http://198.19.3.1:8080/1k.html [nginx]=http://127.0.0.1:8000/1k.html [sidecar]=http://198.19.2.1:8080/1k.html)
declare -A proxy_of=([nginx]=$nginx_worker [sidecar]=$sidecar)
declare -A rps p50 p99 errs cpu_ticks cpu_ns tcp sent
setups=(direct nginx sidecar)
run_wrk() { # setup
  local s=$1 out t0 t1 c0=0 c1=0 proxy=${proxy_of[$1]:-}
  local wrk=(ip netns exec "${ns_of[$s]}" ${pin_load[@]+"${pin_load[@]}"} wrk -t"$threads" -c"$conns")
  "${wrk[@]}" -d"${warmup}s" "${url_of[$s]}" > /dev/null
  [ -z "$proxy" ] || c0=$(ticks "$proxy")
  t0=$(now_ns)
  out=$("${wrk[@]}" -d"${duration}s" --latency "${url_of[$s]}")
  t1=$(now_ns)
  [ -z "$proxy" ] || c1=$(ticks "$proxy")
  cpu_ticks[$s]=$(( ${cpu_ticks[$s]:-0} + c1 - c0 ))
  cpu_ns[$s]=$(( ${cpu_ns[$s]:-0} + t1 - t0 ))
  record_wrk "$s" "$out"
}
run_tcp() { # setup
  local ns=$plain host=198.19.3.1
  [ "$1" = sidecar ] && ns=$pod host=198.19.2.1
  tcp[$1]+="$(ip netns exec "$ns" ${pin_load[@]+"${pin_load[@]}"} "$node" "$work/send.cjs" "$host" 8081 "$tcp_mib") "
}

echo "== bench-proxy: wrk -t$threads -c$conns, ${rounds} rounds of ${warmup}s warm-up + ${duration}s per setup, 1 KiB from nginx in the peer"
echo "   sidecar: $agent; CPU pinning: ${pin_proxy[*]:-none} for the proxy, ${pin_load[*]:-none} for the load side"
round_ratio='' round_dp99=''
for ((r = 1; r <= rounds; r++)); do
  for s in "${setups[@]}"; do run_wrk "$s"; done
  # Ratios within a round: the host's swings are slower than a round, mostly.
  rr=$(ratio "$(last "${rps[sidecar]}")" "$(last "${rps[nginx]}")")
  round_ratio+="$rr "
  round_dp99+="$(awk -v a="$(last "${p99[sidecar]}")" -v b="$(last "${p99[nginx]}")" 'BEGIN { print a - b }') "
  printf '   round %d: %s sidecar/nginx %sx\n' "$r" "$(for s in "${setups[@]}"; do
    printf '%s %s req/s (p99 %s ms)  ' "$s" "$(last "${rps[$s]}")" "$(last "${p99[$s]}")"; done)" "$rr"
done
sidecar_rss=$(rss_mib "$sidecar")
for ((r = 1; r <= tcp_runs; r++)); do run_tcp direct; run_tcp sidecar; done
sidecar_rss_tcp=$(rss_mib "$sidecar")
sidecar_anon=$(rss_mib "$sidecar" RssAnon) sidecar_file=$(rss_mib "$sidecar" RssFile)
nginx_rss=$(rss_mib "$nginx_worker")
stats=$(ip netns exec "$pod" "$agent" request GET stats 2>/dev/null || true)
counted=$(awk -F': ' '$1 == "http.outbound.downstream_rq_total" { print $2 }' <<< "$stats")
# Stop the sidecar the quick way, so that a --cpu-prof profile is written now.
ip netns exec "$pod" "$agent" request POST quitquitquit > /dev/null 2>&1 || true
stop_pids "$sidecar"
forget "$sidecar"

# ---- the table
declare -A m_rps m_p50 m_p99
setup_medians "${setups[@]}"
cpu_pct() { awk -v c="${cpu_ticks[$1]}" -v hz="$hz" -v ns="${cpu_ns[$1]}" 'BEGIN { printf "%.0f%%", 100 * c / hz / (ns / 1e9) }'; }
# shellcheck disable=SC2086
{ r_nginx=$(median $round_ratio); dp99=$(printf '%+.2f' "$(median $round_dp99)"); }
rss_ok=$(awk -v a="$sidecar_rss" -v b="$sidecar_rss_tcp" 'BEGIN { print (a * 1.048576 < 60 && b * 1.048576 < 60) }')
# shellcheck disable=SC2086
{ tcp_direct=$(median ${tcp[direct]}); tcp_sidecar=$(median ${tcp[sidecar]}); }
echo
echo "== results: medians of $rounds rounds; proxy CPU = % of one core while measuring; RSS at the end"
row() { printf '%-28s %9s %8s %8s %10s %10s\n' "$@"; }
row setup req/s "p50 ms" "p99 ms" "proxy CPU" "proxy RSS"
row "direct (no proxy)" "${m_rps[direct]}" "${m_p50[direct]}" "${m_p99[direct]}" - -
row "nginx, 1 worker, in the pod" "${m_rps[nginx]}" "${m_p50[nginx]}" "${m_p99[nginx]}" "$(cpu_pct nginx)" "$nginx_rss MiB"
row "sidecar (captured to 15001)" "${m_rps[sidecar]}" "${m_p50[sidecar]}" "${m_p99[sidecar]}" "$(cpu_pct sidecar)" "$sidecar_rss MiB"
echo
printf 'throughput sidecar/nginx   %6sx    (median of per-round ratios)  target >= 1.00: %s\n' "$r_nginx" "$(verdict "$(awk -v r="$r_nginx" 'BEGIN { print (r >= 1) }')")"
printf 'throughput sidecar/direct  %6sx\n' "$(ratio "${m_rps[sidecar]}" "${m_rps[direct]}")"
printf 'p99 sidecar - nginx        %6s ms  (median of per-round differences)  target <= 1 ms: %s\n' "$dp99" "$(verdict "$(awk -v d="$dp99" 'BEGIN { print (d <= 1) }')")"
printf 'sidecar RSS                %6s MiB after HTTP, %s MiB after TCP   target < 60 MB: %s\n' "$sidecar_rss" "$sidecar_rss_tcp" "$(verdict "$rss_ok")"
printf '                           (after TCP: %s MiB private/anon + %s MiB file-backed, mostly the node binary, shared)\n' "$sidecar_anon" "$sidecar_file"
printf 'raw TCP, %s MiB one way   direct %s MiB/s, sidecar %s MiB/s (%sx)  (median of %s)\n' "$tcp_mib" "$tcp_direct" "$tcp_sidecar" \
  "$(ratio "$tcp_sidecar" "$tcp_direct")" "$tcp_runs"
printf 'the sidecar counted %s outbound HTTP requests; wrk sent %s (+ warm-ups)\n' "${counted:-?}" "${sent[sidecar]}"
for s in "${setups[@]}"; do
  if [ -n "${errs[$s]:-}" ]; then echo "note: $s: ${errs[$s]}"; fi
done
exit 0
