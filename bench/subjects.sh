#!/usr/bin/env bash
# Measures rdmamsg's subjects side by side with NATS and ZeroMQ, the same cases for all, in
# turn, in one run on one machine, and prints the ratios (docs/performance.md, "Subjects"):
#   rdmamsg  app -shm-> rdmamsgd alpha -softrdma/tcp-> rdmamsgd beta -shm-> app
#   nats     app -tcp-> nats-server 127.0.0.1 -route-> nats-server 127.0.0.2 -tcp-> app
#   zmq      app -ipc-> XSUB/XPUB proxy 127.0.0.1 -tcp-> XSUB/XPUB proxy 127.0.0.2 -ipc-> app
#            (PUB/SUB; request/reply: REQ -> ROUTER/DEALER -> ROUTER/DEALER -> REP)
# The publisher is always on alpha (127.0.0.1):
#   p2p 64 B, p2p 1 MiB   one subscriber on beta
#   fan-out 64 B          8 subscribers on alpha and 8 on beta
#   request/reply 64 B    an echo on beta; p50, p99, p99.9
#   publish cost 64 B     one subscriber on beta, with 0 and with --noise subscriptions that do
#                         not match on alpha
# rdmamsg confirms every publish once each matching subscriber took it; NATS core and ZeroMQ
# PUB/SUB confirm nothing (at most once): their publisher is done when it flushed (NATS) or
# its socket's queue was written out (ZeroMQ).
#
# usage: bench/subjects.sh [--count N] [--runs R] [--noise M] [--only SYSTEM] [--quick] [--keep]
#                          [--json-out F]
#   --count N     64 B messages of the p2p and publish-cost streams (default 1000000); 1 MiB:
#                 N/500 (at least 50); fan-out N/5 (at least 10000), each to 16 subscribers;
#                 round trips N/50 (at least 1000) after N/500 unmeasured
#   --runs R      repetitions; the systems take turns within each, each run starting with the
#                 next; medians (default 3)
#   --noise M     non-matching subscriptions of the publish-cost case (default 100000)
#   --only S      measure one system alone: rdmamsg, nats or zmq (no ratios)
#   --quick       smoke run: --count 100000 --runs 1
#   --keep        keep the temporary directory (logs, raw results)
#   --json-out F  every result as JSON (default build/bench/subjects.json)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/mesh.sh

count=1000000
runs=3
noise=100000
only=""
keep=0
json_out=build/bench/subjects.json
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --noise) noise=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --quick) count=100000; runs=1; shift ;;
    --keep) keep=1; shift ;;
    --json-out) json_out=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "subjects.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$only" in
  "" | rdmamsg | nats | zmq) ;;
  *) echo "subjects.sh: --only rdmamsg|nats|zmq" >&2; exit 2 ;;
esac
large=$((count / 500 < 50 ? 50 : count / 500))
fan=$((count / 5 < 10000 ? 10000 : count / 5))
rtt=$((count / 50 < 1000 ? 1000 : count / 50))
warmup=$((rtt / 10))
step_timeout=600 # seconds: bound on every command of the benchmark

# --- dependencies and build --------------------------------------------------------------
bench_deps # bench/mesh.sh: nats-server, libnats-dev, libzmq3-dev
targets=(nats_bench subjects_bench zmq_bench)
[ "$only" != rdmamsg ] || targets=(subjects_bench)
[ "$only" != nats ] || targets=(nats_bench)
[ "$only" != zmq ] || targets=(zmq_bench)
bench_build subjects "${targets[@]}"
sbench="$bin/bench/subjects_bench"
nbench="$bin/bench/nats_bench"
zmq="$bin/bench/zmq_bench"

# --- processes: everything started here is stopped on exit --------------------------------
dir=$(mktemp -d /tmp/rdmamsg-subjects.XXXXXX)
mkdir "$dir/r"
trap cleanup EXIT # bench/mesh.sh
trap 'exit 130' INT TERM

