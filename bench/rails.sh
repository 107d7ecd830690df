#!/usr/bin/env bash
# Throughput of several flows between two daemons over one rail, and over two rails with each
# rail_policy (docs/configuration.md, "Rails"): three meshes of two daemons on loopback
# addresses, the same cases on each, in turn within every run:
#   one-rail        alpha 127.0.0.1, beta 127.0.0.2: one connection
#   active-standby  two rails each (alpha .1 and .3, beta .2 and .4): one connection, on rail 0
#   spread          the same two rails: a connection per rail, flows hashed to them
# A case is FLOWS concurrent `rdmamsg bench throughput` streams from alpha to FLOWS services
# on beta (one flow each), all started together; its rate is the messages (bytes) of all of
# them over the time from the first start to the last end. Cases: 64 B and 1 MiB messages.
# The table gives each mesh's median and its ratio to one-rail (the median of the per-run
# ratios).
#
# On one host the rails share its CPUs and its loopback: what spread changes here is the
# number of connections the work goes through, not the bandwidth under it.
#
# usage: bench/rails.sh [--count N] [--flows F] [--runs R] [--quick] [--keep] [--json-out F]
#   --count N     64 B messages per flow (default 250000); 1 MiB: N/500 per flow (at least 50)
#   --flows F     concurrent flows (default 4)
#   --runs R      repetitions; the meshes take turns, each run starting with the next (default 3)
#   --quick       smoke run: --count 50000 --runs 1
#   --keep        keep the temporary directory (daemon logs, raw results)
#   --json-out F  every result as JSON (default build/bench/rails.json)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/mesh.sh

count=250000
flows=4
runs=3
keep=0
json_out=build/bench/rails.json
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --flows) flows=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --quick) count=50000; runs=1; shift ;;
    --keep) keep=1; shift ;;
    --json-out) json_out=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "rails.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
large=$((count / 500 < 50 ? 50 : count / 500))
step_timeout=600 # seconds: bound on every command of the benchmark

# --- build --------------------------------------------------------------------------------
bench_build rails

dir=$(mktemp -d /tmp/rdmamsg-rails.XXXXXX)
mkdir "$dir/r"
trap cleanup EXIT # bench/mesh.sh
trap 'exit 130' INT TERM

# --- three meshes -------------------------------------------------------------------------
meshes=(one-rail active-standby spread)
port=$((20000 + RANDOM % 20000))
i=0
for mesh in "${meshes[@]}"; do
  mkdir "$dir/$mesh"
  if [ "$mesh" = one-rail ]; then
    BENCH_RAILS=1 mesh_configs "$dir/$mesh" $((port + i))
  else
    BENCH_RAILS=2 mesh_configs "$dir/$mesh" $((port + i))
  fi
  i=$((i + 1))
  for node in alpha beta; do
    [ "$mesh" != spread ] || echo "rail_policy: spread" >>"$dir/$mesh/$node.yaml"
    spawn "$run" "$rdmamsgd" -c "$dir/$mesh/$node.yaml" --node "$node" \
      >"$dir/$mesh/$node.log" 2>&1
  done
done
for mesh in "${meshes[@]}"; do
  log "waiting for the $mesh mesh"
  if ! mesh_wait "$rdmamsg" "$dir/$mesh"; then
    echo "rails.sh: the $mesh mesh did not form; logs in $dir/$mesh" >&2
    keep=1
    exit 1
  fi
done
# Spread's lanes: both up, one per rail (bounded: 10 s).
lanes_up() {
  "$rdmamsg" --socket "$dir/spread/alpha.sock" status --json | python3 -c 'import json, sys
p = next(p for p in json.load(sys.stdin)["peers"] if p["name"] == "beta")
lanes = [p] + p.get("lanes", [])
sys.exit(0 if len(lanes) == 2 and all(l["state"] == "established" and l.get("rail") == l["lane"]
                                      for l in lanes) else 1)'
}
for _ in $(seq 100); do
  if lanes_up; then break; fi
  sleep 0.1
