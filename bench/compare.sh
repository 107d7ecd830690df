#!/usr/bin/env bash
# Compares rdmamsg with what a user would otherwise build for the same topology, in one run
# on one machine, and prints the ratios (docs/performance.md):
#   rdmamsg  app -shm-> rdmamsgd(alpha) -softrdma/tcp-> rdmamsgd(beta) -shm-> app
#            (and again with RDMAMSG_SHM=0: app -unix-> rdmamsgd ... rdmamsgd -unix-> app)
#   zmq      app -ipc-> proxy -tcp-> proxy -ipc-> app   (PUSH/PULL; REQ/REP via ROUTER/DEALER)
#   uds      app -unix-> app                           (one raw hop: the physical floor)
# then bench/subjects.sh: rdmamsg's subjects against NATS (two clustered nats-server) and
# ZeroMQ (XSUB/XPUB proxies); and last bench/auth.sh: rdmamsg with a mesh secret (every batch
# authenticated) and with encryption beside the plain path; both with the same --count,
# --runs and --keep.
#
# usage: bench/compare.sh [--count N] [--runs R] [--quick] [--keep] [--json-out FILE]
#                         [--no-subjects] [--no-auth]
#   --count N      64 B messages per streaming/throughput case (default 1000000); 1 MiB cases
#                  send N/500 messages (at least 50), round trips N/50 (at least 1000)
#   --runs R       repetitions of every measurement; the table shows medians (default 3)
#   --quick        smoke run: --count 100000 --runs 1
#   --keep         keep the temporary directories (daemon logs, raw results)
#   --json-out F   full results as JSON (default build/bench/results.json); the subjects'
#                  in subjects.json beside it, and F names both ("result_files"); the batch
#                  authentication's in auth.json beside it
#   --no-subjects  skip bench/subjects.sh
#   --no-auth      skip bench/auth.sh
# ZMQ_BENCH=PATH in the environment runs that zmq_bench instead of the one built here: an A/B
# of two rdmamsg builds then measures both against one and the same ZeroMQ program.
# BENCH_RAILS=2 in the environment gives both daemons two rails (bench/mesh.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/mesh.sh

count=1000000
runs=3
keep=0
subjects=1
auth=1
json_out=build/bench/results.json
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --quick) count=100000; runs=1; shift ;;
    --keep) keep=1; shift ;;
    --json-out) json_out=$2; shift 2 ;;
    --no-subjects) subjects=0; shift ;;
    --no-auth) auth=0; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
subjects_json="$(dirname "$json_out")/subjects.json"
auth_json="$(dirname "$json_out")/auth.json"
large=$((count / 500 < 50 ? 50 : count / 500))
rtt=$((count / 50 < 1000 ? 1000 : count / 50))
warmup=$((rtt / 10))
step_timeout=600 # seconds: bound on every command of the benchmark

# --- dependencies and build --------------------------------------------------------------
bench_deps # bench/mesh.sh: libzmq3-dev, libnats-dev (the build needs both), nats-server
log "building (Release, RDMAMSG_BENCH=ON) into build/bench"
mkdir -p build/bench
if ! { cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DRDMAMSG_BENCH=ON \
  -DBUILD_TESTING=OFF && cmake --build build/bench -j2; } \
  >build/bench/build.log 2>&1; then
  tail -n 40 build/bench/build.log >&2
  echo "compare.sh: build failed (build/bench/build.log)" >&2
  exit 1
fi

bin=build/bench
run="$bin/softrdma/softrdma-run"
rdmamsgd="$bin/daemon/rdmamsgd"
rdmamsg="$bin/client/rdmamsg"
zmq="${ZMQ_BENCH:-$bin/bench/zmq_bench}"
uds="$bin/bench/uds_bench"

# --- processes: everything started here is stopped on exit --------------------------------
dir=$(mktemp -d /tmp/rdmamsg-bench.XXXXXX)
mkdir "$dir/r"
trap cleanup EXIT # bench/mesh.sh
trap 'exit 130' INT TERM
now_ns() { date +%s%N; }

# --- the two daemons ----------------------------------------------------------------------
port=$((20000 + RANDOM % 20000))
mesh_configs "$dir" "$port"
declare -A dpid
for node in alpha beta; do
  spawn "$run" "$rdmamsgd" -c "$dir/$node.yaml" --node "$node" >"$dir/$node.log" 2>&1
  dpid[$node]=$last
done
alpha_sock="$dir/alpha.sock"
beta_sock="$dir/beta.sock"

log "waiting for the mesh (alpha 127.0.0.1, beta 127.0.0.2, port $port)"
if ! mesh_wait "$rdmamsg" "$dir"; then
  echo "compare.sh: the mesh did not form; logs in $dir" >&2
  keep=1
  exit 1
