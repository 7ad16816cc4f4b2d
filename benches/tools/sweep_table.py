#!/usr/bin/env python3
"""Markdown rows for `bespoke mm dense-sweep --json` files, and a screened-vs-exhaustive check.

    python3 benches/tools/sweep_table.py sweep1.json sweep2.json ...
    python3 benches/tools/sweep_table.py --compare exhaustive.json screened.json
A sweep inside a gzipped bundle (docs/data/dense-sweeps-*.json.gz) is named BUNDLE.json.gz:NAME.
"""

import sys

from mm_table import load as load_json  # same folder


def load(path):
    """A sweep JSON (plain or gzipped), or one named sweep from a gzipped bundle: bundle.json.gz:NAME."""
    if ".gz:" in path:
        bundle, name = path.split(".gz:")
        return load_json(bundle + ".gz")[name]
    return load_json(path)


def row(path):
    d = load(path)
    pick, best = d["model_pick"], d["best"]
    timed = d["configs_timed"]
    if d.get("method") == "screened":
        how = f'{d["configs_screened"]} screened, {timed} full'
        rank = f'rank {pick["rank"]} of {timed} full, {d["pick_sample_rank"]} of {d["configs_screened"]} screened'
    else:
        how = f"{timed} (all)"
        rank = f'rank {pick["rank"]} of {timed}'
    shape = f'{d["m"]}×{d["n"]}×{d["k"]}'
    # Screened: also E against the fastest measurement of any kind (a sample can only flatter a configuration
    # the full shape did not confirm).
    samples = [c["sample"]["gflops"] for c in d["configs"] if c.get("sample") and c["sample"]["gflops"]]
    top = max([best["gflops"], *samples])
    cons = f' ({pick["gflops"] / top:.2f})' if samples else ""
    return (
        f'| {shape} | {d["dtype"]} | {how} | {best["params"]["key"]} ({best["gflops"]:.3g}) | '
        f'{pick["params"]["key"]} ({pick["gflops"]:.3g}), {rank} | **{d["efficiency"]:.2f}**{cons} |'
    )


def compare(exhaustive, screened):
    e, s = load(exhaustive), load(screened)
    full = {c["params"]: c["gflops"] for c in e["configs"] if c["gflops"]}
    sample = {c["params"]: c["sample"]["gflops"] for c in s["configs"] if c["sample"] and c["sample"]["gflops"]}
    common = sorted(set(full) & set(sample))
    order_full = sorted(common, key=lambda k: -full[k])
    order_sample = sorted(common, key=lambda k: -sample[k])
    rank_sample = {k: i for i, k in enumerate(order_sample)}
    n = len(common)
    # Spearman's rho from rank differences.
    rank_full = {k: i for i, k in enumerate(order_full)}
    d2 = sum((rank_full[k] - rank_sample[k]) ** 2 for k in common)
    rho = 1 - 6 * d2 / (n * (n * n - 1))
    best = order_full[0]
    confirmed = [c["params"] for c in s["configs"] if c["gflops"]]
    print(f"{n} configurations in both; Spearman rho of full vs sample GFLOP/s = {rho:.3f}")
    print(f"exhaustive best {best} ({full[best]:.3f}) ranks {rank_sample[best] + 1} in the screen;"
          f" confirmed by the screened sweep: {best in confirmed}")
    sbest = max(confirmed, key=lambda k: next(c["gflops"] for c in s["configs"] if c["params"] == k))
    print(f"screened best {sbest}: {full.get(sbest, float('nan')):.3f} GFLOP/s in the exhaustive sweep "
          f"= {full.get(sbest, 0) / full[best]:.3f} of its best")
    ratio = sorted(sample[k] / full[k] for k in common)
    print(f"sample / full GFLOP/s: median {ratio[n // 2]:.3f}, 10 % {ratio[n // 10]:.3f}, 90 % {ratio[9 * n // 10]:.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        print("| shape | dtype | configs timed | best (GFLOP/s) | model pick (GFLOP/s) | E (against any sample) |")
        print("|---|---|---|---|---|---|")
        for p in sys.argv[1:]:
            print(row(p))
