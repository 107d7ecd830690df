#!/usr/bin/env python3
"""Summarises the raw results of bench/compare.sh: medians, ratios against the targets of
docs/performance.md, daemon efficiency (counters per message) and memory; prints the table
and writes everything as JSON.

usage: summarize.py RESULT_DIR JSON_OUT RUNS COUNT LARGE_COUNT RTT_COUNT WARMUP
       summarize.py --subjects JSON_OUT SUBJECTS_JSON
The JSON names the result files of the whole comparison ("result_files"): its own, and
bench/subjects.sh's once the second form, run after it, adds it.
"""
import json
import os
import platform
import re
import statistics
import sys

RDMA_KEYS = ["send_wrs", "send_wrs_signaled", "post_send_calls", "recv_wrs", "post_recv_calls",
             "batches_received", "credit_stalls"]
UNIT = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def flatten(obj, prefix=""):
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}_".lower()))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix.rstrip("_")] = float(obj)
    return out


def find(flat, pattern):
    for k, v in flat.items():
        if re.search(pattern, k):
            return k, v
    return None, None


def throughput(doc, size, count):
    """msgs/s and MB/s (10^6 bytes) from any of the benchmarks' JSON spellings."""
    flat = flatten(doc)
    _, rate = find(flat, r"(msgs?|messages?)_?(per_?s(ec(ond)?)?|ps|_s)$")
    _, mbs = find(flat, r"(^|_)(mb|megabytes)_?(per_?s(ec(ond)?)?|ps|_s)$")
    k, mibs = find(flat, r"(^|_)mib_?(per_?s(ec(ond)?)?|ps|_s)$")
    if mbs is None and mibs is not None:
        mbs = mibs * 1.048576
    if rate is None:
        _, secs = find(flat, r"(^|_)(seconds|elapsed_s|duration_s|secs)$")
        if secs is None:
            _, ms = find(flat, r"(^|_)(elapsed|duration)_ms$")
            secs = ms / 1e3 if ms is not None else None
        if secs:
            _, n = find(flat, r"(^|_)(count|messages)$")
            rate = (n or count) / secs
    if rate is not None and mbs is None:
        mbs = rate * size / 1e6
    return rate, mbs


def latency(doc):
    """p50, p99, p99.9 in microseconds."""
    flat = flatten(doc)
    res = {}
    for name, pat in (("p50", r"p50"), ("p99", r"p99(?![._]?9)"), ("p999", r"p99[._]?9")):
        k, v = find(flat, rf"(^|_){pat}(_(ns|us|ms|s))?$")
        if k is None:
            continue
        unit = re.search(r"(ns|us|ms|s)$", k) or re.search(r"_(ns|us|ms)_", k + "_")
        res[name] = v * UNIT[unit.group(1)] if unit else v
    return res


def load(rdir, name):
    path = os.path.join(rdir, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read().strip()
    for candidate in [text] + [l for l in reversed(text.splitlines()) if l.startswith("{")]:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def peer_rdma(status, peer):
    for p in (status or {}).get("peers", []):
        if p.get("name") == peer:
            return p.get("rdma", {})
    return {}


def efficiency(rdir, tag, messages):
    """Counters per message of one rdmamsg run, from the status before and after."""
    out = {}
    for node, peer in (("alpha", "beta"), ("beta", "alpha")):
        before = load(rdir, f"{tag}.before.{node}.status.json")
        after = load(rdir, f"{tag}.after.{node}.status.json")
        if before is None or after is None:
            continue
        e = {}
        rb, ra = peer_rdma(before, peer), peer_rdma(after, peer)
        for k in RDMA_KEYS:
            if k in ra and k in rb:
                e[f"rdma.{k}"] = (ra[k] - rb[k]) / messages
        for section in ("loop", "copies"):
            for k, v in after.get(section, {}).items():
                if isinstance(v, (int, float)) and k in before.get(section, {}):
                    e[f"{section}.{k}"] = (v - before[section][k]) / messages
        if "rss_bytes" in after:
            e["rss_bytes_after"] = after["rss_bytes"]
        # VmHWM, and the sampled peak of the daemon's own memory (without the clients'
        # shared memory it maps: compare.sh's own_rss).
        for suffix, key in (("hwm", "peak_rss_bytes"), ("own", "own_peak_rss_bytes")):
            path = os.path.join(rdir, f"{tag}.{node}.{suffix}")
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text and int(float(text)) > 0:
                    e[key] = int(float(text))
        out[node] = e
    return out


def system_cost(rdir, tag, round_trips):
    """Whole-machine cost per round trip from the counters compare.sh took around a run."""
    snaps = []
    for suffix in ("sys0", "sys1"):
        try:
            with open(os.path.join(rdir, f"{tag}.{suffix}")) as f:
                snaps.append({k: float(v) for k, v in (line.split() for line in f if line.strip())})
        except (OSError, ValueError):
            return {}
    a, b = snaps
    if not round_trips or any(k not in a or k not in b for k in ("ctxt", "busy", "tcp_out_segs")):
        return {}
    return {"context_switches": (b["ctxt"] - a["ctxt"]) / round_trips,
            "tcp_segments": (b["tcp_out_segs"] - a["tcp_out_segs"]) / round_trips,
            "cpu_us": (b["busy"] - a["busy"]) / b.get("hz", 100) * 1e6 / round_trips}


def client_calls(raw):
    """The bench's "clients" report per case and local path: medians over runs of each
    side's system calls per message (per round trip for rtt)."""
    out = {}
    for case in ("cli", "tput64", "tput1048576", "rtt"):
        for system in ("rdmamsg", "rdmamsg_socket", "rdmamsg_busy"):
            docs = [r.get("raw") or {} for r in raw.get(case, {}).get(system, [])]
            reports = [d.get("clients") for d in docs if d.get("clients")]
            if not reports:
                continue
            sides = {"senders": ("senders", "requester"), "sink": ("sink", "echo")}
            row = {}
            for name, keys in sides.items():
                row[name] = median([next(((c.get(k) or {}).get("syscalls") for k in keys
                                          if c.get(k)), None) for c in reports])
            row["bench_polls"] = median([c.get("bench_polls") for c in reports])
            label = case + {"rdmamsg": "", "rdmamsg_socket": "/socket",
                            "rdmamsg_busy": "/busy"}[system]
            out[label] = row
    return out


def fmt(v, digits=3):
    if v is None:
        return "n/a"
    if v >= 1e5:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}" if v < 100 else f"{v:.0f}"


