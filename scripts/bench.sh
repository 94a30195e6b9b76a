#!/usr/bin/env bash
# Benchmarks. For now: the command-line start-up cost (every `request`, `wait` and init container
# pays it). Later capabilities add their own sections here.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-20}
bench_start() {
  local label=$1; shift
  local start end
  start=$(date +%s%N)
  for ((i = 0; i < runs; i++)); do "$@" >/dev/null; done
  end=$(date +%s%N)
  printf '%-40s %8.1f ms/run (%d runs)\n' "$label" "$(( (end - start) / runs ))e-6" "$runs"
}
echo "== command-line start-up"
bench_start "node -e ''  (baseline)" node -e ''
bench_start "pilot-agent version" bin/pilot-agent version
bench_start "pilot-agent mesh-iptables --help" bin/pilot-agent mesh-iptables --help
bench_start "pilot-agent completion bash" bin/pilot-agent completion bash
