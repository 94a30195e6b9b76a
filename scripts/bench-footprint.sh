#!/usr/bin/env bash
# `make bench`, the footprint: how fast the sidecar starts and how much memory it holds, idle, after a
# load and once the load is over, as a new user runs it (bin/pilot-agent as an executable, its shebang
# and all). Two configurations in one run: "default" (no --concurrency flag: the agent's default) and
# "--concurrency 1".
#   start to ready : from the spawn of the sidecar to the first 200 from 127.0.0.1:15021/healthz/ready
#                    in the pod. A small node script spawns the sidecar itself and polls every 5 ms
#                    (node:http, one request at a time), so neither its own start-up nor a shell's is
#                    counted; the figure includes the exec chain (taskset, setpriv, env, node). Median of
#                    BENCH_STARTS starts per configuration, the configurations interleaved; each
#                    instance is ended by POST /quitquitquit, then by its PID. Beside it, the sidecar's
#                    CPU time until ready (utime + stime, every thread; 10 ms ticks): a wall time far
#                    above it means the sidecar waited, e.g. for its CPU while something else ran there.
#   RSS            : VmRSS of the sidecar's process (every worker thread included; RssAnon = private,
#                    RssFile = mostly the node binary, shared), on the last instance of each
#                    configuration: idle (ready + 3 s), right after the load, every 5 s for 30 s after,
#                    and the peak (VmHWM) over the instance's life. Beside it, the main thread's V8
#                    heap (used/total) and external memory (Buffers), from the agent's metrics on 15020:
#                    anon RSS that grows beyond them is native memory, e.g. what malloc keeps once freed.
#   the load       : at the same time, BENCH_REQUESTS keep-alive requests (h2load --h1 -c 32 -t 1) for a
#                    1 KiB file from nginx (1 worker) in the peer, and BENCH_UPLOADS parallel uploads (curl
#                    POST, streamed from a file) of BENCH_UPLOAD_MB MB each to a node sink in the peer that
#                    answers 200 with the byte count (each answer is checked); all sent by uid 0 in the pod,
#                    so captured to the sidecar (15001).
# With 2+ CPUs the sidecar gets CPU 1 to itself and the load side (poller, h2load, curl, the peer) CPU 0.
#
# Topology (made here, removed on exit, failure or Ctrl-C; processes ended by their own PIDs):
#   captured pod 198.19.4.2 --veth-- 198.19.4.1 peer (nginx :8080, upload sink :8082)
#
#   scripts/bench-footprint.sh      (needs root; without it, says so and exits 0)
# Environment: PILOT_AGENT_BIN (default bin/pilot-agent; another tree's bin/ works), BENCH_STARTS (5),
# BENCH_REQUESTS (100000), BENCH_UPLOADS (8), BENCH_UPLOAD_MB (50; MB = 10^6 bytes), BENCH_PIN (1; 0 = no
# CPU pinning), BENCH_SIDECAR_NODE_ARGS (node flags: the sidecar then runs as `node FLAGS-OF-ITS-FIRST-LINE FLAGS bin/pilot-agent`).
# Targets, reported and never fatal (MB = 10^6 bytes, MiB * 1.048576): start to ready < 300 ms (median);
# RSS idle <= 60 MB; RSS after the load <= 80 MB; RSS 30 s after the load back near idle, defined here as
# <= idle + 10%.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
starts=${BENCH_STARTS:-5}
requests=${BENCH_REQUESTS:-100000}
uploads=${BENCH_UPLOADS:-8}
upload_mb=${BENCH_UPLOAD_MB:-50}
[ "$starts" -ge 1 ] || { echo "bench-footprint: BENCH_STARTS must be at least 1" >&2; exit 1; }

bench_preamble bench-footprint
command -v curl > /dev/null 2>&1 || { export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq curl > /dev/null; }

# ---- namespaces
pod="pa-fp-pod-$$" # captured: rules + sidecar
peer="pa-fp-peer-$$"
bench_setup bench-footprint "$pod" "$peer"
# A sidecar being spawned is known by the PID file its poller writes, until it joins pids.
trap 'adopt_spawned; bench_cleanup' EXIT
adopt_spawned() {
  local p
  p=$(cat "$work/spawned.pid" 2> /dev/null) || return 0
  rm -f "$work/spawned.pid"
  if [ -n "$p" ]; then pids+=("$p"); fi
}
veth_link "$pod" pod0 198.19.4.2 "$peer" peer0 198.19.4.1

