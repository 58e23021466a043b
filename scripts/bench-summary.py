#!/usr/bin/env python3
"""Summarize `verdict bench --out` files of interleaved rounds.

    bench-summary.py DIR ROUNDS LABEL

Files are DIR/<config>-r<round>.json; rows are grouped by config,
workload and mode, and each figure is printed as median [min–max].
Used by scripts/bench-routes.sh and scripts/bench-portable.sh.
"""
import glob
import json
import os
import statistics
import sys

out, rounds, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*-r*.json"))):
    cfg = os.path.basename(f).rsplit("-r", 1)[0]
    for r in json.load(open(f))["rows"]:
        rows.setdefault((cfg, r["workload"], r["mode"]), []).append(r)


def stat(xs):
    return "%8.2f [%6.2f–%6.2f]" % (statistics.median(xs), min(xs), max(xs))


print("%-20s %-14s %-9s %-26s %-26s %s" % (label, "workload", "mode", "prefill tok/s", "decisions/s", "vs fresh (of bound)"))
for (cfg, w, m), rs in sorted(rows.items()):
    tok = stat([r["prefill_tokens_per_s"] for r in rs]) if w.startswith("W0") else "-"
    dps = stat([r["decisions_per_s"] for r in rs])
    vs = "-" if w.startswith("W0") else "%.2fx (%.0f%%)" % (
        statistics.median([r["speedup_vs_fresh"] for r in rs]), 100 * statistics.median([r["of_bound"] for r in rs]))
    print("%-20s %-14s %-9s %-26s %-26s %s" % (cfg, w, m, tok, dps, vs))
print("%d rounds, configurations interleaved; median [min–max]" % rounds)
