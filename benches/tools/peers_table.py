#!/usr/bin/env python3
"""bespoke beside GiMMiK: joins `bespoke mm bench --json` output with a peer's output on the same matrices, N and
precision — benches/peers/gimmik_cublas.py (GiMMiK's CUDA kernels and cuBLAS) or benches/peers/gimmik_pocl.py
(GiMMiK's OpenCL kernels on PoCL) — into one markdown table and a summary.

Usage: peers_table.py BESPOKE.json PEERS.json [--balance FLOP_PER_BYTE]

Each side's fraction of copy is against its own runtime's copy figure (bespoke's probe on its adapter, the peer's
copy on its runtime), so the two runtimes' memory systems are compared fairly even when their copies differ.
Where both JSONs carry `same_size_copy_gbps` (each runtime's copy of the operator's own bytes), two more columns
give each side's fraction of that: on small operators it holds each runtime's launch cost and caches too. A
matrix the peer refused (GiMMiK's OpenCL backend takes at most 2048 non-zeros; PyFR then calls a BLAS) has no
peer time. Where bespoke's JSON carries `floor_seconds` (its access floor: a kernel with the operator's loads and
stores and an add per load, timed in alternation with the choice), two more columns give bespoke's time over its
floor and the floor's time over GiMMiK's: the second is how far from the peer a kernel that does nothing but the
operator's accesses already is on bespoke's adapter. With the CUDA peer, a matrix counts as bandwidth-bound when its flops per minimum byte are below
--balance (default 20, about an H100's f64 balance).
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
    rows, ratio, bw, fr_b, fr_p, ss_b, ss_p, ss_copy = [], [], [], [], [], [], [], []
    same = all("same_size_copy_gbps" in m for m in b["matrices"]) and all(
        "same_size_copy_gbps" in m for m in p["matrices"] if m.get("seconds") is not None)
    extra_h, extra_r = (" of a same-size copy | GiMMiK's of its same-size copy |", "---|---|") if same else ("", "")
    floor = all("floor_seconds" in m for m in b["matrices"])
    if floor:
        extra_h += " bespoke / its floor | floor / GiMMiK |"
        extra_r += "---|---|"
    over, floor_vs = [], []
    print(f"bespoke on {b['adapter'].get('name')} (copy {b['copy_gbps']:.2f} GB/s); peer {p.get('tool', '')} on "
          f"{p['adapter'].get('name')} (copy {p['copy_gbps']:.2f} GB/s); {b['dtype']}, N = {b['n']}\n")
    print("| matrix | M×K | nnz | β | bespoke | ms | of copy | GiMMiK | ms | of its copy | BLAS ms | "
          f"GiMMiK time / bespoke |{extra_h}")
    print(f"|---|---|---|---|---|---|---|---|---|---|---|---|{extra_r}")
    for m in b["matrices"]:
        q = peers.get(m["name"])
        if q is None:
            continue
        rows.append(m["name"])
        head = (f"| {m['name']} | {m['m']}×{m['k']} | {m['nnz']} | {m['beta']:g} | {m['variant']} | "
                f"{m['seconds'] * 1e3:.3f} | {m['copy_fraction']:.3f} |")
        if q.get("seconds") is None:
            print(f"{head} {q['variant']} | – | – | – | – |" + (" – | – |" if same else "")
                  + (f" ×{m['over_floor']:.2f} | – |" if floor else ""))
            continue
        r = q["seconds"] / m["seconds"]
        ratio.append(r)
        qf = q.get("copy_fraction") or q["gbps"] / p["copy_gbps"]
        fr_b.append(m["copy_fraction"])
        fr_p.append(qf)
        nbytes = m["gbps"] * 1e9 * m["seconds"]
        if "dense_seconds" in q and 2 * m["nnz"] * b["n"] / nbytes < a.balance:
            bw.append(m["copy_fraction"])
        blas = f"{q['dense_seconds'] * 1e3:.3f}" if q.get("dense_seconds") else "–"
        tail = ""
        if same:
            sb, sp = m["gbps"] / m["same_size_copy_gbps"], q["gbps"] / q["same_size_copy_gbps"]
            ss_b.append(sb)
            ss_p.append(sp)
            ss_copy.append(m["same_size_copy_gbps"] / q["same_size_copy_gbps"])
            tail = f" {sb:.3f} | {sp:.3f} |"
        if floor:
            over.append(m["over_floor"])
            floor_vs.append(m["floor_seconds"] / q["seconds"])
            tail += f" ×{m['over_floor']:.2f} | ×{floor_vs[-1]:.2f} |"
        print(f"{head} {q['variant']} | {q['seconds'] * 1e3:.3f} | {qf:.3f} | {blas} | ×{r:.2f} |{tail}")
    missing = sorted(set(m["name"] for m in b["matrices"]) - set(rows))
    print(f"\n{len(rows)} matrices in both ({len(missing)} only in bespoke's run, {len(rows) - len(ratio)} refused "
          f"by the peer). GiMMiK time / bespoke time: geomean ×{geomean(ratio):.2f} (> 1: bespoke faster), "
          f"min ×{min(ratio, default=float('nan')):.2f}, {sum(r < 1 for r in ratio)} where GiMMiK is faster.")
    if fr_b:
        ahead = sum(x >= y for x, y in zip(fr_b, fr_p))
        print(f"Fraction of each runtime's own copy bandwidth: bespoke geomean {geomean(fr_b):.3f}, GiMMiK "
              f"{geomean(fr_p):.3f}; bespoke's at least GiMMiK's on {ahead} of {len(fr_b)}.")
    if ss_b:
        ahead = sum(x >= y for x, y in zip(ss_b, ss_p))
        print(f"Fraction of each runtime's copy of the operator's own bytes: bespoke geomean {geomean(ss_b):.3f}, "
              f"GiMMiK {geomean(ss_p):.3f}; bespoke's at least GiMMiK's on {ahead} of {len(ss_b)}. The runtimes' "
              f"same-size copies alone: PoCL's time / lavapipe's geomean ×{geomean(ss_copy):.2f}, min "
              f"×{min(ss_copy):.2f}, max ×{max(ss_copy):.2f} (the part of the time ratio that is the runtimes').")
    if over:
        print(f"bespoke's time over its access floor (same accesses, an add per load, paired runs): geomean "
              f"×{geomean(over):.2f}, max ×{max(over):.2f}, {sum(x <= 1.25 for x in over)} of {len(over)} within "
              f"×1.25. The floor's time over GiMMiK's: geomean ×{geomean(floor_vs):.2f}, "
              f"{sum(x > 1 for x in floor_vs)} of {len(floor_vs)} above 1 (there a kernel making only the operator's "
              f"accesses takes longer on bespoke's adapter than GiMMiK's whole product on its runtime).")
    if bw:
        print(f"Bandwidth-bound (< {a.balance:g} flop/B): {len(bw)} matrices, fraction of copy median "
              f"{sorted(bw)[len(bw) // 2]:.2f}, min {min(bw):.2f}, {sum(f >= 0.9 for f in bw)} at ≥ 0.9.")


if __name__ == "__main__":
    main()
