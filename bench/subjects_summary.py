#!/usr/bin/env python3
"""Summarises the raw results of bench/subjects.sh: per case and system the median and the
range over the runs, the ratios rdmamsg/NATS and rdmamsg/ZeroMQ of every run (measured in
the same run), drops and order; prints the tables and writes everything as JSON.

usage: subjects_summary.py RESULT_DIR JSON_OUT RUNS COUNT LARGE FAN RTT WARMUP NOISE SYSTEMS
(SYSTEMS: the systems measured, "rdmamsg nats zmq" or one of them)

Result files are RESULT_DIR/<case>.r<run>.<system>.<role>.json, one JSON line each (the
last line that parses): role sink_a / sink_b (sub-sink), pub (pub-stream), rr
(request-latency), hold (hold-subs), cpu (the CPU time both servers spent meanwhile).
"""
import json
import os
import platform
import re
import statistics
import sys

SYSTEMS = ("rdmamsg", "nats", "zmq")
NAMES = {"rdmamsg": "rdmamsg", "nats": "NATS", "zmq": "ZeroMQ"}


def load_all(rdir):
    docs = {}
    for name in sorted(os.listdir(rdir)):
        m = re.fullmatch(r"(\w+)\.r(\d+)\.(rdmamsg|nats|zmq)\.(\w+)\.json", name)
        if not m:
            continue
        with open(os.path.join(rdir, name)) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
        for line in reversed(lines):
            try:
                docs[(m[1], int(m[2]), m[3], m[4])] = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    return docs


def figure(docs, case, run, system):
    """The case's figures for one run of one system, or None when it failed; a ZeroMQ stream
    that lost messages gives what was lost instead of rates."""
    get = lambda role: docs.get((case, run, system, role))
    pub = get("pub")
    cpu = get("cpu")
    if case == "rr":
        rr = get("rr")
        if rr is None:
            return None
        out = {k: rr[k] for k in ("p50_us", "p99_us", "p999_us", "mean_us", "max_us")}
        if cpu is not None:
            out["server_cpu_us"] = cpu["server_cpu_seconds"] * 1e6 / (rr["count"] + rr["warmup"])
        return out
    sinks = [s for s in (get("sink_a"), get("sink_b")) if s is not None]
    if pub is None or not sinks:
        return None
    if not all(s.get("complete") for s in sinks):
        # ZeroMQ's subscribers end after a while without messages and count what never
        # arrived (PUB/SUB drops silently); the others' fail.
        if system != "zmq":
            return None
        return {"lost": sum(s["dropped"] for s in sinks),
                "deliveries_expected": sum(s["count"] * s["subs"] for s in sinks)}
    secs = max(s["seconds"] for s in sinks)
    count = sinks[0]["count"]
    size = sinks[0]["size"]
    subs = sum(s["subs"] for s in sinks)
    out = {
        "msgs_per_sec": count / secs,
        "mb_per_sec": count * size / 1e6 / secs,
        "deliveries_per_sec": count * subs / secs,
        "publisher_msgs_per_sec": pub["msgs_per_sec"],
        "subscribers": subs,
        "out_of_order": sum(s["out_of_order"] for s in sinks),
        "gaps": sum(s["gaps"] for s in sinks),
        # NATS: what the subscriptions dropped (natsSubscription_GetDropped); rdmamsg: what the
        # publisher's completions counted as dropped by slow consumers; ZeroMQ: what never
        # arrived.
        "dropped": pub["dropped"] if system == "rdmamsg" else sum(s["dropped"] for s in sinks),
    }
    if cpu is not None:  # per message published
        out["server_cpu_us"] = cpu["server_cpu_seconds"] * 1e6 / count
    hold = get("hold")
    if hold is not None:
        out["noise_setup_seconds"] = hold["setup_seconds"]
        out["noise_ready_seconds"] = hold["ready_seconds"]
    return out


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "MB/s":
        return f"{v:,.0f}"
    if unit == "us":
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e4:
        return f"{v / 1e3:,.0f} K"
    return f"{v:,.0f}"


def cell(s, unit, measured=True):
    if not measured:
        return "not measured"
    if s is None:
        return "failed"
    if len(s["runs"]) == 1:
        return f"{fmt(s['median'], unit)} {unit}"
    return f"{fmt(s['median'], unit)} ({fmt(s['min'], unit)}-{fmt(s['max'], unit)}) {unit}"


def lost(figures):
    """What a system's runs lost, when any did (ZeroMQ): "; lost L of D (run R)"."""
    return "".join(f"; lost {f['lost']:,} of {f['deliveries_expected']:,} (run {r})"
                   for r, f in enumerate(figures, 1) if f and "lost" in f)


