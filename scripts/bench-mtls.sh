#!/usr/bin/env bash
# `make bench`, the cost of mutual TLS: the same keep-alive HTTP load (wrk) from a client pod to a
# server pod, both with the capture rules (`pilot-agent mesh-iptables`) and a sidecar
# (`pilot-agent proxy`, uid 1337, FILE_MOUNTED_CERTS=true), two ways through the same two sidecars:
#   mtls      : port 8080, which the client's DestinationRule sets to ISTIO_MUTUAL: the client
#               sidecar originates mutual TLS with its certificate, the server sidecar (PeerAuthentication
#               PERMISSIVE, the default) terminates it and checks the client's identity;
#   plaintext : port 8090, which the same DestinationRule sets to DISABLE: plaintext between the sidecars.
# The server app is nginx (one worker) serving a 1 KiB static file on both ports, so the difference
# is the sidecars' TLS. wrk keeps its connections alive and the client sidecar pools its upstream
# connections, so a handshake is paid once per upstream connection, not per request: this measures
# the record layer (encryption both ways) more than the handshakes. Before measuring, the server
# sidecar's `listener.0.0.0.0_15006.mtls.handshake` must grow with a request to 8080 and stay put with
# one to 8090, or the bench fails. The setups run interleaved, in rounds; each figure is the median
# of the rounds, the ratio the median of per-round ratios. With 2+ CPUs the two sidecars share CPU 1
# and the load side (wrk, nginx) gets CPU 0.
#
# The certificates are made here (openssl): an EC P-256 root and, per pod, a leaf whose only name is
# the URI SAN spiffe://cluster.local/ns/default/sa/<client|server>, in <pod dir>/etc/certs.
# With PILOT_AGENT_BASELINE (another built checkout, see bench-lib.sh), a second pair of pods, made
# alike (the same addresses, in namespaces of their own; a copy of the pod dirs; an nginx of its own),
# runs the baseline's two sidecars: setups mtls@base and plaintext@base, each run after the new
# build's in every round; the end of the output compares the two builds (CPU per request of both
# sidecars, each round's, throughput and p99). A baseline that fails the proof below (one without
# mutual TLS between sidecars, or that rejects the DestinationRule) is left out, and the output says so.
#
# Topology (made here, removed on exit, failure or Ctrl-C; processes ended by their own PIDs):
#   client pod 198.19.6.2 --veth-- 198.19.6.3 server pod
#   (baseline) client pod 198.19.6.2 --veth-- 198.19.6.3 server pod
#
#   scripts/bench-mtls.sh           (needs root; without it, says so and exits 0)
# Environment: PILOT_AGENT_BIN (default bin/pilot-agent; another tree's bin/ works),
# PILOT_AGENT_BASELINE (a built checkout to compare with; none by default), BENCH_ROUNDS (3),
# BENCH_DURATION (s per run, 5), BENCH_WARMUP (s, 1), BENCH_CONNECTIONS (32), BENCH_THREADS (1),
# BENCH_PIN (1; 0 = no CPU pinning), BENCH_CONCURRENCY (each sidecar's --concurrency, 1),
# BENCH_SIDECAR_NODE_ARGS (node flags for both sidecars, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof":
# a directory uid 1337 can write; relative paths are the pod dirs, removed on exit).
# For reference, Node's floor of the same path: two byte relays (scripts/node-floor-relay.mjs, no HTTP,
# no policy) in two namespaces of their own (no capture), mutual TLS between them with the pods'
# certificates or plaintext, in front of an nginx like the server pod's; what Node's TLS itself costs
# per request. The relays make one upstream connection per client connection, so each of their runs
# starts with wrk's 32 TLS handshakes (their p99 shows it in short runs); the sidecars pool theirs.
# Target, reported and never fatal: throughput mTLS/plaintext >= 0.85 (mTLS costs at most 15%).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
conns=${BENCH_CONNECTIONS:-32}
threads=${BENCH_THREADS:-1}
target=0.85

bench_preamble bench-mtls

