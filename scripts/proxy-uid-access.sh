#!/usr/bin/env bash
# The tests (and the demo) run the sidecar as uid 1337, as in a pod; that user must reach the
# checkout's files. A checkout under a private directory (mode 700, as `mktemp -d` makes) is out of
# its reach: grant "search" (o+x, traverse only, no listing) on the directories leading to it, and
# say so. Only as root; otherwise it says what is missing and changes nothing.
set -euo pipefail
dir=$(cd "$(dirname "$0")/.." && pwd)
while [ "$dir" != "/" ]; do
  dir=$(dirname "$dir")
  if [ "$(( 0$(stat -c %a "$dir") & 1 ))" -eq 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
      chmod o+x "$dir"
      echo "proxy-uid-access: made $dir traversable (o+x) so uid 1337 reaches the checkout"
    else
      echo "proxy-uid-access: uid 1337 cannot reach the checkout through $dir (tests running the sidecar will fail)" >&2
    fi
  fi
done