done
lanes_up || {
  echo "rails.sh: the spread mesh's lanes are not one per rail; logs in $dir/spread" >&2
  keep=1
  exit 1
}

now_ns() { date +%s%N; }

# measure CASE RUN MESH: FLOWS concurrent throughput streams, each to its own service
measure() {
  local out="$dir/r/$1.r$2.$3" a="$dir/$3/alpha.sock" b="$dir/$3/beta.sock" size n f t0 t1
  local ps=() ok=1
  case $1 in
    tput64) size=64 n=$count ;;
    tput1m) size=1048576 n=$large ;;
  esac
  t0=$(now_ns)
  for f in $(seq "$flows"); do
    spawn bounded "$rdmamsg" --socket "$a" bench throughput "beta/$1x$2f$f" --sink-socket "$b" \
      --size "$size" --count "$n" --json
    ps+=("$last")
  done 2>"$out.err" >"$out.streams"
  for f in "${ps[@]}"; do reap "$f" || ok=0; done
  t1=$(now_ns)
  if [ "$ok" -eq 1 ]; then
    printf '{"case": "%s", "run": %s, "mesh": "%s", "flows": %s, "size": %s, "messages": %s, "seconds": %s}\n' \
      "$1" "$2" "$3" "$flows" "$size" $((n * flows)) "$(python3 -c "print(($t1 - $t0) / 1e9)")" \
      >"$out.json"
  else
    log "$3: a stream of $1 failed: $(head -c 300 "$out.err")"
  fi
}

log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$runs"); do
  order=()
  for k in 0 1 2; do order+=("${meshes[$(((r - 1 + k) % 3))]}"); done
  for c in tput64 tput1m; do
    log "run $r/$runs: $c, $flows flows (${order[*]})"
    for mesh in "${order[@]}"; do measure "$c" "$r" "$mesh"; done
  done
done
for mesh in "${meshes[@]}"; do
  "$rdmamsg" --socket "$dir/$mesh/alpha.sock" status --json >"$dir/r/status.$mesh.alpha.json"
done

mkdir -p "$(dirname "$json_out")"
python3 - "$dir/r" "$json_out" <<'PY'
import glob, json, statistics, sys

rows = [json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/*.json"))
        if not f.endswith("alpha.json")]
# How much each lane of the spread mesh carried: both rails, or the figure means nothing.
st = json.load(open(sys.argv[1] + "/status.spread.alpha.json"))
beta = next(p for p in st["peers"] if p["name"] == "beta")
lanes = {l["lane"]: l.get("messages_sent", 0) for l in [beta] + beta.get("lanes", [])}
table, out = [], {"results": rows, "spread_lanes_messages_sent": lanes}
for case in ("tput64", "tput1m"):
    by = {}
    for r in rows:
        if r["case"] == case:
            rate = r["messages"] / r["seconds"]
            by.setdefault(r["mesh"], {})[r["run"]] = (rate, rate * r["size"] / 1e6)
    base = by.get("one-rail", {})
    for mesh in ("one-rail", "active-standby", "spread"):
        got = by.get(mesh, {})
        if not got:
            continue
        ratios = [got[run][0] / base[run][0] for run in got if run in base]
        table.append({"case": case, "mesh": mesh,
                      "msgs_per_second": statistics.median(v[0] for v in got.values()),
                      "mb_per_second": statistics.median(v[1] for v in got.values()),
                      "ratio_to_one_rail": statistics.median(ratios) if ratios else None})
out["table"] = table
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(f"{'case':8} {'mesh':15} {'msg/s':>12} {'MB/s':>9} {'vs one rail':>12}")
for t in table:
    ratio = "-" if t["ratio_to_one_rail"] is None else f"{t['ratio_to_one_rail']:.2f}"
    print(f"{t['case']:8} {t['mesh']:15} {t['msgs_per_second']:12,.0f} "
          f"{t['mb_per_second']:9,.1f} {ratio:>12}")
print("spread: messages sent per lane:", ", ".join(f"lane {k}: {v}" for k, v in sorted(lanes.items())))
PY
log "full results: $json_out"