# ---- namespaces: one veth pair, one /24; each pod's default route is the other end. The floor's
# two namespaces (no capture rules, no sidecar) are linked the same way.
client="pa-bench-mtls-client-$$"
server="pa-bench-mtls-server-$$"
fclient="pa-bench-mtls-fclient-$$"
fserver="pa-bench-mtls-fserver-$$"
# pod_of[ROLE]: the namespace of each pod; ROLE client, server, and with a baseline client@base, server@base
declare -A pod_of=([client]=$client [server]=$server [client@base]="pa-bench-mtls-bclient-$$" [server@base]="pa-bench-mtls-bserver-$$")
namespaces=("$client" "$server" "$fclient" "$fserver")
pairs=('') # the suffix of each pair of pods' roles: '' (the new build's), @base
if [ ${#builds[@]} -gt 1 ]; then namespaces+=("${pod_of[client@base]}" "${pod_of[server@base]}") pairs+=(@base); fi
bench_setup bench-mtls "${namespaces[@]}"
for k in "${pairs[@]}"; do
  veth_link "${pod_of[client$k]}" eth0 198.19.6.2 "${pod_of[server$k]}" eth0 198.19.6.3
  ip -n "${pod_of[server$k]}" route add default via 198.19.6.2
done
veth_link "$fclient" eth0 198.19.9.2 "$fserver" eth0 198.19.9.3

# ---- certificates: a root, and a leaf per pod with only its SPIFFE URI SAN
mkdir -p "$work/ca" "$work/www" "$work/nginx" "$work/nginx-floor" "$work/client/etc/certs" "$work/server/etc/certs" "$work/client/etc/mesh/resources"
ca=$work/ca
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$ca/root.key" 2> /dev/null
openssl req -x509 -new -key "$ca/root.key" -sha256 -days 2 -subj "/O=pilot-agent bench/CN=bench root CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$ca/root.pem" 2> /dev/null
for sa in client server; do
  certs=$work/$sa/etc/certs
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$certs/key.pem" 2> /dev/null
  openssl req -new -key "$certs/key.pem" -subj "/O=cluster.local" -out "$ca/$sa.csr" 2> /dev/null
  cat > "$ca/$sa.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = critical, URI:spiffe://cluster.local/ns/default/sa/$sa
EOF
  openssl x509 -req -in "$ca/$sa.csr" -CA "$ca/root.pem" -CAkey "$ca/root.key" -CAcreateserial -sha256 -days 1 \
    -extfile "$ca/$sa.ext" -out "$certs/cert-chain.pem" 2> /dev/null
  cp "$ca/root.pem" "$certs/root-cert.pem"
  openssl verify -CAfile "$certs/root-cert.pem" "$certs/cert-chain.pem" > /dev/null
done

# ---- configuration files
head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k.html"
nginx_static_conf "$work/nginx" 8080 'listen 8090;'
nginx_static_conf "$work/nginx-floor" 127.0.0.1:8080
cat > "$work/client/etc/mesh/resources/mesh.yaml" <<'EOF'
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: server, namespace: default}
spec:
  host: 198.19.6.3
  trafficPolicy:
    portLevelSettings:
    - port: {number: 8080}
      tls: {mode: ISTIO_MUTUAL}
    - port: {number: 8090}
      tls: {mode: DISABLE}
EOF
chown -R 1337:1337 "$work/client" "$work/server"
if [ ${#builds[@]} -gt 1 ]; then
  for sa in client server; do cp -a "$work/$sa" "$work/$sa@base"; done
  mkdir -p "$work/nginx@base"
  nginx_static_conf "$work/nginx@base" 8080 'listen 8090;'
fi
cat > "$work/get.cjs" <<'EOF'
// One GET of URL on a fresh connection; exits 0 on a 200 with BYTES bytes of body, else says why.
const [url, bytes] = process.argv.slice(2);
const req = require('http').get(url, { agent: false, timeout: 10000 }, (res) => {
  let n = 0;
  res.on('data', (d) => { n += d.length; });
  res.on('end', () => {
    if (res.statusCode === 200 && n === Number(bytes)) process.exit(0);
    console.error(`${url}: status ${res.statusCode}, ${n} bytes`);
    process.exit(1);
  });
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', (e) => { console.error(`${url}: ${e.message}`); process.exit(1); });
EOF

# ---- processes
for k in "${pairs[@]}"; do
  start_nginx "${pod_of[server$k]}" "$work/nginx$k" ${pin_load[@]+"${pin_load[@]}"}
  for p in 8080 8090; do wait_port "${pod_of[server$k]}" 127.0.0.1 "$p"; done
done

# Node's floor of the same path: two byte relays (scripts/node-floor-relay.mjs, no HTTP) on the
# sidecars' CPU, mutual TLS between them with the pods' certificates (:18443), or plaintext (:18444),
# in front of an nginx like the server pod's. client_proxy_of / server_proxy_of: the two proxies of
# each setup (the relays here, the sidecars below).
start_nginx "$fserver" "$work/nginx-floor" ${pin_load[@]+"${pin_load[@]}"}
declare -A client_proxy_of server_proxy_of
floor_relay() { # ns log relay-args...: a relay on the proxy's CPU; sets $started
  local ns=$1 log=$2
  shift 2
  # shellcheck disable=SC2046 # node flags, split on spaces
  ip netns exec "$ns" ${pin_proxy[@]+"${pin_proxy[@]}"} "$node" $(shebang_flags "$agent") "$PWD/scripts/node-floor-relay.mjs" "$@" > "$log" 2>&1 &
  started=$!
  pids+=("$started")
}
floor_relay "$fserver" "$work/floor-server-tls.log" 0.0.0.0:18443 8080 --accept-tls "$work/server/etc/certs"
server_proxy_of[floor-tls]=$started
floor_relay "$fserver" "$work/floor-server-plain.log" 0.0.0.0:18444 8080
server_proxy_of[floor-plain]=$started
floor_relay "$fclient" "$work/floor-client-tls.log" 18001 198.19.9.3:18443 --connect-tls "$work/client/etc/certs"
client_proxy_of[floor-tls]=$started
floor_relay "$fclient" "$work/floor-client-plain.log" 18002 198.19.9.3:18444
client_proxy_of[floor-plain]=$started
wait_port "$fserver" 127.0.0.1 8080
for p in 18443 18444; do wait_port "$fserver" 198.19.9.3 "$p"; done
for p in 18001 18002; do wait_port "$fclient" 127.0.0.1 "$p"; done
for p in 18001 18002; do
  ip netns exec "$fclient" "$node" "$work/get.cjs" "http://127.0.0.1:$p/1k.html" 1024 || {
    echo "bench-mtls: a request through the floor relays (:$p) failed" >&2; cat "$work"/floor-*.log >&2; exit 1; }
done

# The sidecars of each pair (sidecar_of[ROLE]), then the proof: 8080 is mutual TLS between them, 8090 is
# not. The new build's must pass it; a baseline that does not is left out.
declare -A sidecar_of
for k in "${pairs[@]}"; do
  for sa in client server; do
    as_build "$(build_of "$k")" start_sidecar "${pod_of[$sa$k]}" "$work/sidecar-$sa$k.log" -C "$work/$sa$k" \
      POD_NAMESPACE=default SERVICE_ACCOUNT="$sa" FILE_MOUNTED_CERTS=true
    sidecar_of[$sa$k]=$started
  done
done
handshakes() { # SUFFIX: the server sidecar's count of inbound mTLS handshakes
  ip netns exec "${pod_of[server$1]}" "$agent" request GET stats 2>/dev/null \
    | awk -F': ' '$1 == "listener.0.0.0.0_15006.mtls.handshake" { print $2; found = 1 } END { if (!found) print "?" }'
}
show_logs() { # SUFFIX
  for sa in client server; do echo "--- the $sa sidecar's log:" >&2; cat "$work/sidecar-$sa$1.log" >&2; done
}
get() { # PORT SUFFIX: one GET from the client pod; else sets $why and returns 1
  ip netns exec "${pod_of[client$2]}" "$node" "$work/get.cjs" "http://198.19.6.3:$1/1k.html" 1024 2> /dev/null ||
    { why="a request to 198.19.6.3:$1 from the client pod failed"; return 1; }
}
# prove SUFFIX: whether that pair carries 8080 over mutual TLS and 8090 in plaintext; sets $proof (the
# server's handshakes seen), or $why and returns 1.
prove() {
  local h0 h1 h2
  if grep -q 'configuration rejected' "$work/sidecar-client$1.log"; then why="the client sidecar rejected its resources"; return 1; fi
  h0=$(handshakes "$1")
  get 8080 "$1" || return 1
  h1=$(handshakes "$1")
  get 8090 "$1" || return 1
  h2=$(handshakes "$1")
  proof="server mTLS handshakes $h0 -> $h1 after a request to :8080, -> $h2 after one to :8090"
  if ! [[ "$h0" =~ ^[0-9]+$ && "$h1" =~ ^[0-9]+$ && "$h2" =~ ^[0-9]+$ ]]; then
    why="no listener.0.0.0.0_15006.mtls.handshake in the server sidecar's stats"
  elif [ "$h1" -le "$h0" ]; then
    why="a request to 8080 was not mutual TLS ($proof): the client sidecar did not originate it"
  elif [ "$h2" -ne "$h1" ]; then
    why="a request to 8090 made an mTLS handshake ($proof): it is not plaintext"
  else
    return 0
  fi
  return 1
}
if [ ${#builds[@]} -gt 1 ] && ! prove @base; then
  baseline_note="note: the baseline is left out of this bench: $why"
  echo "bench-mtls: $baseline_note" >&2
  builds=(new) pairs=('')
  for sa in client server; do stop_sidecar "${pod_of[$sa@base]}" "${sidecar_of[$sa@base]}"; done
fi
if ! prove ''; then
  echo "bench-mtls: $why" >&2
  show_logs ''
  exit 1
fi

# ---- measurements: setups plaintext and mtls through each pair of sidecars (SETUP, SETUP@base), and
# the floor's
declare -A url_of=([mtls]=http://198.19.6.3:8080/1k.html [plaintext]=http://198.19.6.3:8090/1k.html
  [floor-tls]=http://127.0.0.1:18001/1k.html [floor-plain]=http://127.0.0.1:18002/1k.html)
declare -A ns_of=([floor-tls]=$fclient [floor-plain]=$fclient) proxy_of
for k in "${pairs[@]}"; do
  for s in mtls plaintext; do
    url_of[$s$k]=${url_of[$s]} ns_of[$s$k]=${pod_of[client$k]}
    client_proxy_of[$s$k]=${sidecar_of[client$k]} server_proxy_of[$s$k]=${sidecar_of[server$k]}
  done
done
for s in "${!client_proxy_of[@]}"; do proxy_of[$s]="${client_proxy_of[$s]} ${server_proxy_of[$s]}"; done
# cpu_client, cpu_server: each proxy's CPU ticks; cpu_ticks and sys_ticks: both proxies', all and kernel.
declare -A rps p50 p99 errs cpu_client cpu_server cpu_ticks sys_ticks cpu_ns sent
# shellcheck disable=SC2207 # setup names have no spaces
setups=($(and_baseline plaintext mtls) floor-plain floor-tls)
run_setup() { # setup: run_wrk, and each of the two proxies' share of the CPU time
  run_wrk "$1"
  cpu_client[$1]=$(( ${cpu_client[$1]:-0} + run_ticks_of[${client_proxy_of[$1]}] ))
  cpu_server[$1]=$(( ${cpu_server[$1]:-0} + run_ticks_of[${server_proxy_of[$1]}] ))
}

echo "== bench-mtls: wrk -t$threads -c$conns, ${rounds} rounds of ${warmup}s warm-up + ${duration}s per setup, 1 KiB from nginx in the server pod"
echo "   client pod -> client sidecar -> server sidecar -> nginx; mtls: :8080 (ISTIO_MUTUAL), plaintext: :8090 (DISABLE)"
echo "   sidecars: $agent, --concurrency ${BENCH_CONCURRENCY:-1}; CPU pinning: ${pin_proxy[*]:-none} for both sidecars, ${pin_load[*]:-none} for the load side"
echo "   proof: $proof"
builds_banner
round_ratio='' floor_ratio=''
hs_before=$(handshakes '')
for ((r = 1; r <= rounds; r++)); do
  for s in "${setups[@]}"; do run_setup "$s"; done
  rr=$(ratio "$(last "${rps[mtls]}")" "$(last "${rps[plaintext]}")")
  fr=$(ratio "$(last "${rps[floor-tls]}")" "$(last "${rps[floor-plain]}")")
  round_ratio+="$rr " floor_ratio+="$fr "
  printf '   round %d: %s mtls/plaintext %sx, floor tls/plain %sx\n' "$r" "$(round_summary "${setups[@]}")" "$rr" "$fr"
done
hs_after=$(handshakes '')
for k in "${pairs[@]}"; do
  for sa in client server; do stop_sidecar "${pod_of[$sa$k]}" "${sidecar_of[$sa$k]}"; done
done

# ---- the table
declare -A m_rps m_p50 m_p99
setup_medians "${setups[@]}"
# shellcheck disable=SC2086 # the per-round lists split on spaces
r_mtls=$(median $round_ratio) r_floor=$(median $floor_ratio)
echo
echo "== results: medians of $rounds rounds; client/server CPU = each proxy's % of one core while measuring"
row() { printf '%-36s %9s %8s %8s %11s %11s\n' "$@"; }
row setup req/s "p50 ms" "p99 ms" "client CPU" "server CPU"
declare -A label=([plaintext]='plaintext (:8090, DISABLE)' [mtls]='mTLS (:8080, ISTIO_MUTUAL)'
  [plaintext@base]='plaintext, the baseline' [mtls@base]='mTLS, the baseline'
  [floor-plain]='node floor: two byte relays, plain' [floor-tls]='node floor: two byte relays, mTLS')
for s in "${setups[@]}"; do
  row "${label[$s]}" "${m_rps[$s]}" "${m_p50[$s]}" "${m_p99[$s]}" \
    "$(core_pct "${cpu_client[$s]}" "${cpu_ns[$s]}")" "$(core_pct "${cpu_server[$s]}" "${cpu_ns[$s]}")"
done
echo
printf 'throughput mTLS/plaintext  %6sx    (median of per-round ratios)  target >= %s (at most 15%% cost): %s\n' "$r_mtls" "$target" \
  "$(verdict "$(awk -v r="$r_mtls" -v t="$target" 'BEGIN { print (r >= t) }')")"
printf 'sidecar CPU per request    plaintext %s us = %s, mTLS %s us = %s\n' \
  "$(cpu_us_per_request plaintext)" "$(cpu_split_per_request plaintext)" "$(cpu_us_per_request mtls)" "$(cpu_split_per_request mtls)"
echo '                           (client + server, per request wrk completed; less sensitive to a busy host than req/s)'
printf 'node floor, mTLS/plaintext %6sx    (two byte relays on Node, mutual TLS between them or not: no HTTP, no policy)\n' "$r_floor"
printf 'floor CPU per request      plaintext %s us = %s, mTLS %s us = %s\n' \
  "$(cpu_us_per_request floor-plain)" "$(cpu_split_per_request floor-plain)" "$(cpu_us_per_request floor-tls)" "$(cpu_split_per_request floor-tls)"
printf 'server sidecar mTLS handshakes while measuring: %s (wrk: %s connections x %s runs incl. warm-ups; pooled upstream connections are reused)\n' \
  "$( [[ "$hs_before$hs_after" =~ ^[0-9]+$ ]] && echo $((hs_after - hs_before)) || echo '?')" "$conns" "$((2 * rounds))"
printf 'wrk sent %s requests over mTLS, %s in plaintext (+ warm-ups)\n' "${sent[mtls]}" "${sent[plaintext]}"
error_notes "${setups[@]}"

comparison_header
compare_builds "mTLS (:8080), client + server sidecars" mtls
compare_builds "plaintext (:8090), client + server sidecars" plaintext
if [ -n "${baseline_note:-}" ]; then echo "$baseline_note"; fi
exit 0
