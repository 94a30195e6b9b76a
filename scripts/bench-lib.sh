# Shell functions shared by the benches (sourced). They expect `pids` (an array of the PIDs to end
# on exit) and, for start_nginx, `work` (a scratch directory); bench_setup makes both.
alive() { # exists and is not a zombie
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
stop_pids() { # TERM, up to 8 s (the sidecar drains), then KILL; each by its own PID
  local pid i any
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < 80; i++)); do
    any=0
    for pid in "$@"; do alive "$pid" && any=1; done
    [ $any -eq 0 ] && break
    sleep 0.1
  done
  for pid in "$@"; do if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi; done
}
forget() { # stopped PIDs leave the list (a reused PID is never signalled)
  local keep=() p q
  for p in "${pids[@]}"; do
    for q in "$@"; do [ "$p" = "$q" ] && continue 2; done
    keep+=("$p")
  done
  pids=(${keep[@]+"${keep[@]}"})
}

wait_port() { # ns host port: until a TCP connect succeeds (10 s)
  local i
  for ((i = 0; i < 100; i++)); do
    ip netns exec "$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench: nothing listens on $2:$3 in $1" >&2
  return 1
}
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; } # utime + stime
stime_of() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $13 }'; } # stime: system calls, and the network stack they run
rss_mib() { awk -v f="${2:-VmRSS}" '$1 == f ":" { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
now_ns() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

nginx_common() { # prefix dir
  cat <<EOF
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  client_body_temp_path $1/body;
  proxy_temp_path $1/proxy;
  fastcgi_temp_path $1/fastcgi;
  uwsgi_temp_path $1/uwsgi;
  scgi_temp_path $1/scgi;
EOF
}

# nginx_static_conf DIR LISTEN [DIRECTIVES]: one worker serving $work/www (the 1 KiB file) on LISTEN
# (e.g. "8080", or "8080 http2" for h2c), DIRECTIVES added to its server block.
nginx_static_conf() {
  { nginx_common "$1"; cat <<EOF
  sendfile on;
  open_file_cache max=16;
  default_type text/html;
  server { listen $2; root $work/www; ${3:-} }
}
EOF
  } > "$1/nginx.conf"
}

