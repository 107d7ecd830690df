#!/usr/bin/env bash
# The Java client beside the C++ client (docs/performance.md, "Java client"): 64 B throughput
# and round trips from alpha to beta, two daemons over softrdma on this machine, against the
# same `rdmamsg bench sink` and `rdmamsg bench echo` on beta. Each run: the C++ tool
# (`rdmamsg bench throughput` / `latency`), then the Java one (org.rdmamsg.bench.Bench, a
# fresh JVM that first runs a warm-up of the same size, not measured). Prints the medians
# and ranges over the runs.
#
# usage: bench/java.sh [--count N] [--rtt N] [--runs R] [--keep]
#   --count N   64 B messages per throughput run (default 1000000)
#   --rtt N     round trips per latency run (default 20000; C++ warms up with N/10, Java
#               with N, in the same JVM)
#   --runs R    runs of each (default 5)
#   --keep      keep the temporary directory (logs, raw results)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/mesh.sh

count=1000000
rtt=20000
runs=5
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --rtt) rtt=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "java.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
step_timeout=600 # seconds: bound on every command

# --- build: Release, only what is measured -------------------------------------------------
bin=build/bench-java
log "building (Release) into $bin"
mkdir -p "$bin"
if ! { cmake -S . -B "$bin" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF &&
  cmake --build "$bin" -j2 --target rdmamsgd softrdma rdmamsg_cli rdmamsg_java \
    rdmamsg_java_bench; } >"$bin/build.log" 2>&1; then
  tail -n 40 "$bin/build.log" >&2
  echo "java.sh: build failed ($bin/build.log)" >&2
  exit 1
fi
run="$bin/softrdma/softrdma-run"
rdmamsgd="$bin/daemon/rdmamsgd"
rdmamsg="$bin/client/rdmamsg"
classpath="$(ls "$bin"/java/rdmamsg-[0-9]*.jar):$bin/java/rdmamsg-bench.jar"
java_bench=(java -cp "$classpath" org.rdmamsg.bench.Bench)

# --- processes: everything started here is stopped on exit ---------------------------------
dir=$(mktemp -d /tmp/rdmamsg-java-bench.XXXXXX)
trap cleanup EXIT # bench/mesh.sh
trap 'exit 130' INT TERM

port=$((20000 + RANDOM % 20000))
mesh_configs "$dir" "$port"
for node in alpha beta; do
  "$run" "$rdmamsgd" -c "$dir/$node.yaml" --node "$node" >"$dir/$node.log" 2>&1 &
  pids+=("$!")
done
log "waiting for the mesh (alpha 127.0.0.1, beta 127.0.0.2, port $port)"
mesh_wait "$rdmamsg" "$dir" || { echo "java.sh: the mesh did not form; logs in $dir" >&2; keep=1; exit 1; }

# The other side, the same for both clients: the C++ tool's sink and echo on beta.
"$rdmamsg" --socket "$dir/beta.sock" bench sink sink --json >"$dir/sink.jsonl" 2>"$dir/sink.err" &
sink=$!
pids+=("$sink")
"$rdmamsg" --socket "$dir/beta.sock" bench echo echo --json >"$dir/echo.json" 2>"$dir/echo.err" &
pids+=("$!")
for svc in sink echo; do
  service_wait "$rdmamsg" "$dir/beta.sock" "$svc" || { echo "java.sh: no $svc on beta" >&2; exit 1; }
done

log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "kernel $(uname -r), $(java -version 2>&1 | head -1); load $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$dir/r"
for r in $(seq "$runs"); do
  log "run $r/$runs: throughput, $count x 64 B"
  bounded "$rdmamsg" --socket "$dir/alpha.sock" bench throughput beta/sink --size 64 \
    --count "$count" --json >"$dir/r/tput.cpp.$r.json"
  bounded "${java_bench[@]}" --socket "$dir/alpha.sock" throughput beta/sink --size 64 \
    --count "$count" --warmup "$count" --runs 1 >"$dir/r/tput.java.$r.json"
  log "run $r/$runs: round trips, $rtt x 64 B"
  bounded "$rdmamsg" --socket "$dir/alpha.sock" bench latency beta/echo --size 64 \
    --count "$rtt" --warmup $((rtt / 10)) --json >"$dir/r/rtt.cpp.$r.json"
  bounded "${java_bench[@]}" --socket "$dir/alpha.sock" latency beta/echo --size 64 \
    --count "$rtt" --warmup "$rtt" --runs 1 >"$dir/r/rtt.java.$r.json"
done

kill -TERM "$sink" # it reports its last burst (and its order errors) on the way out
wait "$sink" || true

python3 - "$dir" "$runs" <<'PY'
import glob, json, os, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])

def load(kind, client):
    out = []
    for r in range(1, runs + 1):
        with open(os.path.join(d, "r", "%s.%s.%d.json" % (kind, client, r))) as f:
            j = json.load(f)
        out.append(j.get("results", j))
    return out

def fmt(vals, digits=0):
    f = "{:,.%df}" % digits
    return "%s (%s–%s)" % (f.format(statistics.median(vals)), f.format(min(vals)),
                           f.format(max(vals)))

rows = []
tc, tj = load("tput", "cpp"), load("tput", "java")
assert all(x["ok"] for x in tc), "a C++ throughput run failed"
assert all(x["failed"] == 0 for x in tj), "a Java throughput run had failures"
a, b = [x["msgs_per_second"] for x in tc], [x["msgs_per_second"] for x in tj]
rows.append(("throughput 64 B, msg/s", fmt(a), fmt(b), statistics.median(b) / statistics.median(a)))
lc, lj = load("rtt", "cpp"), load("rtt", "java")
assert all(x["ok"] for x in lc), "a C++ latency run failed"
for key in ("p50", "p99", "p99.9", "mean"):
    a, b = [x["rtt_us"][key] for x in lc], [x["rtt_us"][key] for x in lj]
    rows.append(("round trip 64 B %s, µs" % key, fmt(a, 1), fmt(b, 1),
                 statistics.median(b) / statistics.median(a)))
errors = 0
with open(os.path.join(d, "sink.jsonl")) as f:
    for line in f:
        errors += json.loads(line).get("order_errors", 0)
print("| case | C++ client | Java client | Java / C++ |")
print("|---|---|---|---|")
for name, a, b, ratio in rows:
    print("| %s | %s | %s | %.2fx |" % (name, a, b, ratio))
print("\nmedian (min–max) of %d runs; sink order errors: %d" % (runs, errors))
PY
