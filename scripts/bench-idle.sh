#!/usr/bin/env bash
# `make bench`, the first seconds after idle. A sidecar's traffic is bursty, and what the first
# requests after a quiet spell cost is a figure of its own (measured independently: after ~45 s
# without traffic, the first 4 s of load cost ~1.5x the steady figure). This measures it; why is
# another question.
# For each build (the one under test and, with PILOT_AGENT_BASELINE, the baseline; see bench-lib.sh)
# and each protocol (HTTP/1.1; HTTP/2 with prior knowledge), a captured pod and its sidecar
# (`pilot-agent proxy`, uid 1337, --concurrency 1), all side by side, in front of nginx (one worker)
# serving 1 KiB in a peer namespace. Each sidecar gets bursts of load from its pod (h2load: HTTP/1.1
# --h1 -c32 like wrk in bench-proxy, HTTP/2 -c8 -m16 like bench-h2) of 4 + BENCH_DURATION s, each
# burst BENCH_IDLE_SECONDS after the end of that sidecar's previous one, so that every sidecar idles
# exactly as long; the bursts go one sidecar after the other: HTTP/1.1 new, HTTP/1.1 baseline, HTTP/2
# new, HTTP/2 baseline, then again, BENCH_ROUNDS times. Before the first round, each sidecar gets one
# burst that is not measured: every measured burst follows a load and an idle spell alike. A burst is
# cut into windows from the start of h2load:
#   first 1 s, first 4 s, and steady (from 4 s to the end).
# For each window: the sidecar's CPU per request (user + kernel, from /proc/PID/stat read at the
# window's edges, over the requests that completed in it; the ticks are 10 ms, so ~1-2% in the first
# second), the p99 of the requests that started in it (h2load --log-file) and their rate. Each figure
# is the median of the rounds; the ratio to the steady figure, the median of per-round ratios.
# With 2+ CPUs the sidecars get CPU 1; the load side (h2load, nginx, this script and its samples) CPU 0.
#
# Topology (made here, removed on exit, failure or Ctrl-C; processes ended by their own PIDs):
#   peer (nginx :8080 HTTP/1.1, :8081 h2c) 198.19.2N.1 --veth-- 198.19.2N.2 captured pod N (N = 0..3:
#   HTTP/1.1 new, HTTP/1.1 baseline, HTTP/2 new, HTTP/2 baseline)
#
#   scripts/bench-idle.sh           (needs root; without it, says so and exits 0)
# Environment: PILOT_AGENT_BIN (default bin/pilot-agent), PILOT_AGENT_BASELINE (a built checkout to
# compare with; none by default), BENCH_IDLE_SECONDS (s without traffic before each burst, 60),
# BENCH_ROUNDS (3), BENCH_DURATION (s of the steady window, 5), BENCH_IDLE_H2 (1; 0 = HTTP/1.1 only),
# BENCH_PIN (1; 0 = no CPU pinning), BENCH_CONCURRENCY (the sidecars' --concurrency, 1).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
idle=${BENCH_IDLE_SECONDS:-60}
protocols=(h1 h2)
if [ "${BENCH_IDLE_H2:-1}" = 0 ]; then protocols=(h1); fi
declare -A what=([h1]=HTTP/1.1 [h2]=HTTP/2 [first1s]='first 1 s' [first4s]='first 4 s' [steady]='steady (4 s on)')
windows=(first1s first4s steady)

