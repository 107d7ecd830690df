#!/bin/bash
# Runs an rsocket server and its client, unmodified, on softrdma: starts the server under
# softrdma-run, waits until its port listens on 127.0.0.1, runs the client with a timeout, then
# waits for the server. Every process it starts is stopped.
#
#   run_rsocket_pair.sh [--preload LIB] SOFTRDMA_RUN SERVER ARGS... -- CLIENT ARGS...
#
# @PORT@ in the arguments becomes a free port. --preload LIB is preloaded after libsoftrdma
# (librspreload: programs that use ordinary sockets then run on rsockets, on softrdma).
# Exit status 0 when both programs exit 0.
set -u

preload=
if [ "$1" = --preload ]; then
  preload=$2
  shift 2
fi
run=$1
shift
server=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do server+=("$1"); shift; done
shift
client=("$@")
deadline=20  # seconds for each program

log_dir=$(mktemp -d)
server_pid=

. "$(dirname "$0")/pair_lib.sh"

# Runs "$@" with @PORT@ replaced, under softrdma-run (and the extra preload).
launch() {
  local args=() a
  for a in "$@"; do args+=("${a//@PORT@/$port}"); done
  if [ -n "$preload" ]; then
    LD_PRELOAD="$preload" timeout -k 2 $deadline "$run" "${args[@]}"
  else
    timeout -k 2 $deadline "$run" "${args[@]}"
  fi
}

for attempt in 1 2 3; do
  port=$(pick_port) || fail "no free port"
  launch "${server[@]}" >"$log_dir/server.out" 2>"$log_dir/server.err" &
  server_pid=$!
  for i in $(seq 1 100); do  # bounded: at most ~10 s
    listening "$port" && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  listening "$port" && break
  stop_server
  [ "$attempt" = 3 ] && fail "the server never listened on 127.0.0.1:$port"
done

launch "${client[@]}" >"$log_dir/client.out" 2>"$log_dir/client.err"
client_status=$?
[ $client_status -eq 0 ] || fail "client exited with status $client_status (124: timeout)"
wait "$server_pid"
server_status=$?
server_pid=
[ $server_status -eq 0 ] || fail "server exited with status $server_status (124: timeout)"
cat "$log_dir/client.out"
echo "PASS: ${client[0]} on port $port"