fi

wait_service() { # wait_service SOCKET NAME: until the daemon lists the service (bounded)
  service_wait "$rdmamsg" "$1" "$2" && return 0
  echo "compare.sh: service $2 never registered" >&2
  return 1
}

# Efficiency and memory around every rdmamsg measurement: both daemons' status before and
# after, and their peak resident size during it (VmHWM, reset first through clear_refs).
snap() { # snap TAG
  for node in alpha beta; do
    "$rdmamsg" --socket "$dir/$node.sock" status --json >"$dir/r/$1.$node.status.json"
  done
}
# VmHWM also counts the pages of the clients' shared memory (RssShmem) that the daemon has
# touched, which the clients own. own_rss PID OUT: the peak of the daemon's own resident
# memory (RssAnon + RssFile), sampled every 0.1 s with builtins only until terminated.
own_rss() {
  local peak=0 sum k v _ stop=0 tick
  exec {tick}<> <(:)
  trap 'stop=1' TERM
  while [ "$stop" -eq 0 ]; do
    sum=0
    while read -r k v _; do
      case $k in RssAnon: | RssFile:) sum=$((sum + v * 1024)) ;; esac
    done <"/proc/$1/status" || true
    if [ "$sum" -gt "$peak" ]; then peak=$sum; fi
    read -rt 0.1 -u "$tick" _ || true
  done
  echo "$peak" >"$2"
}
declare -A sampler
begin_rdmamsg() { # begin_rdmamsg TAG
  for node in alpha beta; do
    echo 5 >"/proc/${dpid[$node]}/clear_refs" 2>/dev/null || true
    spawn own_rss "${dpid[$node]}" "$dir/r/$1.$node.own"
    sampler[$node]=$last
  done
  snap "$1.before"
}
end_rdmamsg() { # end_rdmamsg TAG
  snap "$1.after"
  for node in alpha beta; do
    awk '/^VmHWM:/ {print $2 * 1024}' "/proc/${dpid[$node]}/status" >"$dir/r/$1.$node.hwm"
    kill -TERM "${sampler[$node]}" 2>/dev/null || true
    reap "${sampler[$node]}" || true
  done
}
timing() { # timing FILE T0 T1 COUNT SIZE: a result measured from outside
  echo "{\"size\": $5, \"count\": $4, \"seconds\": $(((${3} - ${2}) / 1000))e-6}" >"$1"
}

# sysnap FILE: whole-machine counters around a measured run (its cost beyond its rate or
# latency): context switches, TCP segments sent, CPU time (jiffies, not idle).
sysnap() {
  {
    awk '/^ctxt/ {print "ctxt", $2} /^cpu / {print "busy", $2 + $3 + $4 + $7 + $8}' /proc/stat
    awk '/^Tcp:/ {n++; if (n == 1) for (i = 1; i <= NF; i++) col[$i] = i;
      else print "tcp_out_segs", $col["OutSegs"]}' /proc/net/snmp
    echo "hz $(getconf CLK_TCK)"
  } >"$1"
}

# --- a. CLI streaming, 64 B lines ---------------------------------------------------------
lines="$dir/lines.txt"
python3 -c "import sys; sys.stdout.write(('x' * 63 + '\n') * $count)" >"$lines"

# finish_stream LISTENER SENDER: t1 when the listener exits; a sender that fails first
# stops the listener instead of leaving it waiting for messages that will not come.
finish_stream() {
  local first rc=0
  wait -n -p first "$1" "$2" || rc=$?
  if [ "$first" = "$2" ]; then
    forget "$2"
    if [ "$rc" -ne 0 ]; then
      stop "$1"
      forget "$1"
      return 1
    fi
    reap "$1" || return 1
    t1=$(now_ns)
    return 0
  fi
  t1=$(now_ns)
  forget "$1"
  reap "$2" || return 1
  return "$rc"
}

# Every rdmamsg case runs over both local paths: shared memory (the default)
# and the socket; SYSTEM names which (rdmamsg, rdmamsg_socket).
path_env() { # path_env SYSTEM: the environment that selects its local path
  if [ "$1" = rdmamsg_socket ]; then echo RDMAMSG_SHM=0; else echo RDMAMSG_SHM=1; fi
}