bench_preamble bench-idle
# This script, and what it starts unless told otherwise, on the load side's CPU: its samples of
# /proc and its sleeps do not take the sidecars' CPU at the start of a burst.
if [ ${#pin_load[@]} -gt 0 ]; then taskset -cp "${pin_load[-1]}" $$ > /dev/null; fi

# ---- namespaces: a pod per sidecar (KEY: the protocol, then @base for the baseline's)
peer="pa-bench-idle-peer-$$"
declare -A pod_of url_of proxy_of
keys=()
for p in "${protocols[@]}"; do
  # shellcheck disable=SC2207 # names have no spaces
  keys+=($(and_baseline "$p"))
done
namespaces=("$peer")
for n in "${!keys[@]}"; do
  pod_of[${keys[$n]}]="pa-bench-idle$n-$$"
  namespaces+=("pa-bench-idle$n-$$")
done
bench_setup bench-idle "${namespaces[@]}"
mkdir -p "$work/www" "$work/peer"
head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k.html"
nginx_static_conf "$work/peer" 8080 'listen 8081 http2;'
start_nginx "$peer" "$work/peer" ${pin_load[@]+"${pin_load[@]}"}
for n in "${!keys[@]}"; do
  k=${keys[$n]}
  veth_link "${pod_of[$k]}" pod0 "198.19.2$n.2" "$peer" "peer$n" "198.19.2$n.1"
  port=8080
  if [[ $k == h2* ]]; then port=8081; fi
  url_of[$k]=http://198.19.2$n.1:$port/1k.html
done
wait_port "$peer" 198.19.20.1 8080
wait_port "$peer" 198.19.20.1 8081
for k in "${keys[@]}"; do
  as_build "$(build_of "$k")" start_sidecar "${pod_of[$k]}" "$work/sidecar-$k.log"
  proxy_of[$k]=$started
done

# ---- a burst and its windows
# sample I PID: PID's CPU ticks (user + kernel, and kernel) and the time (µs since the epoch) into
# at_ticks[I], at_sys[I] and at_us[I]; bash alone, no process started.
declare -a at_ticks at_sys at_us
sample() {
  local stat f
  read -r stat < "/proc/$2/stat"
  # shellcheck disable=SC2206 # the fields after the command name, split on spaces
  f=(${stat##*) })
  at_us[$1]=${EPOCHREALTIME/./} at_ticks[$1]=$(( f[11] + f[12] )) at_sys[$1]=${f[12]}
}
sleep_until() { # US: until that time (µs since the epoch)
  local left=$(( $1 - ${EPOCHREALTIME/./} ))
  if [ "$left" -gt 0 ]; then sleep "$((left / 1000000)).$(printf '%06d' $((left % 1000000)))"; fi
}
# burst KEY [LOG]: h2load from KEY's pod through its sidecar for 4 + $duration s, per-request lines
# into LOG; the sidecar's CPU sampled at the start, at 1 s, at 4 s and at the end (at_*[0..3]).
declare -A last_end
burst() {
  local k=$1 pid=${proxy_of[$1]} args=(--h1 -c32 -m1) load
  if [[ $k == h2* ]]; then args=(-c8 -m16); fi
  rm -f "$work/h2load.log"
  sleep_until $(( ${last_end[$k]:-0} + idle * 1000000 ))
  sample 0 "$pid"
  ip netns exec "${pod_of[$k]}" ${pin_load[@]+"${pin_load[@]}"} h2load -t1 "${args[@]}" -D$((4 + duration)) \
    --log-file="${2:-/dev/null}" "${url_of[$k]}" > "$work/h2load.out" &
  load=$!
  sleep_until $(( at_us[0] + 1000000 ))
  sample 1 "$pid"
  sleep_until $(( at_us[0] + 4000000 ))
  sample 2 "$pid"
  wait "$load"
  sample 3 "$pid"
  last_end[$k]=${at_us[3]}
}
# window LOG FROM TO (µs since the epoch): "COMPLETED P99 FAILED": the requests of LOG (h2load's: start,
# status, µs to the end of the response) that completed in [FROM, TO), the p99 (ms) of those that
# started in it, and how many of those failed (status -1: no response; or >= 400).
window() {
  awk -v a="$2" -v b="$3" '
    $2 > 0 && $2 < 400 && $1 + $3 >= a && $1 + $3 < b { done++ }
    $1 >= a && $1 < b { if ($2 > 0 && $2 < 400) print $3; else failed++ }
    END { print "done", done + 0, failed + 0 }' "$1" | sort -n | awk '
    $1 == "done" { n = $2; failed = $3; next }
    { v[++k] = $1 }
    END { printf "%d %s %d\n", n, (k > 0) ? sprintf("%.2f", v[int((k - 1) * 0.99) + 1] / 1000) : "n/a", failed }'
}
# window_setup KEY WINDOW: the setup that holds KEY's figures of WINDOW: PROTOCOL-WINDOW[@base].
window_setup() { of_build "${1%@base}-$2" "$(build_of "$1")"; }
# record KEY: the windows of the burst just run: rate, p99 and the CPU per request (note_cpu) of each.
declare -A rps p99 errs
record() {
  local k=$1 w s from to n pct failed
  local -A edge=([first1s]="0 1" [first4s]="0 2" [steady]="2 3")
  for w in "${windows[@]}"; do
    read -r from to <<< "${edge[$w]}"
    read -r n pct failed <<< "$(window "$work/h2load.log" "${at_us[$from]}" "${at_us[$to]}")"
    s=$(window_setup "$k" "$w")
    rps[$s]+="$(awk -v n="$n" -v us=$(( at_us[to] - at_us[from] )) 'BEGIN { printf "%.0f", n / us * 1e6 }') "
    p99[$s]+="$pct "
    if [ "$failed" -gt 0 ]; then errs[$s]+="$failed failed; "; fi
    run_ticks=$(( at_ticks[to] - at_ticks[from] )) run_sys=$(( at_sys[to] - at_sys[from] ))
    note_cpu "$s" "$n"
  done
}
last_total() { awk -v u="$(last "${usr_us[$1]}")" -v k="$(last "${sys_us[$1]}")" 'BEGIN { printf "%.1f", u + k }'; } # SETUP
# to_steady SETUP STEADY: the median over the rounds of SETUP's CPU per request / STEADY's.
to_steady() {
  # shellcheck disable=SC2046 # the per-round ratios, one a line
  median_of 2 $(awk -v a="$(sum_lists "${usr_us[$1]:-}" "${sys_us[$1]:-}")" -v b="$(sum_lists "${usr_us[$2]:-}" "${sys_us[$2]:-}")" \
    'BEGIN { n = split(a, x); split(b, y); for (i = 1; i <= n; i++) if (y[i] > 0) print x[i] / y[i] }')
}

echo "== bench-idle: the first seconds of load after ${idle}s without traffic, through the sidecar (--concurrency ${BENCH_CONCURRENCY:-1});"
echo "   ${rounds} rounds of bursts of 4 + ${duration}s, h2load HTTP/1.1 --h1 -c32, HTTP/2 -c8 -m16; 1 KiB from nginx in the peer"
echo "   CPU pinning: ${pin_proxy[*]:-none} for the sidecars, ${pin_load[*]:-none} for the load side"
builds_banner
for k in "${keys[@]}"; do burst "$k"; done
for ((r = 1; r <= rounds; r++)); do
  for k in "${keys[@]}"; do
    burst "$k" "$work/h2load.log"
    record "$k"
    line=()
    for w in "${windows[@]}"; do
      s=$(window_setup "$k" "$w")
      line+=("${what[$w]} $(last_total "$s") µs/req (p99 $(last "${p99[$s]}") ms)")
    done
    echo "   round $r ${what[${k%@base}]} $(build_name "$(build_of "$k")"): $(join_by ', ' "${line[@]}")"
  done
done
declare -A counted # the HTTP requests each sidecar counted: 0 after HTTP/2 load means it relayed it as TCP
for k in "${keys[@]}"; do
  counted[$k]=$(outbound_http_requests "${pod_of[$k]}")
  stop_sidecar "${pod_of[$k]}" "${proxy_of[$k]}"
done

comparison_header
for p in "${protocols[@]}"; do
  ratios=()
  for w in "${windows[@]}"; do compare_builds "${what[$p]}, ${what[$w]} after ${idle} s idle" "$p-$w"; done
  for b in "${builds[@]}"; do
    k=$(of_build "$p" "$b")
    ratios+=("$(build_name "$b") first 1 s $(to_steady "$(window_setup "$k" first1s)" "$(window_setup "$k" steady)")x, first 4 s $(to_steady "$(window_setup "$k" first4s)" "$(window_setup "$k" steady)")x")
  done
  echo "${what[$p]}: CPU per request / the steady figure (medians of per-round ratios): $(join_by '; ' "${ratios[@]}")"
done
if [[ " ${keys[*]} " == *" h2 "* ]]; then
  seen=()
  for k in $(and_baseline h2); do seen+=("$(build_name "$(build_of "$k")") ${counted[$k]:-?}"); done
  echo "HTTP/2 requests the sidecars proxied at layer 7: $(join_by ', ' "${seen[@]}") (0: relayed as opaque TCP, other work than layer 7)"
fi
# shellcheck disable=SC2046 # setup names have no spaces
error_notes $(for k in "${keys[@]}"; do for w in "${windows[@]}"; do window_setup "$k" "$w"; done; done)
exit 0