# --- the two daemons and the two NATS servers ---------------------------------------------
port=$((20000 + RANDOM % 20000))
nport=$((port + 1)) # NATS clients
cport=$((port + 2)) # NATS routes
mport=$((port + 3)) # NATS monitoring (/subsz: the subscriptions a server knows)
zport=$((port + 4)) # ZeroMQ: the XSUB/XPUB proxies' link
rport=$((port + 5)) # ZeroMQ: the ROUTER/DEALER proxies' link
mesh_configs "$dir" "$port"
# The default configuration, but for room for the publish-cost case's subscriptions: one
# client holds them (max_subscriptions) and alpha announces them to beta (max_peer_interest).
limit=$((noise * 2 > 100000 ? noise * 2 : 100000))
for node in alpha beta; do
  printf 'max_subscriptions: %s\nmax_peer_interest: %s\n' "$limit" "$limit" >>"$dir/$node.yaml"
done
declare -A ip=([a]=127.0.0.1 [b]=127.0.0.2) spid
for h in a b; do
  node=alpha
  [ "$h" = a ] || node=beta
  spawn "$run" "$rdmamsgd" -c "$dir/$node.yaml" --node "$node" >"$dir/$node.log" 2>&1
  spid[rdmamsg.$h]=$last
done
for h in a b; do
  other=b
  [ "$h" = a ] || other=a
  spawn nats-server -a "${ip[$h]}" -p "$nport" -m "$mport" --cluster_name bench \
    --cluster "nats://${ip[$h]}:$cport" --routes "nats://${ip[$other]}:$cport" \
    >"$dir/nats-$h.log" 2>&1
  spid[nats.$h]=$last
done

log "waiting for the mesh (alpha 127.0.0.1, beta 127.0.0.2, port $port)"
if ! mesh_wait "$rdmamsg" "$dir"; then
  echo "subjects.sh: the mesh did not form; logs in $dir" >&2
  keep=1
  exit 1
fi
log "waiting for the NATS route (127.0.0.1 and 127.0.0.2, ports $nport and $cport)"
routed=0
for _ in $(seq 100); do
  if grep -qi 'route connection created' "$dir/nats-a.log" &&
    grep -qi 'route connection created' "$dir/nats-b.log"; then
    routed=1
    break
  fi
  sleep 0.1
done
if [ "$routed" -eq 0 ]; then
  echo "subjects.sh: the NATS servers did not route; logs in $dir" >&2
  keep=1
  exit 1
fi

nats_subs() { # nats_subs HOST: the subscriptions (local and routed) the server knows
  local n
  n=$(curl -s --max-time 2 "http://${ip[$1]}:$mport/subsz" |
    grep -o '"num_subscriptions": *[0-9]*' | grep -o '[0-9]*$') || true
  echo "${n:-999999999}" # no answer: never settled
}
declare -A nbase
mark() { # mark SYSTEM: before a case, what a server knows when idle (NATS: its own subscriptions)
  local h
  [ "$1" = nats ] || return 0
  for h in a b; do nbase[$h]=$(nats_subs "$h"); done
}
rdmamsg_busy() { # rdmamsg_busy NODE: subscriptions, peers' interest and pending publishes
  local n
  n=$("$rdmamsg" --socket "$dir/$1.sock" status --json | python3 -c 'import json, sys
s = json.load(sys.stdin)["subjects"]
print(s["subscriptions"] + s["pending_publishes"] + sum(i["patterns"] for i in s["interest"]))') ||
    true
  echo "${n:-999999999}" # no answer: never settled
}
# settle SYSTEM: until both servers have forgotten the case's subscriptions and publishes
# (bounded: 60 s), so that no case pays for the one before it. ZeroMQ's proxies are started
# anew for every case.
settle() {
  local h n
  [ "$1" != zmq ] || return 0
  for _ in $(seq 600); do
    n=0
    for h in a b; do
      if [ "$1" = rdmamsg ]; then
        local node=alpha
        [ "$h" = a ] || node=beta
        n=$((n + $(rdmamsg_busy "$node")))
      else
        n=$((n + $(nats_subs "$h") - ${nbase[$h]}))
      fi
    done
    [ "$n" -gt 0 ] || return 0
    sleep 0.1
  done
  log "$1: the last case's subscriptions are still known after 60 s"
}

# What the servers cost around a measurement: the CPU time of both (all their threads:
# for rdmamsgd also softrdma's progress thread, the emulated NIC; for ZeroMQ the case's two
# proxies, with their I/O threads).
cpu_ticks() { # cpu_ticks SYSTEM: user + system clock ticks of both servers of SYSTEM
  local h t=0 v
  for h in a b; do
    v=$(awk '{print $14 + $15}' "/proc/${spid[$1.$h]}/stat" 2>/dev/null) || v=0
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
server_cpu() { # server_cpu FILE TICKS0 TICKS1
  echo "{\"server_cpu_seconds\": $(((${3} - ${2}) * 1000 / $(getconf CLK_TCK)))e-3}" >"$1"
}

# client SYSTEM HOST(a|b) MODE: the benchmark program of SYSTEM and how it reaches HOST's
# server, in the array $cmd (ZeroMQ: publishers reach the proxy's XSUB, the others its XPUB).
client() {
  case "$1" in
    rdmamsg)
      local node=alpha
      [ "$2" = a ] || node=beta
      cmd=("$sbench" --socket "$dir/$node.sock")
      ;;
    nats) cmd=("$nbench" --url "nats://${ip[$2]}:$nport") ;;
    zmq)
      local side=sub
      case "$3" in pub-stream | probe) side=pub ;; esac
      cmd=("$zmq" "ipc://$dir/z$2-$side.ipc")
      ;;
  esac
}
# mode SYSTEM HOST MODE ARGS...: $cmd with the mode and its arguments.
mode() {
  client "$1" "$2" "$3"
  cmd=("${cmd[0]}" "$3" "${cmd[@]:1}" "${@:4}")
}

