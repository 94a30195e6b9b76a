# Shell functions shared by the benches (sourced). They expect `pids` (an array of the PIDs to end
# on exit) and, for start_nginx, `work` (a scratch directory).
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

# nginx_static_conf DIR LISTEN: one worker serving $work/www (the 1 KiB file) on LISTEN.
nginx_static_conf() {
  { nginx_common "$1"; cat <<EOF
  sendfile on;
  open_file_cache max=16;
  default_type text/html;
  server { listen $2; root $work/www; }
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
# appended to the caller's associative arrays rps, p50, p99, sent and errs (by setup).
record_wrk() {
  rps[$1]+="$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' <<< "$2") "
  p50[$1]+="$(to_ms "$(awk '$1 == "50%" { print $2 }' <<< "$2")") "
  p99[$1]+="$(to_ms "$(awk '$1 == "99%" { print $2 }' <<< "$2")") "
  sent[$1]=$(( ${sent[$1]:-0} + $(awk '/requests in/ { print $1 }' <<< "$2") ))
  errs[$1]+=$(awk '/Socket errors|Non-2xx/ { sub(/^ +/, ""); printf "%s; ", $0 }' <<< "$2")
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

# Tools: wrk (load), nginx (the peer service and the reference proxy), iproute2, iptables, setpriv,
# taskset, openssl (the mTLS bench's certificates).
ensure_bench_tools() {
  export PATH="$PATH:/usr/sbin:/sbin"
  local cmd missing=()
  declare -A wanted=([wrk]=wrk [nginx]=nginx [ip]=iproute2 [iptables]=iptables [setpriv]=util-linux [taskset]=util-linux [openssl]=openssl)
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

# bench_preamble NAME: what every data-plane bench does first. Not root: says so and exits 0 (the
# benches make network namespaces); no build beside $agent (agent_root): exits 1. Then the tools,
# `node`, and the CPU pinning.
bench_preamble() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "$1: skipped (needs root: it makes network namespaces and applies capture rules in them)"
    exit 0
  fi
  if [ ! -e "$agent_root/dist/src/cli/main.js" ]; then
    echo "$1: no build next to $agent (run make build)" >&2
    exit 1
  fi
  ensure_bench_tools
  node=$(command -v node)
  set_pinning
}
