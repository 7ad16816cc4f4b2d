#!/usr/bin/env python3
"""Markdown rows for `bespoke mm dense-bench --json` files: each tiling in a loop, unrolled (-u), with its lanes
laid in rows (-r, the layout before 2026-12-03) and ablated.

    python3 benches/tools/dense_table.py DIR        # the dense-<dtype>-4096-<tiling>[-u|-<ablation>].json of a session
    python3 benches/tools/dense_table.py FILE ...   # any dense-bench JSON files

One row per tiling: GFLOP/s and fraction of the measured FMA peak of the plain kernel (lanes paired), of its
unrolled twin, of its rows twin and of each ablation (docs/dense-model.md, "Ablations"), with each one's time against the plain kernel's.
"""

import glob
import os
import sys

from mm_table import load  # same folder

COLUMNS = ["plain", "-u", "-r", "stage-once", "fragments-once"]


def variant(d):
    """(tiling without -u or -r, column) of one dense-bench JSON."""
    key = d["params"]["key"]
    ablation = d.get("ablation", "none")
    if ablation != "none":
        return key, ablation
    for twin in ("-u", "-r"):
        if key.endswith(twin):
            return key[: -len(twin)], twin
    return key, "plain"


def table(paths):
    rows = {}
    for p in paths:
        d = load(p)
        if "params" not in d or d.get("bounds_checks"):
            continue
        key, col = variant(d)
        shape = f'{d["m"]}×{d["n"]}×{d["k"]} {d["dtype"]}'
        rows.setdefault((shape, key), {})[col] = d
    out = ["| shape | tiling | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for (shape, key), cols in sorted(rows.items()):
        plain = cols.get("plain")
        cells = []
        for c in COLUMNS:
            d = cols.get(c)
            if d is None:
                cells.append("—")
                continue
            g = d["gflops"]
            cell = (f"{g:,.0f}" if g >= 100 else f"{g:.3g}").replace(",", " ") + f' ({d["peak_fraction"]:.2f})'
            if plain is not None and c != "plain":
                cell += f', ×{plain["seconds"] / d["seconds"]:.2f}'
            cells.append(cell)
        out.append(f"| {shape} | {key} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(args):
    if not args:
        print(__doc__)
        return 2
    paths = []
    for a in args:
        if os.path.isdir(a):
            paths += sorted(glob.glob(os.path.join(a, "dense-*-4096-*.json")))
        else:
            paths.append(a)
    print(table(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