cli_rdmamsg() { # cli_rdmamsg RUN SYSTEM: rdmamsg listen on beta, rdmamsg send on alpha
  local tag="cli.$2.$1" svc="cli$1$2" t0 t1 listener sender ok=1
  local env
  env=$(path_env "$2")
  spawn bounded env "$env" "$rdmamsg" --socket "$beta_sock" listen "${svc//_/-}" --count "$count" \
    >/dev/null
  listener=$last
  wait_service "$beta_sock" "${svc//_/-}" || ok=0
  begin_rdmamsg "$tag"
  sysnap "$dir/r/$tag.sys0"
  t0=$(now_ns)
  spawn -i "$lines" bounded env "$env" "$rdmamsg" --socket "$alpha_sock" send "beta/${svc//_/-}"
  sender=$last
  finish_stream "$listener" "$sender" || ok=0
  sysnap "$dir/r/$tag.sys1"
  end_rdmamsg "$tag"
  if [ "$ok" -eq 1 ]; then
    timing "$dir/r/$tag.json" "$t0" "$t1" "$count" 64
  else
    log "$2 CLI streaming failed (run $1)"
  fi
}

zmq_stream_proxies() { zmq_proxies proxy-stream "$1" a b $((port + 1)); }

cli_zmq() { # cli_zmq RUN: push-stdin -> proxy -> proxy -> pull-stdout, the same lines
  local t0 t1 listener sender ok=1
  zmq_stream_proxies 100000
  spawn bounded "$zmq" pull-stdout "ipc://$dir/b.ipc" --count "$count" >/dev/null
  listener=$last
  sysnap "$dir/r/cli.zmq.$1.sys0"
  t0=$(now_ns)
  spawn -i "$lines" bounded "$zmq" push-stdin "ipc://$dir/a.ipc"
  sender=$last
  finish_stream "$listener" "$sender" || ok=0
  sysnap "$dir/r/cli.zmq.$1.sys1"
  zmq_stop
  [ "$ok" -eq 0 ] || timing "$dir/r/cli.zmq.$1.json" "$t0" "$t1" "$count" 64
}

cli_uds() { # cli_uds RUN: the same line stream through one raw hop (batched, then per line)
  local t0 t1
  t0=$(now_ns)
  bounded "$uds" lines --count "$count" <"$lines" >/dev/null
  t1=$(now_ns)
  timing "$dir/r/cli.uds.$1.json" "$t0" "$t1" "$count" 64
  t0=$(now_ns)
  bounded "$uds" lines --per-line --count "$count" <"$lines" >/dev/null
  t1=$(now_ns)
  timing "$dir/r/cli.uds_unbatched.$1.json" "$t0" "$t1" "$count" 64
}

# --- b. throughput, 64 B and 1 MiB --------------------------------------------------------
tput_rdmamsg() { # tput_rdmamsg RUN SIZE N SYSTEM
  local tag="tput$2.$4.$1"
  begin_rdmamsg "$tag"
  sysnap "$dir/r/$tag.sys0"
  if ! bounded env "$(path_env "$4")" "$rdmamsg" --socket "$alpha_sock" bench throughput \
    "beta/tput$2x$1${4//_/-}" \
    --sink-socket "$beta_sock" --size "$2" --count "$3" --json >"$dir/r/$tag.json" \
    2>"$dir/r/$tag.err"; then
    log "rdmamsg bench throughput failed: $(head -c 300 "$dir/r/$tag.err")"
    rm -f "$dir/r/$tag.json"
  fi
  sysnap "$dir/r/$tag.sys1"
  end_rdmamsg "$tag"
}

tput_zmq() { # tput_zmq RUN SIZE N
  local hwm=100000 receiver
  [ "$2" -le 65536 ] || hwm=1000 # the default: 100000 queued 1 MiB messages would be 100 GB
  zmq_stream_proxies "$hwm"
  spawn bounded "$zmq" pull "ipc://$dir/b.ipc" --size "$2" --count "$3" --hwm "$hwm" \
    >"$dir/r/tput$2.zmq.$1.json"
  receiver=$last
  sysnap "$dir/r/tput$2.zmq.$1.sys0"
  bounded "$zmq" push "ipc://$dir/a.ipc" --size "$2" --count "$3" --hwm "$hwm" || true
  reap "$receiver" || rm -f "$dir/r/tput$2.zmq.$1.json"
  sysnap "$dir/r/tput$2.zmq.$1.sys1"
  zmq_stop
}

tput_uds() { # tput_uds RUN SIZE N: batched writes (64 KiB), then one write per message
  bounded "$uds" throughput --size "$2" --count "$3" --batch 65536 >"$dir/r/tput$2.uds.$1.json"
  bounded "$uds" throughput --size "$2" --count "$3" --batch 0 \
    >"$dir/r/tput$2.uds_unbatched.$1.json"
}

