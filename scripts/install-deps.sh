#!/usr/bin/env bash
# Installs the Debian packages the tests and the demo use, only those missing. Needs root (CI runs
# as root); without it, says what to install and goes on, so a build alone still works.
set -euo pipefail

declare -A wanted=(
  [iptables]=iptables          # mesh-iptables, data-plane tests in network namespaces
  [ip]=iproute2                # network namespaces, TPROXY policy routes
  [zsh]=zsh                    # completion script tests
  [fish]=fish
  [python3]=python3            # the TPROXY test listener (IP_TRANSPARENT from Python's socket module)
  [setpriv]=util-linux         # running the sidecar as uid 1337 in tests
  [dig]=bind9-dnsutils         # a real DNS client in the DNS proxy's truncation test
  [tcpdump]=tcpdump            # what crosses the wire between two meshed pods (mutual TLS, no plaintext)
  [h2load]=nghttp2-client      # a real HTTP/2 client (h2c prior knowledge) through the sidecar and the gateway
  [prometheus]=prometheus      # a real Prometheus scraping two meshed pods (Istio's dashboard queries); its promtool lints the metric names
)
missing=()
for cmd in "${!wanted[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${wanted[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 0
  fi
else SUDO=; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
