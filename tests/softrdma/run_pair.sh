#!/bin/bash
# Runs one of rdma-core's example program pairs (Debian package rdmacm-utils), unmodified, on
# softrdma: starts the server under softrdma-run, waits until its TCP port listens, runs the
# client with a timeout, then waits for the server. Every process it starts is stopped.
#
#   run_pair.sh SOFTRDMA_RUN rping|rdma_server|rdma_xserver|ibv_rc_pingpong|ibv_ud_pingpong|
#               udaddy|mckey|ib_send_bw_ud|ib_send_bw_ud_cm|ibv_uc_pingpong|ib_write_bw_uc
#   run_pair.sh SOFTRDMA_RUN ib_atomic_bw|ib_atomic_lat|ib_read_lat|ib_write_lat [ARGS...]
#
# The perftest programs (Debian package perftest) run with ARGS on both sides (e.g. -n 200,
# -R for rdma_cm); the client must print its result table.
#
# rdma_xserver pairs rdma_xserver and rdma_xclient with RC (-c r): the client sends 16 bytes
# inline on a QP that asked for no inline data, which the device's grant allows.
#
# ibv_rc_pingpong's, ibv_ud_pingpong's, ibv_uc_pingpong's and perftest's servers listen on every
# address, udaddy's on a fixed port (7174) and mckey has no port at all (its
# receiver is ready once it has printed that it joined the group), so run
# those pairs only in a private network namespace (run_netns.sh).
# ib_send_bw_ud pairs perftest's ib_send_bw -c UD (addresses exchanged over
# TCP), ib_send_bw_ud_cm the same with -R (rdma_cm, RDMA_PS_UDP), ib_write_bw_uc
# ib_write_bw -c UC.
#
# Exit status 0 when both programs exit 0 (and the client reports success).
set -u

run=$1
pair=$2
shift 2
extra=("$@")  # perftest: the arguments of both sides
deadline=20  # seconds for each program

# perftest calibrates the CPU clock against usleep before it reports and gives up ("Correlation
# coefficient r^2 < 0.9", "Can't produce a report") when the machine is too busy for a straight
# line; that is the machine, not softrdma, so such a pair runs again (at most three times).
case $pair in
  ib_*)
    if [ -z "${RUN_PAIR_ONCE:-}" ]; then
      for attempt in 1 2 3; do
        out=$(RUN_PAIR_ONCE=1 "$0" "$run" "$pair" "${extra[@]}" 2>&1)
        status=$?
        printf '%s\n' "$out"
        [ $status -eq 0 ] && exit 0
        grep -q "Correlation coefficient" <<<"$out" || exit $status
        echo "attempt $attempt: perftest could not calibrate its clock (a busy machine)" >&2
      done
      exit $status
    fi ;;
esac

log_dir=$(mktemp -d)
server_pid=
group=239.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))  # mckey's

. "$(dirname "$0")/pair_lib.sh"

start_server() {
  local port=$1
  case $pair in
    rping) timeout -k 2 $deadline "$run" rping -s -a 127.0.0.1 -p "$port" -C 20 -V \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    rdma_server) timeout -k 2 $deadline "$run" rdma_server -s 127.0.0.1 -p "$port" \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    rdma_xserver) timeout -k 2 $deadline "$run" rdma_xserver -c r -p "$port" \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    ibv_rc_pingpong) timeout -k 2 $deadline "$run" ibv_rc_pingpong -g 0 -e -n 500 -s 8192 \
             -p "$port" >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    ib_atomic_bw|ib_atomic_lat|ib_read_lat|ib_write_lat)
      timeout -k 2 $deadline "$run" "$pair" "${extra[@]}" -p "$port" \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    ibv_ud_pingpong) timeout -k 2 $deadline "$run" ibv_ud_pingpong -g 0 -e -n 200 -s 2048 \
             -p "$port" >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    ibv_uc_pingpong) timeout -k 2 $deadline "$run" ibv_uc_pingpong -g 0 -e -n 200 -s 8192 \
             -p "$port" >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    ib_write_bw_uc) timeout -k 2 $deadline "$run" ib_write_bw -c UC -n 200 -p "$port" \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    udaddy) timeout -k 2 $deadline "$run" udaddy -b 127.0.0.1 -C 10 \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    mckey) timeout -k 2 $deadline stdbuf -oL "$run" mckey -m "$group" -b 127.0.0.1 -C 10 \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    ib_send_bw_ud) timeout -k 2 $deadline "$run" ib_send_bw -c UD -n 200 -p "$port" \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    ib_send_bw_ud_cm) timeout -k 2 $deadline "$run" ib_send_bw -c UD -R -n 200 -p "$port" \
             >"$log_dir/server.out" 2>"$log_dir/server.err" & ;;
    *) echo "unknown pair $pair" >&2; exit 2 ;;
  esac
  server_pid=$!
}