# ---- files
mkdir -p "$work/www" "$work/peer"
head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k.html"
nginx_static_conf "$work/peer" 8080
upload_bytes=$((upload_mb * 1000000))
head -c "$upload_bytes" /dev/zero > "$work/upload.bin"
cat > "$work/sink.cjs" <<'EOF'
// Reads each request's whole body and answers 200 with its length in bytes.
require('node:http').createServer((req, res) => {
  let n = 0;
  req.on('data', (d) => { n += d.length; });
  req.on('end', () => res.end(String(n)));
}).listen(8082);
EOF
cat > "$work/spawn-ready.cjs" <<'EOF'
// PID_FILE LOG CMD...: spawns CMD (the sidecar; stdout and stderr to LOG), writes its PID to PID_FILE,
// polls http://127.0.0.1:15021/healthz/ready every 5 ms, one request at a time, and at the first 200
// prints "PID MS": the ms since the spawn. Exits 1 if the sidecar ends first or after 15 s. The sidecar
// outlives this script.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const [pidFile, logFile, ...cmd] = process.argv.slice(2);
const log = fs.openSync(logFile, 'a');
const t0 = performance.now();
const child = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', log, log] });
fs.writeFileSync(pidFile, String(child.pid));
child.on('exit', (code, signal) => { console.error(`the sidecar ended (${signal ?? code}) before it was ready`); process.exit(1); });
setTimeout(() => { console.error('the sidecar was not ready in 15 s'); process.exit(1); }, 15000);
function poll() {
  const sent = performance.now();
  const again = () => setTimeout(poll, Math.max(0, 5 - (performance.now() - sent)));
  const req = http.get({ host: '127.0.0.1', port: 15021, path: '/healthz/ready', agent: false }, (res) => {
    if (res.statusCode === 200) {
      console.log(`${child.pid} ${(performance.now() - t0).toFixed(1)}`);
      process.exit(0);
    }
    res.resume();
    res.on('end', again);
  });
  req.setTimeout(1000, () => req.destroy(new Error('timeout')));
  req.on('error', again);
}
poll();
EOF

# ---- the peer, and the capture rules (once: they outlive every sidecar instance)
start_nginx "$peer" "$work/peer" ${pin_load[@]+"${pin_load[@]}"}
ip netns exec "$peer" ${pin_load[@]+"${pin_load[@]}"} "$node" "$work/sink.cjs" & pids+=($!)
wait_port "$peer" 198.19.4.1 8080
wait_port "$peer" 198.19.4.1 8082
if ! ip netns exec "$pod" "$agent" mesh-iptables -i '*' -b '*' -d 15020,15021,15090 > "$work/iptables.log" 2>&1; then
  echo "bench-footprint: the capture rules failed in $pod:" >&2
  cat "$work/iptables.log" >&2
  exit 1
fi

# ---- measurements
configs=(default c1)
declare -A label_of=([default]="default (no flag)" [c1]="--concurrency 1")
declare -A flags_of=([default]="" [c1]="--concurrency 1")
declare -A ready_ms ready_cpu workers rss_idle anon_idle file_idle rss_load anon_load rss_30 anon_30 rss_peak series heaps load_notes

# spawn_sidecar CONFIG LOG: a sidecar as uid 1337 on the proxy's CPU, spawned by the poller (on the load
# CPU); sets $started (its PID, added to pids) and appends the ms to ready to ready_ms[CONFIG].
spawn_sidecar() {
  local c=$1 log=$2 out cmd
  cmd=("$agent")
  # shellcheck disable=SC2046,SC2086,SC2206,SC2207 # node flags, split on spaces
  if [ -n "${BENCH_SIDECAR_NODE_ARGS:-}" ]; then cmd=("$node" $(shebang_flags "$agent") $BENCH_SIDECAR_NODE_ARGS "$agent"); fi
  # shellcheck disable=SC2086 # flags_of: the configuration's flags, split on spaces
  if ! out=$(ip netns exec "$pod" ${pin_load[@]+"${pin_load[@]}"} "$node" "$work/spawn-ready.cjs" "$work/spawned.pid" "$log" \
    ${pin_proxy[@]+"${pin_proxy[@]}"} setpriv --reuid=1337 --regid=1337 --clear-groups -- \
    "${cmd[@]}" proxy ${flags_of[$c]} --log_target stderr); then
    echo "bench-footprint: the sidecar (${label_of[$c]}) did not become ready:" >&2
    cat "$log" >&2
    exit 1
  fi
  adopt_spawned
  started=${out% *}
  ready_ms[$c]+="${out#* } "
  # Its CPU time (every thread) until then: far below the wall time when it waited for the CPU.
  ready_cpu[$c]+="$(( $(ticks "$started") * 1000 / $(getconf CLK_TCK) )) "
}

