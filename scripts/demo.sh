#!/usr/bin/env bash
# `make demo`: what pilot-agent can do today, end to end, on an embedded default. The proxy issue
# turns this into the full sidecar demo (a pod, its capture rules and its sidecar in namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
agent="$PWD/bin/pilot-agent"
step() { printf '\n== %s\n' "$*"; }

step "pilot-agent version (short, then full)"
"$agent" version
"$agent" version --short=false

step "an environment variable that does not parse is named, and its default used"
MESH_CPU_LIMIT=four FILE_DEBOUNCE_DURATION=10 "$agent" version

step "flags are validated before anything is applied: mesh-iptables -m FOO"
if "$agent" mesh-iptables -m FOO; then echo "unexpected success" >&2; exit 1; else echo "(exit code $?)"; fi

step "completion: source <(pilot-agent completion bash)"
bash --norc -c "source <('$agent' completion bash) && complete -p pilot-agent"

step "wait and request against the agent's local ports, in a network namespace of the demo's own"
ns="pa-demo-$$"
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
if ! ip netns add "$ns" 2>/dev/null; then
  echo "skipped: creating a network namespace needs root and iproute2"
  exit 0
fi
ip -n "$ns" link set lo up
# Until the proxy lands, a stand-in serves the admin port 15000 and the status port 15021,
# becoming ready one second after start.
ip netns exec "$ns" node test/fixtures/http-server.mjs --port 15000 --port 15021 --ready-after 1000 >/dev/null &
server_pid=$!
echo "\$ pilot-agent wait            # default URL https://:15021/healthz/ready"
ip netns exec "$ns" "$agent" wait --periodMillis 200
echo "\$ pilot-agent request GET stats"
ip netns exec "$ns" "$agent" request GET stats
echo "\$ pilot-agent request GET /stats --debug-port 8080"
if ip netns exec "$ns" "$agent" request GET /stats --debug-port 8080; then exit 1; else echo "(exit code $?)"; fi

step "demo finished: everything it made is removed"