def main():
    rdir, json_out = sys.argv[1], sys.argv[2]
    runs, count, large, rtt, warmup = (int(x) for x in sys.argv[3:8])
    raw = {}
    for run in range(1, runs + 1):
        for case, size, n in (("cli", 64, count), ("tput64", 64, count),
                              ("tput1048576", 1048576, large)):
            for system in ("rdmamsg", "rdmamsg_socket", "zmq", "uds", "uds_unbatched"):
                doc = load(rdir, f"{case}.{system}.{run}.json")
                rate, mbs = throughput(doc, size, n) if doc else (None, None)
                raw.setdefault(case, {}).setdefault(system, []).append(
                    {"run": run, "raw": doc, "msgs_per_sec": rate, "mb_per_sec": mbs,
                     "system": system_cost(rdir, f"{case}.{system}.{run}", n)})
        for system in ("rdmamsg", "rdmamsg_socket", "rdmamsg_busy", "zmq", "uds"):
            doc = load(rdir, f"rtt.{system}.{run}.json")
            raw.setdefault("rtt", {}).setdefault(system, []).append(
                {"run": run, "raw": doc, **(latency(doc) if doc else {}),
                 "system": system_cost(rdir, f"rtt.{system}.{run}", rtt + warmup)})

    def med(case, system, key):
        return median([r.get(key) for r in raw.get(case, {}).get(system, [])])

    rows = []

    def row(name, key, case, better, target, unit, system="rdmamsg", socket="rdmamsg_socket"):
        r, z = med(case, system, key), med(case, "zmq", key)
        sk = med(case, socket, key) if socket else None
        u, uu = med(case, "uds", key), med(case, "uds_unbatched", key)
        ratio = r / z if r is not None and z else None
        socket_ratio = sk / z if sk is not None and z else None
        met = None
        if target is not None and ratio is not None:
            met = ratio >= target if better == "higher" else ratio <= target
        rows.append({"case": name, "unit": unit, "rdmamsg": r, "rdmamsg_socket": sk, "zmq": z,
                     "uds": u, "uds_unbatched": uu, "ratio": ratio,
                     "socket_ratio": socket_ratio, "better": better, "target": target,
                     "met": met})

    # Targets: issue 22's goals for the shared-memory path (docs/performance.md).
    row("CLI stream 64 B", "msgs_per_sec", "cli", "higher", 4.0, "msg/s")
    row("throughput 64 B", "msgs_per_sec", "tput64", "higher", 6.0, "msg/s")
    row("throughput 1 MiB", "mb_per_sec", "tput1048576", "higher", 4.0, "MB/s")
    row("round trip 64 B p50", "p50", "rtt", "lower", 0.4, "us")
    row("round trip 64 B p99", "p99", "rtt", "lower", 0.5, "us")
    row("round trip 64 B p99.9", "p999", "rtt", "lower", 1.0, "us")
    # Beside them, no goal of their own: busy clients (over the socket every client sleeps).
    if any(r.get("p50") for r in raw.get("rtt", {}).get("rdmamsg_busy", [])):
        for label, key in (("p50", "p50"), ("p99", "p99"), ("p99.9", "p999")):
            row(f"  busy clients {label}", key, "rtt", "lower", None, "us",
                system="rdmamsg_busy", socket=None)

    eff, eff_runs = {}, {}
    cases = [(c, m, sys_) for c, m in (("cli", count), ("tput64", count),
                                       ("tput1048576", large), ("rtt", rtt + warmup))
             for sys_ in ("rdmamsg", "rdmamsg_socket")]
    for case0, msgs, system in cases:
        case = case0 if system == "rdmamsg" else case0 + "/socket"
        per_run = [efficiency(rdir, f"{case0}.{system}.{run}", msgs)
                   for run in range(1, runs + 1)]
        eff_runs[case] = per_run
        merged = {}
        for node in ("alpha", "beta"):
            keys = sorted({k for e in per_run for k in e.get(node, {})})
            merged[node] = {k: median([e.get(node, {}).get(k) for e in per_run]) for k in keys}
            for k in ("peak_rss_bytes", "own_peak_rss_bytes", "rss_bytes_after"):
                vals = [e.get(node, {}).get(k) for e in per_run if e.get(node, {}).get(k)]
                if vals:
                    merged[node][k] = max(vals)
        eff[case] = merged
    # The goal is the daemon's own memory; VmHWM (with the clients' shared memory it has
    # touched) is in the table below. Without a sampled figure, VmHWM stands in.
    key = "own_peak_rss_bytes" if any(
        e[n].get("own_peak_rss_bytes") for e in eff.values() for n in e) else "peak_rss_bytes"
    peak = max([e[n].get(key, 0) for e in eff.values() for n in e] or [0])
    rows.append({"case": "daemon own peak RSS" if key.startswith("own") else "daemon peak RSS",
                 "unit": "MiB", "rdmamsg": peak / 2**20 or None,
                 "rdmamsg_socket": None, "socket_ratio": None,
                 "zmq": None, "uds": None, "uds_unbatched": None, "ratio": None,
                 "better": "lower", "target": 64, "met": (peak / 2**20 < 64) if peak else None})

    # System calls per message at full rate (64 B throughput, shared memory), the goal's
    # "below 0.01 in both the client and the daemon": the busier daemon, and the busier
    # client (its library's calls plus the bench's polls of its fd, one thread for both).
    calls = client_calls(raw)
    d64 = [eff.get("tput64", {}).get(n, {}).get("loop.syscalls") for n in ("alpha", "beta")]
    d64 = max([v for v in d64 if v is not None], default=None)
    c64 = calls.get("tput64", {})
    c64 = max([v for k, v in c64.items() if k != "bench_polls" and v is not None], default=None)
    if c64 is not None:
        c64 += calls["tput64"].get("bench_polls") or 0
    for name, value in (("daemon syscalls/msg 64 B", d64), ("client syscalls/msg 64 B", c64)):
        rows.append({"case": name, "unit": "calls", "rdmamsg": value, "rdmamsg_socket": None,
                     "socket_ratio": None, "zmq": None, "uds": None, "uds_unbatched": None,
                     "ratio": None, "better": "lower", "target": 0.01,
                     "met": (value < 0.01) if value is not None else None})

    print()
    print("rdmamsg: the local hops through shared memory; socket: through the Unix socket")
    print(f"{'case':24} {'unit':6} {'rdmamsg':>12} {'socket':>12} {'zmq':>12} "
          f"{'uds (unbatched)':>24} {'rdmamsg/zmq':>11} {'socket/zmq':>10} {'target':>8} met?")
    for r in rows:
        uds = fmt(r["uds"]) + (f" ({fmt(r['uds_unbatched'])})" if r["uds_unbatched"] else "")
        target = "" if r["target"] is None else (
            f"<{r['target']}" if r["case"].startswith(("daemon", "client")) else
            (">=" if r["better"] == "higher" else "<=") + f"{r['target']}x")
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        sratio = "" if r["socket_ratio"] is None else f"{r['socket_ratio']:.2f}x"
        print(f"{r['case']:24} {r['unit']:6} {fmt(r['rdmamsg']):>12} "
              f"{fmt(r['rdmamsg_socket']):>12} {fmt(r['zmq']):>12} "
              f"{uds if r['uds'] else '':>24} {ratio:>11} {sratio:>10} {target:>8} {met}")

    print("\nrdmamsgd work per message (rtt: per round trip), medians over runs; peak RSS is VmHWM,"
          " with the clients' shared memory the daemon touched, own MiB without it:")
    keys = ["rdma.send_wrs", "rdma.post_send_calls", "rdma.send_wrs_signaled", "rdma.recv_wrs",
            "rdma.post_recv_calls", "loop.wakeups", "loop.socket_reads", "loop.socket_writes",
            "loop.syscalls"]
    print(f"{'case':19} {'node':6} " + " ".join(f"{k.split('.')[1][:13]:>13}" for k in keys)
          + f" {'peak RSS MiB':>12} {'own MiB':>8}")
    for case, nodes in eff.items():
        for node, e in nodes.items():
            if not e:
                continue
            cells = " ".join(f"{fmt(e.get(k), 3):>13}" for k in keys)
            rss, own = e.get("peak_rss_bytes"), e.get("own_peak_rss_bytes")
            print(f"{case:19} {node:6} {cells} {fmt(rss / 2**20 if rss else None):>12} "
                  f"{fmt(own / 2**20 if own else None):>8}")

    print("\nrdmamsgd copies per message: bytes copied / payload bytes, by stage "
          "(rtt: per round trip), medians over runs:")
    stages = ["client_in", "flow_queue", "send_buffer", "reassembly", "deliver", "client_out"]
    print(f"{'case':19} {'node':6} " + " ".join(f"{s:>11}" for s in stages) + f" {'total':>7}"
          + f" {'in place':>9} {'in area':>8}")
    payload = {"cli": 63, "tput64": 64, "tput1048576": 1048576, "rtt": 64}
    for case, nodes in eff.items():
        size = payload[case.split("/")[0]]
        for node, e in nodes.items():
            vals = [e.get(f"copies.{s}_bytes") for s in stages]
            if any(v is None for v in vals):
                continue
            cells = " ".join(f"{v / size:>11.2f}" for v in vals)
            placed = e.get("copies.sent_in_place_bytes") or 0
            area = e.get("copies.delivered_in_area_bytes") or 0
            print(f"{case:19} {node:6} {cells} {sum(vals) / size:>7.2f} {placed / size:>9.2f}"
                  f" {area / size:>8.2f}")

    print("\nwhole machine per message (all processes and the kernel), medians over runs:")
    print(f"{'case':18} {'system':14} {'context switches':>17} {'CPU us':>8}")
    for case in ("cli", "tput64", "tput1048576"):
        for system in ("rdmamsg", "rdmamsg_socket", "zmq"):
            per_run = [r.get("system", {}) for r in raw.get(case, {}).get(system, [])]
            c = {k: median([p.get(k) for p in per_run]) for k in ("context_switches", "cpu_us")}
            if c["context_switches"] is None:
                continue
            print(f"{case:18} {system:14} {fmt(c['context_switches'], 3):>17} "
                  f"{fmt(c['cpu_us'], 3):>8}")

    print("\nclient system calls per message (rtt: per round trip), medians over runs: "
          "librdmamsg's own (Client::counters) and the bench's polls of the clients' fds:")
    print(f"{'case':19} {'sender/requester':>17} {'sink/echo':>10} {'bench polls':>12}")
    for case, c in calls.items():
        print(f"{case:19} {fmt(c.get('senders'), 3):>17} {fmt(c.get('sink'), 3):>10} "
              f"{fmt(c.get('bench_polls'), 3):>12}")

    print("\nwhole machine per round trip (all processes and the kernel), medians over runs:")
    print(f"{'system':14} {'context switches':>17} {'TCP segments':>13} {'CPU us':>8}")
    cost = {}
    for system in ("rdmamsg", "rdmamsg_socket", "rdmamsg_busy", "zmq", "uds"):
        per_run = [r.get("system", {}) for r in raw.get("rtt", {}).get(system, [])]
        cost[system] = {k: median([c.get(k) for c in per_run])
                        for k in ("context_switches", "tcp_segments", "cpu_us")}
        c = cost[system]
        print(f"{system:14} {fmt(c['context_switches']):>17} {fmt(c['tcp_segments']):>13} "
              f"{fmt(c['cpu_us']):>8}")

    result = {
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "kernel": platform.release()},
        "parameters": {"runs": runs, "count_64B": count, "count_1MiB": large,
                       "round_trips": rtt, "warmup": warmup},
        "result_files": {"compare": json_out, "subjects": None},
        "table": rows, "round_trip_system_cost": cost, "client_calls": calls, "efficiency": eff, "efficiency_runs": eff_runs, "runs": raw,
    }
    with open(json_out, "w") as f:
        json.dump(result, f, indent=2)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def add_subjects(json_out, subjects_json):
    with open(json_out) as f:
        result = json.load(f)
    result["result_files"]["subjects"] = subjects_json
    with open(json_out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--subjects":
        add_subjects(sys.argv[2], sys.argv[3])
    else:
        main()