# zmq_pubsub HWM: the two XSUB/XPUB proxies, started anew for each case (none keeps the
# subscriptions of the case before; HWM is the case's). Alpha's: its publishers connect to
# DIR/za-pub.ipc (XSUB), its subscribers to DIR/za-sub.ipc and beta's proxy to
# tcp://127.0.0.1 (XPUB); beta's: its XSUB connects to alpha's XPUB (and takes beta's own
# publishers on DIR/zb-pub.ipc), its subscribers connect to DIR/zb-sub.ipc. The link carries
# beta's subscriptions to alpha and alpha's publications to beta. A second link the other way
# would loop every message between the two proxies (ZeroMQ has no loop detection): publishers
# on beta would need a second pair of proxies; here every publisher is on alpha.
# Filtering: ZeroMQ subscriptions are prefixes of a message's first frame (the subject). Each
# XPUB (and PUB) keeps the prefixes its peers subscribed to and sends a message only to peers
# with a matching one; an XPUB passes each subscription up once, through its proxy's XSUB to
# the publishers. So a subscription on alpha is known to alpha's proxy and to the publishers
# on alpha, and is matched there; beta's proxy never hears of it.
zmq_pubsub() {
  zpids=()
  spawn "$zmq" xpub-xsub "@ipc://$dir/za-pub.ipc" \
    "@tcp://127.0.0.1:$zport,@ipc://$dir/za-sub.ipc" --hwm "$1"
  zpids+=("$last")
  spid[zmq.a]=$last
  wait_file "$dir/za-sub.ipc" # bound after the tcp endpoint
  spawn "$zmq" xpub-xsub ">tcp://127.0.0.1:$zport,@ipc://$dir/zb-pub.ipc" \
    "@ipc://$dir/zb-sub.ipc" --hwm "$1"
  zpids+=("$last")
  spid[zmq.b]=$last
  wait_file "$dir/zb-sub.ipc"
}

# await FILE PID: until FILE exists or PID ended (bounded by PID's own bound).
await() {
  while [ ! -e "$1" ]; do
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.01
  done
}

