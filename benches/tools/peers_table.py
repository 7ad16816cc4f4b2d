#!/usr/bin/env python3
"""bespoke beside GiMMiK and cuBLAS: joins `bespoke mm bench --json` output with benches/peers/gimmik_cublas.py
output (same matrices, N and precision) into one markdown table and a summary.

Usage: peers_table.py BESPOKE.json PEERS.json [--balance FLOP_PER_BYTE]

A matrix counts as bandwidth-bound when its flops per minimum byte (2·nnz·N / bytes) are below --balance (the
card's peak flop rate over its copy bandwidth; default 20, about an H100's f64 balance: 67 TFLOP/s over
~3.3 TB/s). The issue's GPU goals: bespoke at or below GiMMiK's time in geomean, bandwidth-bound matrices at
≥ 0.9 of the copy bandwidth.
"""
import argparse

from mm_table import geomean, load  # same folder: one JSON loader and geomean for both tables


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bespoke")
    ap.add_argument("peers")
    ap.add_argument("--balance", type=float, default=20.0)
    a = ap.parse_args()
    b, p = load(a.bespoke), load(a.peers)
    if (b["n"], b["dtype"]) != (p["n"], p["dtype"]):
        raise SystemExit(f"bespoke ran {b['dtype']} N = {b['n']}, peers {p['dtype']} N = {p['n']}")
    peers = {m["name"]: m for m in p["matrices"]}
    rows, ratio, bw = [], [], []
    print(f"bespoke on {b['adapter'].get('name')} (copy {b['copy_gbps']:.0f} GB/s); peers on "
          f"{p['adapter'].get('name')} (copy {p['copy_gbps']:.0f} GB/s); {b['dtype']}, N = {b['n']}\n")
    print("| matrix | M×K | nnz | β | bespoke | ms | of copy | GiMMiK | ms | cuBLAS ms | GiMMiK / bespoke |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in b["matrices"]:
        q = peers.get(m["name"])
        if q is None:
            continue
        r = q["seconds"] / m["seconds"]
        ratio.append(r)
        nbytes = m["gbps"] * 1e9 * m["seconds"]
        if 2 * m["nnz"] * b["n"] / nbytes < a.balance:
            bw.append(m["copy_fraction"])
        print(f"| {m['name']} | {m['m']}×{m['k']} | {m['nnz']} | {m['beta']:g} | {m['variant']} | "
              f"{m['seconds'] * 1e3:.3f} | {m['copy_fraction']:.2f} | {q['variant']} | {q['seconds'] * 1e3:.3f} | "
              f"{q['dense_seconds'] * 1e3:.3f} | ×{r:.2f} |")
        rows.append(m["name"])
    missing = sorted(set(m["name"] for m in b["matrices"]) - set(rows))
    print(f"\n{len(rows)} matrices in both ({len(missing)} only in bespoke's run). GiMMiK time / bespoke time: "
          f"geomean ×{geomean(ratio):.2f} (> 1: bespoke faster), min ×{min(ratio):.2f}, "
          f"{sum(r < 1 for r in ratio)} where GiMMiK is faster.")
    if bw:
        print(f"Bandwidth-bound (< {a.balance:g} flop/B): {len(bw)} matrices, fraction of copy median "
              f"{sorted(bw)[len(bw) // 2]:.2f}, min {min(bw):.2f}, {sum(f >= 0.9 for f in bw)} at ≥ 0.9.")


if __name__ == "__main__":
    main()
