#!/usr/bin/env bash
# Measures what authenticating every batch costs end to end: three meshes of two daemons
# (alpha 127.0.0.1, beta 127.0.0.2), the same cases on each, in turn within every run:
#   plain          no mesh secret: batches carry no tag
#   authenticated  a mesh secret (secret_file): every batch carries an AES-256-GMAC tag
#   encrypted      a mesh secret and encryption: on: AES-256-GCM over every batch's records
# The cases are compare.sh's rdmamsg cases over shared memory (the default local path):
#   throughput 64 B, throughput 1 MiB (claimed), round trip 64 B (p50, p99, p99.9)
# and the table gives, per case, each mode's median and the cost against plain: the median
# over the runs of (plain - mode) / plain for rates, (mode - plain) / plain for latencies,
# each taken within one run. The goal (docs/performance.md): authentication under 10 %.
#
# usage: bench/auth.sh [--count N] [--runs R] [--quick] [--keep] [--json-out F]
#   --count N     64 B messages of the throughput case (default 1000000); 1 MiB: N/500 (at
#                 least 50); round trips N/50 (at least 1000) after N/500 unmeasured
#   --runs R      repetitions; the modes take turns, each run starting with the next (default 3)
#   --quick       smoke run: --count 100000 --runs 1
#   --keep        keep the temporary directory (daemon logs, raw results)
#   --json-out F  every result as JSON (default build/bench/auth.json)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/mesh.sh

count=1000000
runs=3
keep=0
json_out=build/bench/auth.json
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --quick) count=100000; runs=1; shift ;;
    --keep) keep=1; shift ;;
    --json-out) json_out=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "auth.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
large=$((count / 500 < 50 ? 50 : count / 500))
rtt=$((count / 50 < 1000 ? 1000 : count / 50))
warmup=$((rtt / 10))
step_timeout=600 # seconds: bound on every command of the benchmark

# --- build --------------------------------------------------------------------------------
bench_build auth

# --- processes: everything started here is stopped on exit --------------------------------
dir=$(mktemp -d /tmp/rdmamsg-auth.XXXXXX)
mkdir "$dir/r"
trap cleanup EXIT # bench/mesh.sh
trap 'exit 130' INT TERM

# --- three meshes, one per mode: the default configuration but for the secret --------------
modes=(plain authenticated encrypted)
declare -A expect=([plain]=none [authenticated]=aes-256-gmac [encrypted]=aes-256-gcm)
port=$((20000 + RANDOM % 20000))
secret="$dir/mesh.secret"
(umask 077 && openssl rand -base64 48 >"$secret")
i=0
for mode in "${modes[@]}"; do
  mkdir "$dir/$mode"
  mesh_configs "$dir/$mode" $((port + i))
  i=$((i + 1))
  for node in alpha beta; do
    case $mode in
      authenticated) echo "secret_file: $secret" >>"$dir/$mode/$node.yaml" ;;
      encrypted) printf 'secret_file: %s\nencryption: on\n' "$secret" >>"$dir/$mode/$node.yaml" ;;
    esac
    spawn "$run" "$rdmamsgd" -c "$dir/$mode/$node.yaml" --node "$node" \
      >"$dir/$mode/$node.log" 2>&1
  done
done
for mode in "${modes[@]}"; do
  log "waiting for the $mode mesh"
  if ! mesh_wait "$rdmamsg" "$dir/$mode"; then
    echo "auth.sh: the $mode mesh did not form; logs in $dir/$mode" >&2
    keep=1
    exit 1
  fi
  # The mode is what the daemons say they do, not only what their files ask for.
  got=$("$rdmamsg" --socket "$dir/$mode/alpha.sock" status --json |
    python3 -c 'import json, sys
peers = json.load(sys.stdin)["peers"]
print(next((p.get("batch_protection", "none") for p in peers if p["name"] == "beta"), "?"))')
  if [ "$got" != "${expect[$mode]}" ]; then
    echo "auth.sh: the $mode mesh protects batches with '$got', not '${expect[$mode]}'" >&2
    keep=1
    exit 1
  fi
done

# --- the cases ----------------------------------------------------------------------------
measure() { # measure CASE RUN MODE: one rdmamsg bench on MODE's mesh, JSON into $dir/r
  local out="$dir/r/$1.r$2.$3.json" svc="$1x$2$3" a="$dir/$3/alpha.sock" b="$dir/$3/beta.sock"
  local cmd
  case $1 in
    tput64) cmd=(throughput "beta/$svc" --sink-socket "$b" --size 64 --count "$count") ;;
    tput1m) cmd=(throughput "beta/$svc" --sink-socket "$b" --size 1048576 --count "$large") ;;
    rtt64) cmd=(latency "beta/$svc" --echo-socket "$b" --size 64 --count "$rtt"
      --warmup "$warmup") ;;
  esac
  if ! bounded "$rdmamsg" --socket "$a" bench "${cmd[@]}" --json >"$out" 2>"$out.err"; then
    log "$3: rdmamsg bench $1 failed: $(head -c 300 "$out.err")"
    rm -f "$out"
  fi
}

log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$runs"); do
  # Each run starts with the next mode, so that no mode always follows the same one.
  order=()
  for k in 0 1 2; do order+=("${modes[$(((r - 1 + k) % 3))]}"); done
  for c in tput64 tput1m rtt64; do
    log "run $r/$runs: $c (${order[*]})"
    for mode in "${order[@]}"; do measure "$c" "$r" "$mode"; done
  done
done
for mode in "${modes[@]}"; do
  "$rdmamsg" --socket "$dir/$mode/alpha.sock" status --json >"$dir/r/status.$mode.alpha.json"
done

mkdir -p "$(dirname "$json_out")"
python3 bench/auth_summary.py "$dir/r" "$json_out" "$runs" "$count" "$large" "$rtt" "$warmup"
log "full results: $json_out"