# --- the cases ----------------------------------------------------------------------------
# stream SYSTEM TAG N SIZE SUBS_A SUBS_B NOISE: SUBS_A subscribers on alpha and SUBS_B on beta
# (one process on each host), NOISE subscriptions that do not match held on alpha; once every
# subscriber took a probe from alpha, the publisher on alpha publishes N messages of SIZE.
stream() {
  local sys=$1 tag=$2 n=$3 size=$4 ka=$5 kb=$6 nz=$7
  local subj="bench.$2" ready=() sinks=() hold="" ok=1 window=65536 h k t0 pub zo=() prober=b
  rm -f "$dir"/ready.* "$dir/go"
  mark "$sys"
  # A window of 64 MiB of 1 MiB messages: the pending limit bounds it only in messages.
  [ "$size" -le 65536 ] || window=64
  if [ "$sys" = zmq ]; then
    # A PUB or XPUB drops silently what a peer's queue has no room for (ZeroMQ's default
    # high-water mark: 1,000 messages). Every queue of the case can hold the whole stream,
    # so none drops (at worst N messages of SIZE in one queue); a subscriber that misses some
    # still says so, and the case then reports the loss instead of a rate.
    zo=(--hwm $((n + 1000)))
    zmq_pubsub $((n + 1000))
    prober=a # the noise is matched on alpha only (zmq_pubsub): its probe comes from alpha
  fi
  if [ "$nz" -gt 0 ]; then
    mode "$sys" a hold-subs --subject "$subj" --count "$nz" --ready-file "$dir/ready.hold"
    spawn bounded "${cmd[@]}" >"$dir/r/$tag.$sys.hold.json"
    hold=$last
    mode "$sys" "$prober" probe --subject "$subj.n$((nz - 1))" --until "$dir/ready.hold" \
      --timeout 300
    bounded "${cmd[@]}" || ok=0
  fi
  for h in a b; do
    k=$ka
    [ "$h" = a ] || k=$kb
    [ "$k" -gt 0 ] || continue
    mode "$sys" "$h" sub-sink --subject "$subj.hit" --count "$n" --subs "$k" \
      --ready-file "$dir/ready.$h" "${zo[@]}"
    spawn bounded "${cmd[@]}" >"$dir/r/$tag.$sys.sink_$h.json"
    sinks+=("$last")
    ready+=(--until "$dir/ready.$h")
  done
  if [ "$ok" -eq 1 ]; then
    mode "$sys" a probe --subject "$subj.hit" "${ready[@]}"
    bounded "${cmd[@]}" || ok=0
  fi
  if [ "$ok" -eq 1 ] && [ "$sys" = zmq ]; then
    # A new PUB hears the subscriptions only after it connected, and drops what none of them
    # matches (the slow joiner): the publisher waits until it heard all of the case's, then
    # for the go, so that the proxies' CPU time is taken from the first publish on.
    mode zmq a pub-stream --subject "$subj.hit" --count "$n" --size "$size" "${zo[@]}" \
      --subscriptions $((nz + 1)) --ready-file "$dir/ready.pub" --go "$dir/go" --timeout 300
    spawn bounded "${cmd[@]}" >"$dir/r/$tag.$sys.pub.json" 2>"$dir/r/$tag.$sys.pub.err"
    pub=$last
    await "$dir/ready.pub" "$pub" || true
    t0=$(cpu_ticks "$sys")
    touch "$dir/go"
    reap "$pub" || ok=0
  elif [ "$ok" -eq 1 ]; then
    mode "$sys" a pub-stream --subject "$subj.hit" --count "$n" --size "$size" --window "$window"
    t0=$(cpu_ticks "$sys")
    bounded "${cmd[@]}" >"$dir/r/$tag.$sys.pub.json" 2>"$dir/r/$tag.$sys.pub.err" || ok=0
  fi
  if [ "$ok" -eq 1 ]; then
    for k in "${sinks[@]}"; do reap "$k" || ok=0; done
    server_cpu "$dir/r/$tag.$sys.cpu.json" "$t0" "$(cpu_ticks "$sys")"
  else
    halt "${sinks[@]}"
  fi
  [ -z "$hold" ] || halt "$hold"
  [ "$sys" != zmq ] || zmq_stop
  settle "$sys"
  if [ "$ok" -eq 0 ]; then
    log "$sys $tag failed: $(head -c 300 "$dir/r/$tag.$sys.pub.err" 2>/dev/null || true)"
    rm -f "$dir/r/$tag.$sys".*.json
  fi
}

