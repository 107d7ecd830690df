# shellcheck shell=bash disable=SC2154,SC2034 # $dir, $keep, $step_timeout, $zmq: the sourcing script's; bench_build sets $bin, $run, ... for it
# Sourced by bench/compare.sh, bench/subjects.sh and bench/java.sh: the two daemons they
# measure against (alpha on 127.0.0.1 and beta on 127.0.0.2, one port, sockets in DIR), the
# processes they start, and the ZeroMQ proxies of compare.sh and subjects.sh.
#
# The sourcing script sets, before it starts anything: $dir (its temporary directory), $keep
# (1: keep it on exit), $step_timeout (seconds: the bound of every bounded command), and then
# `trap cleanup EXIT; trap 'exit 130' INT TERM`.

log() { printf '=== %s\n' "$*" >&2; }

# bench_deps: installs what the benchmarks' build (-DRDMAMSG_BENCH=ON) and runs need, when it
# is missing: Debian's libzmq3-dev, libnats-dev and nats-server.
bench_deps() {
  local missing=() sudo=""
  command -v nats-server >/dev/null || missing+=(nats-server)
  pkg-config --exists libnats || missing+=(libnats-dev)
  pkg-config --exists libzmq || missing+=(libzmq3-dev)
  [ ${#missing[@]} -gt 0 ] || return 0
  log "installing ${missing[*]} (used only by the benchmarks)"
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then $sudo apt-get update -qq; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# bench_build NAME [TARGET...]: the daemon, the CLI and softrdma (and TARGETs) built in Release
# into build/bench (RDMAMSG_BENCH=ON, no tests, no Java), its log in build/bench/build-NAME.log;
# exits with the log's tail if the build fails. Sets $bin, $run, $rdmamsgd and $rdmamsg.
bench_build() {
  local name=$1
  shift
  log "building (Release) into build/bench"
  mkdir -p build/bench
  if ! { cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DRDMAMSG_BENCH=ON \
    -DBUILD_TESTING=OFF -DRDMAMSG_JAVA=OFF &&
    cmake --build build/bench -j2 --target rdmamsgd rdmamsg_cli softrdma "$@"; } \
    >"build/bench/build-$name.log" 2>&1; then
    tail -n 40 "build/bench/build-$name.log" >&2
    echo "$name.sh: build failed (build/bench/build-$name.log)" >&2
    exit 1
  fi
  bin=build/bench
  run="$bin/softrdma/softrdma-run"
  rdmamsgd="$bin/daemon/rdmamsgd"
  rdmamsg="$bin/client/rdmamsg"
}

# mesh_configs DIR PORT: DIR/alpha.yaml and DIR/beta.yaml. With BENCH_RAILS=2 in the
# environment each node has two rails (alpha 127.0.0.1 and .3, beta .2 and .4; one softrdma
# device): active-standby, each message kept until confirmed to be sent again after a
# failover (docs/configuration.md, "Rails") — what that costs on the data path.
mesh_configs() {
  local node a=127.0.0.1:$2 b=127.0.0.2:$2
  if [ "${BENCH_RAILS:-1}" = 2 ]; then
    a="[127.0.0.1:$2, 127.0.0.3:$2]"
    b="[127.0.0.2:$2, 127.0.0.4:$2]"
  fi
  for node in alpha beta; do
    cat >"$1/$node.yaml" <<YAML
socket: $1/$node.sock
peers:
  - name: alpha
    address: $a
  - name: beta
    address: $b
log_level: warn
YAML
  done
}

# mesh_wait RDMAMSG DIR: until both daemons see each other established (bounded: 10 s).
mesh_wait() {
  local up node
  for _ in $(seq 100); do
    up=0
    for node in alpha beta; do
      if "$1" --socket "$2/$node.sock" status --json 2>/dev/null |
        grep -Eq '"state": *"established"'; then up=$((up + 1)); fi
    done
    [ "$up" -eq 2 ] && return 0
    sleep 0.1
  done
  return 1
}

# service_wait RDMAMSG SOCKET NAME: until the daemon lists the service (bounded: 5 s).
service_wait() {
  for _ in $(seq 100); do
    "$1" --socket "$2" status --json | grep -q "\"$3\"" && return 0
    sleep 0.05
  done
  return 1
}

# --- processes: everything started here is stopped on exit --------------------------------
pids=()
stop() { # stop PID...: SIGTERM, SIGKILL after 5 s, then reap
  local p alive
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for p in "$@"; do
      case "$(ps -o stat= -p "$p" 2>/dev/null)" in "" | Z*) ;; *) alive=1 ;; esac
    done
    [ "$alive" -eq 1 ] || break
    sleep 0.1
  done
  for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}
cleanup() {
  trap - EXIT
  trap '' INT TERM
  [ ${#pids[@]} -eq 0 ] || stop "${pids[@]}"
  if [ "$keep" -eq 1 ]; then log "kept $dir"; else rm -rf "$dir"; fi
}

# spawn [-i FILE] [bounded] CMD...: in the background with stdin from FILE (default
# /dev/null), remembered in pids; its pid in $last ("bounded": timeout's own pid, which
# passes SIGTERM on).
spawn() {
  local in=/dev/null
  if [ "$1" = -i ]; then
    in=$2
    shift 2
  fi
  if [ "$1" = bounded ]; then
    shift
    set -- timeout -k 5 "$step_timeout" "$@"
  fi
  "$@" <"$in" &
  last=$!
  pids+=("$last")
}
forget() { # forget PID...: no longer ours to stop
  local left=() p
  for p in "${pids[@]}"; do [[ " $* " == *" $p "* ]] || left+=("$p"); done
  pids=("${left[@]}")
}
reap() { # reap PID: wait for it, forget it, return its status
  local rc=0
  wait "$1" || rc=$?
  forget "$1"
  return "$rc"
}
halt() { # halt PID...: stop them and forget them
  stop "$@"
  forget "$@"
}
bounded() { timeout -k 5 "$step_timeout" "$@"; }

wait_file() { # wait_file PATH: until a socket file exists (bounded: 5 s)
  for _ in $(seq 100); do
    [ -S "$1" ] && return 0
    sleep 0.05
  done
  echo "$(basename "$0"): $1 never appeared" >&2
  return 1
}

# --- ZeroMQ proxies (bench/zmq_bench, in $zmq) ---------------------------------------------
# zmq_proxies KIND HWM A B PORT: proxy B (tcp 127.0.0.2:PORT -> ipc DIR/B.ipc) and then
# proxy A (ipc DIR/A.ipc -> tcp), each started once its downstream is bound, so that no
# connect waits for ZeroMQ's reconnect interval (100 ms) inside a timed run; their pids in
# zpids (B first). KIND: proxy-stream or router-dealer; HWM 0: ZeroMQ's default.
zmq_proxies() {
  local zport=$5 hwm_opt=()
  [ "$2" -eq 0 ] || hwm_opt=(--hwm "$2")
  zpids=()
  spawn "$zmq" "$1" "@tcp://127.0.0.2:$zport" "@ipc://$dir/$4.ipc" "${hwm_opt[@]}"
  zpids+=("$last")
  wait_file "$dir/$4.ipc"
  spawn "$zmq" "$1" "@ipc://$dir/$3.ipc" ">tcp://127.0.0.2:$zport" "${hwm_opt[@]}"
  zpids+=("$last")
  wait_file "$dir/$3.ipc"
}
zmq_stop() { # the proxies in zpids, and their sockets
  halt "${zpids[@]}"
  rm -f "$dir"/*.ipc
}
