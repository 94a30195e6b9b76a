#!/usr/bin/env bash
# `make bench`: every bench in turn, or only those BENCH_ONLY names (commas or spaces between them):
#   startup   scripts/bench.sh: the command-line start-up     iptables  scripts/bench-iptables.mjs
#   proxy     scripts/bench-proxy.sh (HTTP/1.1, raw TCP)      footprint scripts/bench-footprint.sh
#   mtls      scripts/bench-mtls.sh                           h2        scripts/bench-h2.sh
#   gateway   scripts/bench-gateway.sh                        idle      scripts/bench-idle.sh
#   dns       scripts/bench-dns.mjs                           parser    scripts/bench-parser.mjs
#   traffic-path scripts/bench-traffic-path.mjs (the traffic decisions per request, in-process)
# Two builds on one bench in a few minutes (a baseline: any built checkout, e.g. a worktree):
#   git worktree add /tmp/base REV && (cd /tmp/base && make build)
#   PILOT_AGENT_BASELINE=/tmp/base BENCH_ONLY=proxy BENCH_ROUNDS=3 BENCH_DURATION=3 BENCH_PROFILE=0 \
#     BENCH_TCP_RUNS=0 scripts/bench-all.sh       (or `make bench`, which builds this checkout first)
# Environment (each script's header lists what it reads, and its defaults):
#   BENCH_ONLY              the benches to run (default: all, in the order above)
#   PILOT_AGENT_BIN         the build under test (default bin/pilot-agent of this checkout)
#   PILOT_AGENT_BASELINE    a built checkout to compare with: the data-plane benches (proxy, mtls, h2,
#                           gateway, idle) run its proxies too, alternated round by round; traffic-path
#                           loads it beside this build in one process
#   BENCH_ROUNDS (3), BENCH_DURATION (s measured per run, 5), BENCH_WARMUP (s before each run, 1)
#   BENCH_PROFILE=0         no CPU profile after the measurements (proxy, gateway)
#   BENCH_TCP_RUNS=0        no raw TCP (proxy)
#   BENCH_IDLE_SECONDS      the quiet spell before each burst of the idle bench (60)
#   BENCH_PIN=0             no CPU pinning
set -euo pipefail
cd "$(dirname "$0")/.."
order=(startup iptables proxy footprint mtls h2 gateway idle dns parser traffic-path)
declare -A run_of=([startup]=scripts/bench.sh [iptables]='node scripts/bench-iptables.mjs'
  [proxy]=scripts/bench-proxy.sh [footprint]=scripts/bench-footprint.sh [mtls]=scripts/bench-mtls.sh
  [h2]=scripts/bench-h2.sh [gateway]=scripts/bench-gateway.sh [idle]=scripts/bench-idle.sh
  [dns]='node scripts/bench-dns.mjs' [parser]='node scripts/bench-parser.mjs' [traffic-path]='node scripts/bench-traffic-path.mjs')
read -ra only <<< "${BENCH_ONLY//,/ }"
for name in ${only[@]+"${only[@]}"}; do
  if [ -z "${run_of[$name]:-}" ]; then
    echo "bench: BENCH_ONLY names \"$name\", which is no bench; the benches: ${order[*]}" >&2
    exit 2
  fi
done
for name in "${order[@]}"; do
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  # shellcheck disable=SC2086 # a command and its arguments
  ${run_of[$name]}
done
