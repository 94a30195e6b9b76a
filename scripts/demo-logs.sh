# Sourced by the demo scripts. What the agents (sidecars, gateway, CA, apps) print goes to one log file
# per process, not to the terminal, so the demo's own lines read top to bottom. The demo names the
# files as it starts each process, keeps them when it ends, and prints their ends when it fails.
#
#   logs_init DIR               this script's logs go to DIR (made empty)
#   start NAME CMD...           CMD in the background, stdout and stderr appended to DIR/NAME.log; PID in pids
#   quiet NAME CMD...           CMD in the foreground, its output appended to DIR/NAME.log
#   log_of NAME                 the file's path, for the output
#   logs_on_failure STATUS      with a non-zero STATUS, the last lines of every log of this script

logs_init() {
  demo_logs=$1
  rm -rf "$demo_logs"
  mkdir -p "$demo_logs"
}

log_of() { printf '%s/%s.log' "$demo_logs" "$1"; }

# Appending (O_APPEND) lets a background process and a foreground command share a file.
start() {
  local name=$1; shift
  "$@" >> "$(log_of "$name")" 2>&1 &
  pids+=($!)
}

quiet() {
  local name=$1; shift
  "$@" >> "$(log_of "$name")" 2>&1
}

logs_on_failure() {
  [ "$1" -eq 0 ] && return 0
  local f
  printf '\n== failed (exit status %s); the end of each log in %s:\n' "$1" "$demo_logs" >&2
  for f in "$demo_logs"/*.log; do
    [ -e "$f" ] || continue
    printf '\n---- %s\n' "$f" >&2
    tail -n 40 "$f" >&2
  done
}