def main():
    rdir, json_out = sys.argv[1], sys.argv[2]
    runs, count, large, fan, rtt, warmup, noise = (int(a) for a in sys.argv[3:10])
    measured = sys.argv[10].split()
    docs = load_all(rdir)
    per = {}  # (case, system) -> [figure per run]
    for case in ("p2p64", "p2p1m", "fanout", "rr", "cost0", "costn"):
        for system in SYSTEMS:
            per[(case, system)] = [figure(docs, case, r, system) for r in range(1, runs + 1)]

    # (label, case, key, unit, higher is better)
    rows = [
        (f"p2p 64 B ({count:,} messages)", "p2p64", "msgs_per_sec", "msg/s", True),
        (f"p2p 1 MiB ({large:,} messages)", "p2p1m", "mb_per_sec", "MB/s", True),
        (f"fan-out 8+8, 64 B ({fan:,} messages)", "fanout", "msgs_per_sec", "msg/s", True),
        ("  the same, deliveries", "fanout", "deliveries_per_sec", "msg/s", True),
        (f"request/reply 64 B p50 ({rtt:,})", "rr", "p50_us", "us", False),
        ("request/reply 64 B p99", "rr", "p99_us", "us", False),
        ("request/reply 64 B p99.9", "rr", "p999_us", "us", False),
        ("publish cost, 0 other subscriptions", "cost0", "msgs_per_sec", "msg/s", True),
        (f"publish cost, {noise:,} other subscriptions", "costn", "msgs_per_sec", "msg/s", True),
    ]
    summary = []
    others = [s for s in ("nats", "zmq") if s in measured and "rdmamsg" in measured]
    width = 26
    print()
    print(f"{'case':<44} " + " ".join(f"{NAMES[s]:<{width}}" for s in SYSTEMS).rstrip())
    ratio_lines = []
    for label, case, key, unit, higher in rows:
        st = {}
        for system in SYSTEMS:
            st[system] = stats([f.get(key) if f else None for f in per[(case, system)]])
        ratios = {}
        for other in ("nats", "zmq"):
            ratios[other] = [a[key] / b[key] if a and b and a.get(key) and b.get(key) else None
                             for a, b in zip(per[(case, "rdmamsg")], per[(case, other)])]
        cells = []
        for system in SYSTEMS:
            loss = lost(per[(case, system)])
            if st[system] is None and loss:  # every run lost messages
                cells.append(loss[2:])
            else:
                cells.append(cell(st[system], unit, system in measured) + loss)
        print(f"{label:<44} " + " ".join(f"{c:<{width}}" for c in cells).rstrip())
        ratio_lines.append(f"{label:<44} " + " ".join(
            f"{', '.join('-' if x is None else f'{x:.2f}x' for x in ratios[o]):<{width}}"
            for o in others).rstrip())
        summary.append({"case": label, "key": key, "unit": unit, "higher_is_better": higher,
                        **{s: st[s] for s in SYSTEMS}, "ratios": ratios})
    # The cost of the other subscriptions, per system: costn / cost0 in the same run.
    cost = {}
    for system in SYSTEMS:
        cost[system] = [b["msgs_per_sec"] / a["msgs_per_sec"]
                        if a and b and "msgs_per_sec" in a and "msgs_per_sec" in b else None
                        for a, b in zip(per[("cost0", system)], per[("costn", system)])]
    print(f"{'  with / without other subscriptions':<44} "
          + " ".join(f"{', '.join('-' if x is None else f'{x:.2f}x' for x in cost[s]):<{width}}"
                     if s in measured else " " * width for s in SYSTEMS).rstrip())
    if others:
        print()
        print(f"{'per run':<44} "
              + " ".join(f"{'rdmamsg / ' + NAMES[o]:<{width}}" for o in others).rstrip())
        for line in ratio_lines:
            print(line)
    print()
    print("Rates and MB/s: higher is better, ratio > 1 favours rdmamsg; round trips: lower is")
    print("better, ratio < 1 favours rdmamsg. Rates are from the publisher's first publish to the")
    print("last subscriber's last message. rdmamsg confirms every publish end to end (each")
    print("matching subscriber took it); NATS core and ZeroMQ PUB/SUB are at most once and")
    print("confirm nothing. ZeroMQ's queues (high-water marks) hold a case's whole stream, so")
    print("that none drops; a loss would show as \"lost\" instead of a rate.")
    for case in ("p2p64", "p2p1m", "fanout", "cost0", "costn"):
        for system in SYSTEMS:
            fs = [f for f in per[(case, system)] if f and "lost" not in f]
            if not fs:
                continue
            drops = [f["dropped"] for f in fs]
            order = [f["out_of_order"] + f["gaps"] for f in fs]
            extra = ""
            if case == "costn" and "noise_setup_seconds" in fs[0]:
                extra = ", setting up the other subscriptions " + ", ".join(
                    f"{f['noise_setup_seconds']:.1f}" for f in fs) + " s"
            pubrate = ", ".join(fmt(f["publisher_msgs_per_sec"], "msg/s") for f in fs)
            cpu = ", ".join(f"{f['server_cpu_us']:.2f}" for f in fs if "server_cpu_us" in f)
            print(f"  {case:<7} {system:<8} dropped {drops}, out of order or missing {order}, "
                  f"publisher's own rate {pubrate}, servers' CPU per message {cpu} us{extra}")
    for system in SYSTEMS:
        fs = [f for f in per[("rr", system)] if f and "server_cpu_us" in f]
        if fs:
            print(f"  rr      {system:<8} servers' CPU per round trip "
                  + ", ".join(f"{f['server_cpu_us']:.1f}" for f in fs) + " us")
    doc = {
        "machine": {"nproc": os.cpu_count(), "kernel": platform.release()},
        "parameters": {"runs": runs, "count": count, "large": large, "fan": fan, "rtt": rtt,
                       "warmup": warmup, "noise": noise},
        "summary": summary,
        "cost_ratio": cost,
        "figures": {f"{c}.{s}": v for (c, s), v in per.items()},
        "raw": {".".join([c, f"r{r}", s, role]): d for (c, r, s, role), d in docs.items()},
    }
    with open(json_out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
