#!/usr/bin/env python3
"""Markdown tables from `bespoke mm bench --json` output: a summary by element shape and the per-matrix table.

Usage: mm_table.py RESULT.json [--per-matrix]
"""
import gzip
import json
import math
import sys
from collections import defaultdict


def load(path):
    """A JSON result, plain or gzipped."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main():
    d = load(sys.argv[1])
    ms = d["matrices"]
    sp = [m["speedup_vs_dense"] for m in ms if m["speedup_vs_dense"]]
    print(f"adapter: {d['adapter'].get('name', d['adapter'])}; {d['dtype']}, N = {d['n']}, "
          f"copy {d['copy_gbps']:.2f} GB/s; {len(ms)} matrices; geomean speedup over dense "
          f"×{geomean(sp):.2f}, min ×{min(sp):.2f}, {sum(s < 1 for s in sp)} below 1.0; "
          f"max rel err {max(m['rel_err'] for m in ms):.1e}; "
          f"tuning {sum(m.get('tune_seconds', 0) for m in ms) / 60:.1f} min in all"
          f" (+{sum(m.get('model_seconds', 0) for m in ms):.0f} s measuring the dense model once"
          f", +{sum(m.get('probe_seconds', 0) for m in ms):.0f} s probing compile laws once per family)\n")
    by = defaultdict(list)
    for m in ms:
        by[m["name"].split("-")[0]].append(m)
    fam = defaultdict(int)
    for m in ms:
        fam[m["variant"].split("-")[0].split(":")[0]] += 1
    print("| shape | matrices | geomean speedup | min speedup | geomean fraction of copy | chosen families |")
    print("|---|---|---|---|---|---|")
    for shape, rows in sorted(by.items()):
        f = defaultdict(int)
        for m in rows:
            f[m["variant"].split("-")[0].split(":")[0]] += 1
        print(f"| {shape} | {len(rows)} | ×{geomean([m['speedup_vs_dense'] for m in rows]):.2f} | "
              f"×{min(m['speedup_vs_dense'] for m in rows):.2f} | "
              f"{geomean([m['copy_fraction'] for m in rows]):.2f} | "
              + ", ".join(f"{k} {v}" for k, v in sorted(f.items())) + " |")
    print("\nchosen overall: " + ", ".join(f"{k} {v}" for k, v in sorted(fam.items())))
    if "--per-matrix" in sys.argv:
        print("\n| matrix | M×K | nnz | β | chosen | ms | GB/s | of copy | dense ms | speedup | rel err | tuning s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for m in ms:
            print(f"| {m['name'].replace('-dflt', '')} | {m['m']}×{m['k']} | {m['nnz']} | {m['beta']:g} | "
                  f"{m['variant']} | {m['seconds'] * 1e3:.2f} | {m['gbps']:.2f} | {m['copy_fraction']:.2f} | "
                  f"{(m['dense_seconds'] or float('nan')) * 1e3:.1f} | ×{m['speedup_vs_dense']:.2f} | "
                  f"{m['rel_err']:.1e} | {m.get('tune_seconds', 0):.1f} |")


if __name__ == "__main__":
    main()