# upload I: one POST of the upload file through the capture; prints "I STATUS BYTES_COUNTED".
upload() {
  local code
  code=$(ip netns exec "$pod" ${pin_load[@]+"${pin_load[@]}"} curl -sS -o "$work/upload$1.out" -w '%{http_code}' \
    -X POST -H 'Content-Type: application/octet-stream' -T "$work/upload.bin" http://198.19.4.1:8082/upload 2> "$work/upload$1.err") || true
  echo "$1 ${code:-000} $(cat "$work/upload$1.out" 2> /dev/null)"
}

# heap: the main thread's V8 heap, used/total, and its external memory (Buffers...), MiB, from the
# agent's Prometheus metrics (15020; no worker thread's).
heap() {
  local m
  m=$(ip netns exec "$pod" ${pin_load[@]+"${pin_load[@]}"} "$agent" request --debug-port 15020 GET stats/prometheus 2> /dev/null) || true
  awk '/^mesh_agent_nodejs_heap_size_used_bytes / { u = $2 } /^mesh_agent_nodejs_heap_size_total_bytes / { t = $2 }
    /^mesh_agent_nodejs_external_memory_bytes / { e = $2 }
    END { if (t) printf "%.1f/%.1f+%.1f", u / 1048576, t / 1048576, e / 1048576; else print "?" }' <<< "$m"
}

# footprint CONFIG PID: the RSS figures of a ready instance, around the load.
footprint() {
  local c=$1 pid=$2 h2 h2rc=0 up i n bad=0 code count
  sleep 3
  rss_idle[$c]=$(rss_mib "$pid") anon_idle[$c]=$(rss_mib "$pid" RssAnon) file_idle[$c]=$(rss_mib "$pid" RssFile)
  heaps[$c]="idle $(heap)"
  workers[$c]=$(ip netns exec "$pod" "$agent" request GET server_info 2> /dev/null | sed -n 's/.*"concurrency": *\([0-9]*\).*/\1/p' | head -1 || true)
  ip netns exec "$pod" ${pin_load[@]+"${pin_load[@]}"} h2load --h1 -n "$requests" -c 32 -t 1 http://198.19.4.1:8080/1k.html > "$work/h2load.out" 2>&1 &
  h2=$!
  up=()
  for ((i = 1; i <= uploads; i++)); do upload "$i" > "$work/upload$i.result" & up+=($!); done
  wait "$h2" || h2rc=$?
  if [ ${#up[@]} -gt 0 ]; then wait "${up[@]}"; fi # (a bare wait would wait for nginx and the sink too)
  rss_load[$c]=$(rss_mib "$pid") anon_load[$c]=$(rss_mib "$pid" RssAnon)
  heaps[$c]+=", after load $(heap)"
  # h2load: every request must have succeeded with a 2xx.
  n=$(awk '/^requests:/ { print ($8 == $2 && $10 == 0 && $12 == 0) ? $8 : -1 }' "$work/h2load.out")
  if [ "${n:--1}" -lt 0 ] || ! grep -Eq "^status codes: $requests 2xx" "$work/h2load.out"; then
    load_notes[$c]+="h2load (exit $h2rc): $(grep -E '^(requests|status codes):' "$work/h2load.out" | tr '\n' ' ' || true); "
  fi
  for ((i = 1; i <= uploads; i++)); do
    read -r _ code count < "$work/upload$i.result" || true
    if [ "${code:-}" != 200 ] || [ "${count:-}" != "$upload_bytes" ]; then
      bad=$((bad + 1))
      load_notes[$c]+="upload $i: HTTP ${code:-?}, counted ${count:-?} bytes of $upload_bytes $(head -c 200 "$work/upload$i.err"); "
    fi
  done
  series[$c]="${rss_load[$c]}"
  for ((i = 0; i < 6; i++)); do
    sleep 5
    series[$c]+=" $(rss_mib "$pid")"
  done
  rss_30[$c]=$(last "${series[$c]}") anon_30[$c]=$(rss_mib "$pid" RssAnon)
  rss_peak[$c]=$(rss_mib "$pid" VmHWM)
  heaps[$c]+=", 30 s later $(heap)"
  echo "   ${label_of[$c]}: ${workers[$c]:-?} worker(s); RSS idle ${rss_idle[$c]} MiB, after load ${rss_load[$c]}, then every 5 s:" \
    "${series[$c]#* } MiB; $((uploads - bad))/$uploads uploads right"
}

echo "== bench-footprint: $agent"
echo "   $starts starts per configuration (${configs[*]}, interleaved); load: $requests requests (h2load --h1 -c 32 -t 1, 1 KiB)" \
  "+ $uploads x $upload_mb MB uploads at once"
echo "   CPU pinning: ${pin_proxy[*]:-none} for the sidecar, ${pin_load[*]:-none} for the load side and the poller"
for ((r = 1; r <= starts; r++)); do
  for c in "${configs[@]}"; do
    spawn_sidecar "$c" "$work/sidecar-$c.log"
    sidecar=$started
    if [ "$r" -eq "$starts" ]; then footprint "$c" "$sidecar"; fi
    stop_sidecar "$pod" "$sidecar"
    sleep 0.5
  done
  printf '   start %d:' "$r"
  for c in "${configs[@]}"; do printf '  %s %s ms (CPU %s ms)' "${label_of[$c]}" "$(last "${ready_ms[$c]}")" "$(last "${ready_cpu[$c]}")"; done
  echo
done

# ---- the table
mb() { awk -v m="$1" 'BEGIN { printf "%.1f", m * 1.048576 }'; } # MiB -> MB
le() { awk -v a="$1" -v b="$2" 'BEGIN { print (a <= b) }'; }
echo
echo "== results: start to ready = median (min-max) of $starts, and the sidecar's CPU time until ready (median);"
echo "   RSS of the last instance, MiB (private/anon + file-backed)"
row() { printf '%-18s %8s %15s %7s %4s %18s %10s %8s %10s\n' "$@"; }
row configuration "ready ms" "(min-max)" "CPU ms" wkrs "RSS idle" "after load" "peak" "30 s later"
declare -A med
for c in "${configs[@]}"; do
  # shellcheck disable=SC2086 # the per-start list splits on spaces
  { med[$c]=$(median ${ready_ms[$c]}); range=$(printf '%s\n' ${ready_ms[$c]} | sort -g | sed -n '1p;$p' | paste -sd-); cpu=$(median ${ready_cpu[$c]}); }
  row "${label_of[$c]}" "${med[$c]}" "($range)" "$cpu" "${workers[$c]:-?}" "${rss_idle[$c]} (${anon_idle[$c]}+${file_idle[$c]})" \
    "${rss_load[$c]}" "${rss_peak[$c]}" "${rss_30[$c]}"
done
for c in "${configs[@]}"; do
  printf '%-18s private/anon RSS: idle %s, after load %s, 30 s later %s MiB; main thread'"'"'s V8 heap used/total+external MiB: %s\n' \
    "${label_of[$c]}" "${anon_idle[$c]}" "${anon_load[$c]}" "${anon_30[$c]}" "${heaps[$c]}"
done
echo
for c in "${configs[@]}"; do
  l=${label_of[$c]}
  near=$(awk -v i="${rss_idle[$c]}" 'BEGIN { printf "%.1f", i * 1.10 }')
  printf '%-18s start to ready  %7s ms       target < 300 ms: %s\n' "$l" "${med[$c]}" "$(verdict "$(awk -v m="${med[$c]}" 'BEGIN { print (m < 300) }')")"
  printf '%-18s RSS idle        %7s MB       target <= 60 MB: %s\n' "$l" "$(mb "${rss_idle[$c]}")" "$(verdict "$(le "$(mb "${rss_idle[$c]}")" 60)")"
  printf '%-18s RSS after load  %7s MB       target <= 80 MB: %s\n' "$l" "$(mb "${rss_load[$c]}")" "$(verdict "$(le "$(mb "${rss_load[$c]}")" 80)")"
  printf '%-18s RSS 30 s later  %7s MiB      target <= idle + 10%% (%s MiB): %s\n' "$l" "${rss_30[$c]}" "$near" "$(verdict "$(le "${rss_30[$c]}" "$near")")"
done
for c in "${configs[@]}"; do
  if [ -n "${load_notes[$c]:-}" ]; then echo "note: ${label_of[$c]}: the load had failures: ${load_notes[$c]}"; fi
done
exit 0
