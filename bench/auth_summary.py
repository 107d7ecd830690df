#!/usr/bin/env python3
"""Summarises the raw results of bench/auth.sh: per case and mode the median and range over
the runs, and the cost of each protected mode against plain, taken within each run (the
median of the per-run costs, and their range); prints the table and writes it as JSON.

usage: auth_summary.py RESULT_DIR JSON_OUT RUNS COUNT LARGE RTT WARMUP

Result files are RESULT_DIR/<case>.r<run>.<mode>.json (rdmamsg bench --json), and
status.<mode>.alpha.json: alpha's status after the runs (the batches' protection, the key
rotations and the batches rejected, which must be none).
"""
import json
import os
import sys

from summarize import latency, load, median, throughput

MODES = ("plain", "authenticated", "encrypted")
GOAL = 0.10  # authentication's cost: under 10 % of throughput and of the round trip's p50
# case -> (title, size, metric, larger is better)
CASES = {
    "tput64": ("throughput 64 B (msg/s)", 64, "rate", True),
    "tput1m": ("throughput 1 MiB (MB/s)", 1048576, "mbs", True),
    "rtt64": ("round trip 64 B p50 (us)", 64, "p50", False),
    "rtt64_p99": ("round trip 64 B p99 (us)", 64, "p99", False),
}


def value(doc, case):
    _, size, metric, _ = CASES[case]
    if doc is None:
        return None
    if metric in ("rate", "mbs"):
        rate, mbs = throughput(doc, size, 0)
        return rate if metric == "rate" else mbs
    return latency(doc).get(metric)


def cost(base, other, better_high):
    """The fraction that OTHER costs against BASE (positive: OTHER is worse)."""
    if not base or other is None:
        return None
    return (base - other) / base if better_high else (other - base) / base


def fmt(v):
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def pct(v):
    return "-" if v is None else f"{v * 100:+.1f} %"


def main():
    rdir, json_out, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    count, large, rtt, warmup = (int(a) for a in sys.argv[4:8])
    out = {"runs": runs, "count": count, "large": large, "round_trips": rtt,
           "warmup": warmup, "goal": GOAL, "cases": {}, "modes": {}}
    for mode in MODES:
        status = load(rdir, f"status.{mode}.alpha.json") or {}
        beta = next((p for p in status.get("peers", []) if p.get("name") == "beta"), {})
        out["modes"][mode] = {
            "batch_protection": beta.get("batch_protection", "none"),
            "key_rotations": beta.get("key_rotations", 0),
            "batches_rejected": sum(beta.get("batches_rejected", {}).values()),
        }
    print(f"\nBatch authentication: medians of {runs} run(s); cost against plain within each run"
          f" (median [range]); goal for authenticated: under {GOAL * 100:.0f} %")
    print(f"| case | plain | authenticated | encrypted | authenticated cost | encrypted cost |")
    print("|---|---|---|---|---|---|")
    for case, (title, _, _, better_high) in CASES.items():
        raw = case.split("_")[0]
        per_mode = {m: [value(load(rdir, f"{raw}.r{r}.{m}.json"), case)
                        for r in range(1, runs + 1)] for m in MODES}
        entry = {"title": title}
        cells = []
        for m in MODES:
            vals = [v for v in per_mode[m] if v is not None]
            entry[m] = {"median": median(vals), "runs": per_mode[m]}
            cells.append(fmt(median(vals)))
        costs = []
        for m in MODES[1:]:
            per_run = [cost(b, o, better_high) for b, o in zip(per_mode["plain"], per_mode[m])]
            per_run = [c for c in per_run if c is not None]
            entry[f"{m}_cost"] = {"median": median(per_run), "runs": per_run}
            span = f" [{pct(min(per_run))}, {pct(max(per_run))}]" if len(per_run) > 1 else ""
            costs.append(pct(median(per_run)) + span)
        out["cases"][case] = entry
        print(f"| {title} | " + " | ".join(cells + costs) + " |")
    for m, info in out["modes"].items():
        print(f"  {m}: batches {info['batch_protection']}, key rotations {info['key_rotations']},"
              f" batches rejected {info['batches_rejected']}")
    with open(json_out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