# --- c. round trips, 64 B -----------------------------------------------------------------
# rdmamsg_busy: shared memory with busy clients (the bench's measuring client and echo spin
# instead of sleeping; the daemons keep the default, sleep): the goal's "busy figures beside".
rtt_rdmamsg() { # rtt_rdmamsg RUN SYSTEM
  local tag="rtt.$2.$1" idle=()
  [ "$2" != rdmamsg_busy ] || idle=(--idle-strategy busy)
  begin_rdmamsg "$tag"
  sysnap "$dir/r/$tag.sys0"
  if ! bounded env "$(path_env "$2")" "$rdmamsg" --socket "$alpha_sock" bench latency \
    "beta/rtt$1${2//_/-}" "${idle[@]}" \
    --echo-socket "$beta_sock" --size 64 --count "$rtt" --warmup "$warmup" --json \
    >"$dir/r/$tag.json" 2>"$dir/r/$tag.err"; then
    log "rdmamsg bench latency failed: $(head -c 300 "$dir/r/$tag.err")"
    rm -f "$dir/r/$tag.json"
  fi
  sysnap "$dir/r/$tag.sys1"
  end_rdmamsg "$tag"
}

rtt_zmq() { # rtt_zmq RUN: REQ -> ROUTER/DEALER -> ROUTER/DEALER -> REP, and back
  zmq_proxies router-dealer 0 c d $((port + 2))
  spawn "$zmq" rep "ipc://$dir/d.ipc"
  zpids+=("$last")
  sysnap "$dir/r/rtt.zmq.$1.sys0"
  bounded "$zmq" req "ipc://$dir/c.ipc" --size 64 --count "$rtt" --warmup "$warmup" \
    >"$dir/r/rtt.zmq.$1.json" || rm -f "$dir/r/rtt.zmq.$1.json"
  sysnap "$dir/r/rtt.zmq.$1.sys1"
  zmq_stop
}

rtt_uds() { # rtt_uds RUN: one outstanding 64 B ping-pong over one hop
  sysnap "$dir/r/rtt.uds.$1.sys0"
  bounded "$uds" latency --size 64 --count "$rtt" --warmup "$warmup" >"$dir/r/rtt.uds.$1.json"
  sysnap "$dir/r/rtt.uds.$1.sys1"
}

# --- the runs -----------------------------------------------------------------------------
log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$runs"); do
  log "run $r/$runs: CLI streaming, $count x 64 B lines"
  cli_rdmamsg "$r" rdmamsg
  cli_rdmamsg "$r" rdmamsg_socket
  cli_zmq "$r"
  cli_uds "$r"
  log "run $r/$runs: throughput, $count x 64 B and $large x 1 MiB"
  for spec in "64 $count" "1048576 $large"; do
    read -r size n <<<"$spec"
    tput_rdmamsg "$r" "$size" "$n" rdmamsg
    tput_rdmamsg "$r" "$size" "$n" rdmamsg_socket
    tput_zmq "$r" "$size" "$n"
    tput_uds "$r" "$size" "$n"
  done
  log "run $r/$runs: round trips, $rtt x 64 B (after $warmup warm-up)"
  rtt_rdmamsg "$r" rdmamsg
  rtt_rdmamsg "$r" rdmamsg_socket
  rtt_rdmamsg "$r" rdmamsg_busy
  rtt_zmq "$r"
  rtt_uds "$r"
done

mkdir -p "$(dirname "$json_out")"
python3 bench/summarize.py "$dir/r" "$json_out" "$runs" "$count" "$large" "$rtt" "$warmup"
log "full results: $json_out"

# --- d. subjects: rdmamsg, NATS and ZeroMQ (bench/subjects.sh) ------------------------------
[ "$subjects" -eq 0 ] && [ "$auth" -eq 0 ] || halt "${pids[@]}" # the others bring their own
if [ "$subjects" -eq 1 ]; then
  sargs=(--count "$count" --runs "$runs" --json-out "$subjects_json")
  [ "$keep" -eq 0 ] || sargs+=(--keep)
  rm -f "$subjects_json"
  log "subjects: bench/subjects.sh ${sargs[*]}"
  if ! bench/subjects.sh "${sargs[@]}"; then
    echo "compare.sh: bench/subjects.sh failed" >&2
    exit 1
  fi
  python3 bench/summarize.py --subjects "$json_out" "$subjects_json"
  log "full results: $json_out and $subjects_json"
fi

# --- e. batch authentication: plain, authenticated, encrypted (bench/auth.sh) ---------------
if [ "$auth" -eq 1 ]; then
  aargs=(--count "$count" --runs "$runs" --json-out "$auth_json")
  [ "$keep" -eq 0 ] || aargs+=(--keep)
  log "batch authentication: bench/auth.sh ${aargs[*]}"
  if ! bench/auth.sh "${aargs[@]}"; then
    echo "compare.sh: bench/auth.sh failed" >&2
    exit 1
  fi
  log "full results: $auth_json"
fi