# rr SYSTEM TAG: an echo on beta; once it took a probe from alpha, round trips from alpha.
rr() {
  local sys=$1 tag=$2 subj="bench.$2" echo ok=1 t0
  if [ "$sys" = zmq ]; then
    rr_zmq "$tag"
    return
  fi
  rm -f "$dir"/ready.*
  mark "$sys"
  mode "$sys" b reply-echo --subject "$subj" --ready-file "$dir/ready.echo"
  spawn bounded "${cmd[@]}" 2>"$dir/r/$tag.$sys.echo.err"
  echo=$last
  mode "$sys" a probe --subject "$subj" --until "$dir/ready.echo"
  bounded "${cmd[@]}" || ok=0
  if [ "$ok" -eq 1 ]; then
    mode "$sys" a request-latency --subject "$subj" --count "$rtt" --warmup "$warmup" --size 64
    t0=$(cpu_ticks "$sys")
    bounded "${cmd[@]}" >"$dir/r/$tag.$sys.rr.json" 2>"$dir/r/$tag.$sys.rr.err" || ok=0
    server_cpu "$dir/r/$tag.$sys.cpu.json" "$t0" "$(cpu_ticks "$sys")"
  fi
  halt "$echo"
  settle "$sys"
  if [ "$ok" -eq 0 ]; then
    log "$sys $tag failed: $(head -c 300 "$dir/r/$tag.$sys.rr.err" 2>/dev/null || true)"
    rm -f "$dir/r/$tag.$sys.rr.json"
  fi
}

# rr_zmq TAG: as bench/compare.sh, REQ on alpha -> ROUTER/DEALER proxy on alpha -tcp->
# ROUTER/DEALER proxy on beta -> REP on beta, and back; the warm-up round trips come first
# (nothing is lost on the way: a DEALER holds a request until its peer is connected).
rr_zmq() {
  local tag=$1 ok=1 t0
  zmq_proxies router-dealer 0 zra zrb "$rport" # beta's (127.0.0.2), then alpha's
  spid[zmq.b]=${zpids[0]}
  spid[zmq.a]=${zpids[1]}
  spawn "$zmq" rep "ipc://$dir/zrb.ipc"
  zpids+=("$last")
  t0=$(cpu_ticks zmq)
  bounded "$zmq" req "ipc://$dir/zra.ipc" --size 64 --count "$rtt" --warmup "$warmup" \
    >"$dir/r/$tag.zmq.rr.json" 2>"$dir/r/$tag.zmq.rr.err" || ok=0
  server_cpu "$dir/r/$tag.zmq.cpu.json" "$t0" "$(cpu_ticks zmq)"
  zmq_stop
  if [ "$ok" -eq 0 ]; then
    log "zmq $tag failed: $(head -c 300 "$dir/r/$tag.zmq.rr.err" 2>/dev/null || true)"
    rm -f "$dir/r/$tag.zmq.rr.json"
  fi
}

# --- the runs -----------------------------------------------------------------------------
log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
log "nats-server $(nats-server --version | awk '{print $2}'), libnats" \
  "$(pkg-config --modversion libnats), libzmq $(pkg-config --modversion libzmq)"
systems=(rdmamsg nats zmq)
[ -z "$only" ] || systems=("$only")
for r in $(seq "$runs"); do
  i=$(((r - 1) % ${#systems[@]})) # run r starts with the r-th system
  order=("${systems[@]:i}" "${systems[@]:0:i}")
  log "run $r/$runs (${order[*]}): p2p $count x 64 B, $large x 1 MiB; fan-out $fan x 64 B" \
    "to 8+8; $rtt round trips; publish cost with 0 and $noise other subscriptions"
  for sys in "${order[@]}"; do stream "$sys" "p2p64.r$r" "$count" 64 0 1 0; done
  for sys in "${order[@]}"; do stream "$sys" "p2p1m.r$r" "$large" 1048576 0 1 0; done
  for sys in "${order[@]}"; do stream "$sys" "fanout.r$r" "$fan" 64 8 8 0; done
  for sys in "${order[@]}"; do rr "$sys" "rr.r$r"; done
  for sys in "${order[@]}"; do stream "$sys" "cost0.r$r" "$count" 64 0 1 0; done
  for sys in "${order[@]}"; do stream "$sys" "costn.r$r" "$count" 64 0 1 "$noise"; done
done
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

mkdir -p "$(dirname "$json_out")"
python3 bench/subjects_summary.py "$dir/r" "$json_out" "$runs" "$count" "$large" "$fan" \
  "$rtt" "$warmup" "$noise" "${only:-rdmamsg nats zmq}"
log "full results: $json_out"
