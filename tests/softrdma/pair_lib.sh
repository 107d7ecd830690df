# Shared by run_pair.sh and run_rsocket_pair.sh (sourced): stopping the server, the failure
# report, and a free port. The caller sets log_dir (a temporary directory, removed on exit)
# and server_pid (the server's timeout wrapper, or empty).

# The server runs under timeout, which passes a SIGTERM on to it and SIGKILLs it 2 s later
# (-k 2); killing timeout itself would leave the server running (a perftest server spins).
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  server_pid=
}

cleanup() {
  stop_server
  rm -rf "$log_dir"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$log_dir"/*; do
    [ -s "$f" ] && { echo "--- $(basename "$f")" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
}

listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -Eq "(127.0.0.1|0.0.0.0|\*|\[::\]):$1"; }

# A free port on 127.0.0.1 (random high port, not listening now; retried by the caller).
pick_port() {
  local port i
  for i in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    listening "$port" || { echo "$port"; return 0; }
  done
  return 1
}