run_client() {
  local port=$1
  case $pair in
    rping) timeout -k 2 $deadline "$run" rping -c -a 127.0.0.1 -p "$port" -C 20 -V \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    rdma_server) timeout -k 2 $deadline "$run" rdma_client -s 127.0.0.1 -p "$port" \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    rdma_xserver) timeout -k 2 $deadline "$run" rdma_xclient -s 127.0.0.1 -p "$port" -c r \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    ibv_rc_pingpong) timeout -k 2 $deadline "$run" ibv_rc_pingpong -g 0 -e -n 500 -s 8192 \
             -p "$port" 127.0.0.1 >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    ibv_ud_pingpong) timeout -k 2 $deadline "$run" ibv_ud_pingpong -g 0 -e -n 200 -s 2048 \
             -p "$port" 127.0.0.1 >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    ibv_uc_pingpong) timeout -k 2 $deadline "$run" ibv_uc_pingpong -g 0 -e -n 200 -s 8192 \
             -p "$port" 127.0.0.1 >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    ib_write_bw_uc) timeout -k 2 $deadline "$run" ib_write_bw -c UC -n 200 -p "$port" 127.0.0.1 \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    udaddy) timeout -k 2 $deadline "$run" udaddy -s 127.0.0.1 -C 10 \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    mckey) timeout -k 2 $deadline "$run" mckey -m "$group" -b 127.0.0.1 -s -C 10 \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    ib_send_bw_ud) timeout -k 2 $deadline "$run" ib_send_bw -c UD -n 200 -p "$port" 127.0.0.1 \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    ib_send_bw_ud_cm) timeout -k 2 $deadline "$run" ib_send_bw -c UD -R -n 200 -p "$port" \
             127.0.0.1 >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
    ib_*) timeout -k 2 $deadline "$run" "$pair" "${extra[@]}" -p "$port" 127.0.0.1 \
             >"$log_dir/client.out" 2>"$log_dir/client.err" ;;
  esac
}

# Ready to serve: listening on its port, or (mckey) joined to the group.
server_ready() {
  case $pair in
    mckey) grep -q "joined dgid" "$log_dir/server.out" ;;
    *) listening "$1" ;;
  esac
}

# Start the server; if its port was taken in the meantime, try another one.
for attempt in 1 2 3; do
  port=$(pick_port) || fail "no free port"
  [ "$pair" = udaddy ] && port=7174  # udaddy's only port (a private namespace)
  start_server "$port"
  for i in $(seq 1 100); do  # bounded: at most ~10 s
    server_ready "$port" && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  server_ready "$port" && break
  stop_server
  [ "$attempt" = 3 ] && fail "the server was never ready (port $port)"
done

run_client "$port"
client_status=$?
[ $client_status -eq 0 ] || fail "client exited with status $client_status (124: timeout)"
if [ "$pair" = rdma_server ]; then
  grep -q "rdma_client: end 0" "$log_dir/client.out" || fail "rdma_client did not report success"
fi
if [ "$pair" = rdma_xserver ]; then
  grep -q "rdma_xclient: end 0" "$log_dir/client.out" || fail "rdma_xclient did not report success"
fi

wait "$server_pid"
server_status=$?
server_pid=
[ $server_status -eq 0 ] || fail "server exited with status $server_status (124: timeout)"
if [ "$pair" = rdma_server ]; then
  grep -q "rdma_server: end 0" "$log_dir/server.out" || fail "rdma_server did not report success"
fi
if [ "$pair" = rdma_xserver ]; then
  grep -q "rdma_xserver: end 0" "$log_dir/server.out" || fail "rdma_xserver did not report success"
fi
case $pair in
  ib_*) grep -Eq "^ +#bytes" "$log_dir/client.out" || fail "$pair printed no results" ;;
esac
if [ "$pair" = ibv_rc_pingpong ]; then
  grep -q "500 iters in" "$log_dir/client.out" || fail "ibv_rc_pingpong did not complete 500 iterations"
fi
if [ "$pair" = ibv_uc_pingpong ]; then
  grep -q "200 iters in" "$log_dir/client.out" || fail "ibv_uc_pingpong did not complete 200 iterations"
fi
if [ "$pair" = ibv_ud_pingpong ]; then
  grep -q "200 iters in" "$log_dir/client.out" || fail "ibv_ud_pingpong did not complete 200 iterations"
fi
case $pair in
  udaddy|mckey)
    for side in server client; do
      grep -q "data transfers complete" "$log_dir/$side.out" || fail "$pair $side: no data transfers"
      grep -q "return status 0" "$log_dir/$side.out" || fail "$pair $side did not report success"
    done ;;
  ib_send_bw_ud*)
    grep -Eq "^ *4096 +200 " "$log_dir/client.out" || fail "ib_send_bw did not report 200 iterations" ;;
  ib_write_bw_uc)
    grep -Eq "^ *65536 +200 " "$log_dir/client.out" || fail "ib_write_bw did not report 200 iterations" ;;
esac
echo "PASS: $pair on port $port"