# nginx_proxy_conf DIR LISTEN UPSTREAM: one worker as a keep-alive reverse proxy from LISTEN to UPSTREAM.
nginx_proxy_conf() {
  { nginx_common "$1"; cat <<EOF
  upstream backend { server $3; keepalive 64; keepalive_requests 1000000; keepalive_timeout 300s; }
  server {
    listen $2;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
EOF
  } > "$1/nginx.conf"
}

start_nginx() { # ns dir pin... ; sets $started (master), adds master and worker to pids
  local ns=$1 dir=$2 i w=
  shift 2
  ip netns exec "$ns" "$@" nginx -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" > /dev/null 2>&1 &
  started=$!
  pids+=("$started")
  for ((i = 0; i < 50 && ${#w} == 0; i++)); do
    w=$(awk '{ print $1 }' "/proc/$started/task/$started/children" 2>/dev/null) || true
    [ -n "$w" ] || sleep 0.1
  done
  [ -n "$w" ] || { echo "bench: nginx did not start in $ns:" >&2; cat "$dir/error.log" >&2; exit 1; }
  worker=$w
  pids+=("$worker")
}

to_ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'; }

# record_wrk SETUP OUTPUT: a `wrk --latency` run's req/s, p50 and p99 (ms), requests sent and errors,
# appended to the caller's associative arrays rps, p50, p99, sent and errs (by setup); when measure
# counted a proxy's CPU over the run, its CPU per request too (note_cpu).
record_wrk() {
  local n
  n=$(awk '/requests in/ { print $1 }' <<< "$2")
  rps[$1]+="$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' <<< "$2") "
  p50[$1]+="$(to_ms "$(awk '$1 == "50%" { print $2 }' <<< "$2")") "
  p99[$1]+="$(to_ms "$(awk '$1 == "99%" { print $2 }' <<< "$2")") "
  sent[$1]=$(( ${sent[$1]:-0} + n ))
  errs[$1]+=$(awk '/Socket errors|Non-2xx/ { sub(/^ +/, ""); printf "%s; ", $0 }' <<< "$2")
  note_cpu "$1" "$n"
}

# record_h2load SETUP OUTPUT LOG: an `h2load -D` run's req/s (over the measured duration, warm-up
# excluded), p50 and p99 (ms) and the requests that succeeded, appended to the caller's rps, p50, p99
# and sent (by setup); failures into errs. h2load itself prints only min/max/mean/sd of "time for
# request", so the percentiles come from its --log-file (one line per request of the measured
# duration: start, status, µs to the end of the response; h2load appends, so LOG is removed here).
# When measure counted a proxy's CPU over the run, its CPU per request too: the run's CPU time covers
# h2load's warm-up, so it is divided by the requests the measured rate makes over the whole run.
record_h2load() {
  local pct rate
  rate=$(awk '/^finished in/ { printf "%.0f", $4 }' <<< "$2")
  rps[$1]+="$rate "
  pct=$(cut -f3 "$3" | sort -n | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "0 0"; else printf "%.2f %.2f", v[int((NR - 1) * 0.50) + 1] / 1000, v[int((NR - 1) * 0.99) + 1] / 1000 }')
  rm -f "$3"
  p50[$1]+="${pct% *} " p99[$1]+="${pct#* } "
  sent[$1]=$(( ${sent[$1]:-0} + $(awk '/^requests:/ { print $8 }' <<< "$2") ))
  errs[$1]+=$(awk '/^requests:/ { bad = ($8 == 0 || $10 > 0) } /^(requests|status codes):/ && bad { printf "%s; ", $0 }' <<< "$2")
  note_cpu "$1" "$(awk -v r="$rate" -v ns="${run_ns:-0}" 'BEGIN { printf "%.0f", r * ns / 1e9 }')"
}

# setup_medians SETUP...: the medians over the rounds, into the caller's m_rps, m_p50 and m_p99.
setup_medians() {
  local s
  # shellcheck disable=SC2086 # the per-round lists split on spaces
  for s in "$@"; do
    m_rps[$s]=$(printf '%.0f' "$(median ${rps[$s]})")
    m_p50[$s]=$(printf '%.2f' "$(median ${p50[$s]})") m_p99[$s]=$(printf '%.2f' "$(median ${p99[$s]})")
  done
}

# round_summary SETUP...: each setup's req/s and p99 in the last round, for a "round N:" line.
round_summary() {
  local s
  for s in "$@"; do printf '%s %s req/s (p99 %s ms)  ' "$s" "$(last "${rps[$s]}")" "$(last "${p99[$s]}")"; done
}
# error_notes SETUP...: a note per setup whose runs had errors.
error_notes() {
  local s
  for s in "$@"; do
    if [ -n "${errs[$s]:-}" ]; then echo "note: $s: ${errs[$s]}"; fi
  done
}

# measure SETUP PIDS CMD...: runs CMD, its stdout into $out; adds the CPU time of PIDS (one PID or
# several, space-separated: the proxy processes; none if empty) and the wall time to the caller's
# cpu_ticks[SETUP] and cpu_ns[SETUP]. Of that CPU time, the kernel's share (stime) goes to
# sys_ticks[SETUP]. This run's own figures stay for note_cpu: run_ticks and run_sys (empty without
# PIDS), run_ns, and each PID's CPU ticks in run_ticks_of[PID].
declare -A run_ticks_of
measure() {
  local s=$1 procs=$2 p t0 t1
  local -A c0 k0
  shift 2
  for p in $procs; do c0[$p]=$(ticks "$p") k0[$p]=$(stime_of "$p"); done
  t0=$(now_ns)
  out=$("$@")
  t1=$(now_ns)
  run_ticks='' run_sys='' run_ns=$((t1 - t0))
  for p in $procs; do
    run_ticks_of[$p]=$(( $(ticks "$p") - c0[$p] ))
    run_ticks=$(( ${run_ticks:-0} + run_ticks_of[$p] ))
    run_sys=$(( ${run_sys:-0} + $(stime_of "$p") - k0[$p] ))
  done
  cpu_ticks[$s]=$(( ${cpu_ticks[$s]:-0} + ${run_ticks:-0} ))
  cpu_ns[$s]=$(( ${cpu_ns[$s]:-0} + run_ns ))
  sys_ticks[$s]=$(( ${sys_ticks[$s]:-0} + ${run_sys:-0} ))
}
# note_cpu SETUP COUNT: the CPU time measure counted over the last run, per COUNT (the requests the
# load generator completed, or MiB), user and kernel apart, in µs, appended to the caller's per-round
# lists usr_us[SETUP] and sys_us[SETUP]; nothing if measure counted no process or COUNT is 0.
note_cpu() {
  if [ -z "${run_ticks:-}" ] || [ "${2:-0}" -le 0 ]; then return 0; fi
  usr_us[$1]+="$(us_per_request $(( run_ticks - run_sys )) "$2") "
  sys_us[$1]+="$(us_per_request "$run_sys" "$2") "
  run_ticks=''
}
# run_wrk SETUP [WRK-ARG...]: wrk -t$threads -c$conns (and WRK-ARGs) from ns_of[SETUP] to url_of[SETUP]
# on the load side's CPU: a warm-up of $warmup s, then $duration s measured (measure: the CPU of
# proxy_of[SETUP], one PID or several) and recorded (record_wrk). A caller may set run_seconds (the
# measured time instead of $duration) and no_warmup=1 (the proxy is warm from the run just before).
run_wrk() {
  local s=$1
  shift
  local wrk=(ip netns exec "${ns_of[$s]}" ${pin_load[@]+"${pin_load[@]}"} wrk -t"$threads" -c"$conns" "$@")
  if [ "${no_warmup:-0}" != 1 ]; then "${wrk[@]}" -d"${warmup}s" "${url_of[$s]}" > /dev/null; fi
  measure "$s" "${proxy_of[$s]:-}" "${wrk[@]}" -d"${run_seconds:-$duration}s" --latency "${url_of[$s]}"
  record_wrk "$s" "$out"
}
core_pct() { awk -v c="$1" -v hz="$(getconf CLK_TCK)" -v ns="$2" 'BEGIN { printf "%.0f%%", 100 * c / hz / (ns / 1e9) }'; } # TICKS NS
cpu_pct() { core_pct "${cpu_ticks[$1]}" "${cpu_ns[$1]}"; } # SETUP: what measure counted, as % of one core
# SETUP: the proxy's CPU time per request over the measured runs (what measure counted / sent), in µs.
cpu_us_per_request() { us_per_request "${cpu_ticks[$1]}" "${sent[$1]}"; }
us_per_request() { awk -v c="$1" -v hz="$(getconf CLK_TCK)" -v n="$2" 'BEGIN { if (n > 0) printf "%.1f", c / hz / n * 1e6; else print "n/a" }'; } # TICKS REQUESTS
# SETUP: that CPU time per request split where it ran: "K kernel + U user" (µs). The kernel's share is
# the system calls and, on loopback and veth, the receiving side's network stack run in them; the
# user share is node (V8, libuv, OpenSSL) and our code, or nginx's.
cpu_split_per_request() {
  printf '%s kernel + %s user' "$(us_per_request "${sys_ticks[$1]:-0}" "${sent[$1]}")" \
    "$(us_per_request "$(( ${cpu_ticks[$1]} - ${sys_ticks[$1]:-0} ))" "${sent[$1]}")"
}

# compare_builds LABEL SETUP [UNIT [RATE]]: at the end of a bench, SETUP's figures for each build (SETUP,
# SETUP@base): the CPU per UNIT ("request"; note_cpu's per-round values: their medians, user + kernel,
# and each round's), throughput in RATE ("req/s") and p99 (medians of the rounds); with a baseline, the
# difference new - baseline (µs and % of the baseline's).
compare_builds() {
  local label=$1 s=$2 unit=${3:-request} rate=${4:-req/s} b k n cpu=() rounds=() tput=() lat=()
  local -A total med_rps med_p99
  # shellcheck disable=SC2086 # the per-round lists split on spaces
  for b in "${builds[@]}"; do
    k=$(of_build "$s" "$b") n=$(build_name "$b")
    if [ -n "${usr_us[$k]:-}" ]; then
      rounds+=("$n $(sum_lists "${usr_us[$k]}" "${sys_us[$k]}")")
      total[$b]=$(median_of 1 $(sum_lists "${usr_us[$k]}" "${sys_us[$k]}"))
      cpu+=("$n ${total[$b]} µs (user $(median_of 1 ${usr_us[$k]}) + sys $(median_of 1 ${sys_us[$k]}))")
    else
      cpu+=("$n n/a")
    fi
    if [ -n "${rps[$k]:-}" ]; then med_rps[$b]=$(median_of 0 ${rps[$k]}); tput+=("$n ${med_rps[$b]} $rate"); fi
    if [ -n "${p99[$k]:-}" ]; then med_p99[$b]=$(median_of 2 ${p99[$k]}); lat+=("$n ${med_p99[$b]} ms"); fi
  done
  if [ -n "${total[new]:-}" ] && [ -n "${total[base]:-}" ]; then
    cpu+=("$(awk -v a="${total[new]}" -v b="${total[base]}" 'BEGIN { printf "%+.1f µs (%+.0f%%)", a - b, 100 * (a - b) / b }')")
  fi
  if [ -n "${med_rps[base]:-}" ]; then
    tput[-1]+=" ($(awk -v a="${med_rps[new]:-0}" -v b="${med_rps[base]}" 'BEGIN { if (b > 0) printf "%+.0f%%", 100 * (a - b) / b; else print "n/a" }'))"
  fi
  if [ -n "${med_p99[base]:-}" ]; then lat[-1]+=" ($(awk -v a="${med_p99[new]:-0}" -v b="${med_p99[base]}" 'BEGIN { printf "%+.2f ms", a - b }'))"; fi
  echo "$label: CPU/$unit $(join_by ', ' "${cpu[@]}")"
  [ ${#rounds[@]} -eq 0 ] || echo "    per round, µs: $(join_by '; ' "${rounds[@]}")"
  [ ${#tput[@]} -eq 0 ] || echo "    throughput $(join_by ', ' "${tput[@]}")${lat[0]:+; p99 $(join_by ', ' "${lat[@]}")}"
}
sum_lists() { awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x); split(b, y); for (i = 1; i <= n; i++) printf "%.1f%s", x[i] + y[i], (i < n) ? " " : "" }'; }
median_of() { local d=$1; shift; printf "%.${d}f" "$(median "$@")"; } # DECIMALS VALUE...
join_by() { local sep=$1 out=$2; shift 2; while [ $# -gt 0 ]; do out+="$sep$1"; shift; done; echo "$out"; } # SEP ITEM...
# comparison_header: the title of the lines compare_builds prints.
comparison_header() {
  echo
  if [ ${#builds[@]} -gt 1 ]; then
    echo "== new vs baseline, alternated round by round: CPU per request = the proxies' user + kernel time (/proc/PID/stat) over the requests the load generator completed; medians of the rounds"
  else
    echo "== CPU per request = the proxies' user + kernel time (/proc/PID/stat) over the requests the load generator completed; medians of the rounds (PILOT_AGENT_BASELINE adds a baseline)"
  fi
}

verdict() { if [ "$1" = 1 ]; then echo "met"; else echo "MISSED"; fi; }

last() { eval "set -- \$1"; [ $# -gt 0 ] && echo "${!#}"; } # the last word of a list
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# With BENCH_PIN (default 1) and 2+ CPUs: the proxy under test on CPU 1, the load side (wrk, the
# peer) on CPU 0; sets the arrays pin_load and pin_proxy (empty: no pinning).
set_pinning() {
  pin_load=() pin_proxy=()
  if [ "${BENCH_PIN:-1}" != 0 ] && [ "$(nproc)" -ge 2 ]; then
    pin_load=(taskset -c 0) pin_proxy=(taskset -c 1)
  fi
}

# Tools: wrk and h2load (load: HTTP/1.1, HTTP/2), nginx (the peer service and the reference proxy),
# haproxy and nghttpx (the HTTP/2 reference proxies), iproute2, iptables, setpriv, taskset, openssl (the mTLS bench's
# certificates).
ensure_bench_tools() {
  export PATH="$PATH:/usr/sbin:/sbin"
  local cmd missing=()
  declare -A wanted=([wrk]=wrk [h2load]=nghttp2-client [nginx]=nginx [haproxy]=haproxy [nghttpx]=nghttp2-proxy [ip]=iproute2 [iptables]=iptables [setpriv]=util-linux [taskset]=util-linux [openssl]=openssl)
  for cmd in "${!wanted[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${wanted[$cmd]}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "bench: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
  fi
}

# The shape of a data-plane bench's runs: BENCH_ROUNDS rounds (3), each run measured for BENCH_DURATION s
# (5) after BENCH_WARMUP s of the same load (1).
rounds=${BENCH_ROUNDS:-3}
duration=${BENCH_DURATION:-5}
warmup=${BENCH_WARMUP:-1}

# The build under test: PILOT_AGENT_BIN (default bin/pilot-agent of this checkout; another tree's bin/
# works), absolute (the sidecars run in directories of their own).
agent=$(realpath "${PILOT_AGENT_BIN:-$PWD/bin/pilot-agent}")

# The builds each data-plane bench runs: "new", the build under test ($agent), and, when
# PILOT_AGENT_BASELINE names another built checkout (a directory: its bin/pilot-agent; make one with
# `git worktree add /tmp/base REV && (cd /tmp/base && make build)`), "base". The baseline's proxies run
# beside the new ones, pinned and loaded alike, and every setup of the new build is followed in each
# round by the same setup of the baseline (SETUP@base): round 1 new, round 1 baseline, round 2 new...
declare -A agent_of=([new]=$agent)
builds=(new)
if [ -n "${PILOT_AGENT_BASELINE:-}" ]; then
  agent_of[base]=$(realpath -m "$PILOT_AGENT_BASELINE/bin/pilot-agent")
  builds+=(base)
fi
# The per-round CPU per request of each setup, user and kernel (µs; note_cpu, compare_builds).
declare -A usr_us sys_us

# check_builds NAME: exits 1, saying what to do, unless every build is built (its dist/ beside bin/).
check_builds() {
  local b root
  for b in "${builds[@]}"; do
    root=$(dirname "$(dirname "${agent_of[$b]}")")
    [ -e "$root/dist/src/cli/main.js" ] && continue
    if [ "$b" = base ]; then
      echo "$1: PILOT_AGENT_BASELINE=$PILOT_AGENT_BASELINE holds no built checkout (no $root/dist/src/cli/main.js);" \
        "make one with: git worktree add /tmp/base REV && (cd /tmp/base && make build)" >&2
    else
      echo "$1: no build next to ${agent_of[$b]} (run make build)" >&2
    fi
    exit 1
  done
}
# as_build BUILD CMD...: CMD (a function of these scripts) with $agent set to BUILD's bin/pilot-agent,
# e.g. `as_build base start_sidecar NS LOG`: start_sidecar and what it calls (apply_capture,
# wait_ready) run the baseline's (a function sees its caller's locals).
as_build() {
  local agent=${agent_of[$1]}
  shift
  "$@"
}
# and_baseline SETUP...: each SETUP, then SETUP@base when a baseline runs (one per line, for a list).
and_baseline() {
  local s
  for s in "$@"; do
    echo "$s"
    if [ ${#builds[@]} -gt 1 ]; then echo "$s@base"; fi
  done
}
of_build() { if [ "$2" = base ]; then echo "$1@base"; else echo "$1"; fi; } # SETUP BUILD: that build's setup
build_of() { if [[ $1 == *@base ]]; then echo base; else echo new; fi; }      # SETUP: the build it runs
# builds_banner: the line a bench prints under its title about the builds it runs.
builds_banner() {
  local b line='   builds:'
  for b in "${builds[@]}"; do
    line+=" $(build_name "$b") ${agent_of[$b]} ($(revision_of "${agent_of[$b]}")),"
  done
  if [ ${#builds[@]} -gt 1 ]; then line+=' alternated round by round'
  elif [ -n "${PILOT_AGENT_BASELINE:-}" ]; then line+=' the baseline left out of this bench (see the note at the end)'
  else line+=' no baseline (PILOT_AGENT_BASELINE)'; fi
  echo "$line"
}
build_name() { if [ "$1" = base ]; then echo baseline; else echo new; fi; }
revision_of() { # BIN: the revision its build was made from (dist/build-info.json), abbreviated
  sed -n 's/.*"revision": *"\([0-9a-f]\{7\}\).*/\1/p' "$(dirname "$(dirname "$1")")/dist/build-info.json" 2> /dev/null | grep . || echo '?'
}

# bench_preamble NAME: what every data-plane bench does first. Not root: says so and exits 0 (the
# benches make network namespaces); a build missing (check_builds): exits 1. Then the tools, `node`,
# and the CPU pinning.
bench_preamble() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "$1: skipped (needs root: it makes network namespaces and applies capture rules in them)"
    exit 0
  fi
  check_builds "$1"
  ensure_bench_tools
  node=$(command -v node)
  set_pinning
}

# bench_setup NAME NS...: the scratch directory $work (mode 755: nginx workers run as nobody, the
# sidecars as 1337), an empty `pids`, traps that end those PIDs and remove the namespaces and $work on
# exit, failure or Ctrl-C; then the namespaces NS, loopback up.
bench_setup() {
  bench_name=$1
  shift
  bench_namespaces=("$@")
  work=$(mktemp -d "/tmp/pa-$bench_name.XXXXXX")
  chmod 755 "$work"
  pids=()
  trap bench_cleanup EXIT
  trap 'echo "$bench_name: interrupted" >&2; exit 130' INT TERM
  local ns
  for ns in "$@"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
}
bench_cleanup() {
  trap - EXIT INT TERM
  [ ${#pids[@]} -gt 0 ] && stop_pids "${pids[@]}"
  local ns
  for ns in "${bench_namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
}

# veth_link NS IF ADDR PEER_NS PEER_IF PEER_ADDR: a veth pair between two namespaces on one /24;
# NS's default route goes to PEER_ADDR.
veth_link() {
  ip -n "$1" link add "$2" type veth peer name "$5" netns "$4"
  ip -n "$1" addr add "$3/24" dev "$2"
  ip -n "$4" addr add "$6/24" dev "$5"
  ip -n "$1" link set "$2" up
  ip -n "$4" link set "$5" up
  ip -n "$1" route add default via "$6"
}

# start_sidecar NS LOG [ENV ARG...]: the capture rules (`pilot-agent mesh-iptables`) in NS, then
# `pilot-agent proxy` as uid 1337 on the proxy's CPU, through `env ENV ARG...` (e.g. -C DIR VAR=value),
# both logging to LOG; waits until it is ready (else shows LOG and exits 1). Sets $started (the node
# process: ip netns exec, taskset, setpriv and env exec in turn) and adds it to pids. It runs as users
# run it, bin/pilot-agent as an executable (the node flags of its first line included); with
# BENCH_SIDECAR_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") as `node FLAGS-OF-ITS-FIRST-LINE
# BENCH_SIDECAR_NODE_ARGS bin/pilot-agent`. --concurrency from BENCH_CONCURRENCY (1; "default": no flag).
start_sidecar() {
  local ns=$1 log=$2 run=("$agent") conc=()
  shift 2
  # shellcheck disable=SC2046,SC2086,SC2206,SC2207 # flags, split on spaces
  [ -z "${BENCH_SIDECAR_NODE_ARGS:-}" ] || run=("$node" $(shebang_flags "$agent") ${BENCH_SIDECAR_NODE_ARGS} "$agent")
  [ "${BENCH_CONCURRENCY:-1}" = default ] || conc=(--concurrency "${BENCH_CONCURRENCY:-1}")
  apply_capture "$ns" "$log"
  ip netns exec "$ns" ${pin_proxy[@]+"${pin_proxy[@]}"} setpriv --reuid=1337 --regid=1337 --clear-groups -- \
    env "$@" "${run[@]}" proxy ${conc[@]+"${conc[@]}"} --log_target stderr >> "$log" 2>&1 &
  started=$!
  pids+=("$started")
  wait_ready "$ns" "$log" "the sidecar in $ns"
}
# wait_ready NS LOG WHAT: until the agent in NS answers ready (`pilot-agent wait`, 15 s); else says
# WHAT did not become ready, shows LOG and exits 1.
wait_ready() {
  if ! ip netns exec "$1" "$agent" wait --periodMillis 100 --timeoutSeconds 15 > /dev/null 2>&1; then
    echo "$bench_name: $3 did not become ready:" >&2
    cat "$2" >&2
    exit 1
  fi
}
# apply_capture NS LOG: the sidecar's capture rules in NS (`pilot-agent mesh-iptables`, every port
# both ways, the agent's own ports excluded), its output into LOG; exits 1 if they fail.
apply_capture() {
  if ! ip netns exec "$1" "$agent" mesh-iptables -i '*' -b '*' -d 15020,15021,15090 > "$2" 2>&1; then
    echo "$bench_name: the capture rules failed in $1:" >&2
    cat "$2" >&2
    exit 1
  fi
}
# shebang_flags FILE: the node flags on a script's first line (`#!/usr/bin/env -S node FLAGS`).
shebang_flags() { sed -n '1s/^#!.*[ /]node *//p' "$1"; }

# outbound_http_requests NS: how many outbound HTTP requests the sidecar in NS counted (empty if its
# stats could not be read). After HTTP/2 load, 0 says it relayed HTTP/2 as opaque TCP (older builds).
outbound_http_requests() {
  ip netns exec "$1" "$agent" request GET stats 2>/dev/null | awk -F': ' '$1 == "http.outbound.downstream_rq_total" { print $2 }' || true
}

# stop_sidecar NS PID: the quick way (POST quitquitquit), so that a --cpu-prof profile is written now.
stop_sidecar() {
  ip netns exec "$1" "$agent" request POST quitquitquit > /dev/null 2>&1 || true
  stop_pids "$2"
  forget "$2"
}
