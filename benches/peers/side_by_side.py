#!/usr/bin/env python3
"""bespoke and its peers on the same adapter, in one run, interleaved (A B A B …), side by side with ratios.

Usage:
  side_by_side.py [--work lbm,mm,dense] [--rounds 2] [--bespoke target/release/bespoke] [--python VENV/bin/python]
                  [--mm PATH...] [--n 32800] [--cubecl benches/peers/cubecl/target/release/cubecl-peer]
                  [--out DIR]

Which Vulkan driver both sides use is the environment's: run it once as is (the system's lavapipe) and once with
VK_DRIVER_FILES / LD_LIBRARY_PATH set to another (docs/perf.md, "Mesa 25.0.7 beside the system's", installs
Mesa 25.0.7 beside 22.3.6).
Peers and their install commands (each script checks its result before timing it):
- lbm:   bespoke's `bench --section lbm` (2048² on a CPU adapter; the f32 two-lattice row) against Taichi's
         Vulkan and CPU backends (taichi_lbm.py). Figure: MLUPS, median of each side's rounds.
- mm:    `bespoke mm bench` against GiMMiK's OpenCL kernels on PoCL (gimmik_pocl.py), same matrices and N. The
         first bespoke round may tune (decisions are cached, as PyFR's are); each side's figure per matrix is the
         fastest of its rounds. The table (benches/tools/peers_table.py) sets time and each runtime's fraction
         of its own copy bandwidth side by side.
- dense: `bespoke mm dense-bench` (the model's tiling) against CubeCL's autotuned matmul through burn's wgpu
         backend (benches/peers/cubecl, a crate outside the workspace: `cargo build --release` there, ~15
         minutes), squares 512³–4096³ and PyFR-like panels, f32 and f64 (--dense-shapes, --dense-dtypes). A shape
         CubeCL refuses (an operand past the binding limit) is reported as refused. CubeCL autotunes in every
         process (~10 minutes at 4096³ on a 2-core lavapipe).
Everything lands in --out (JSON of every run, and summary.json).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def run(cmd, out_json):
    print("$", " ".join(map(str, cmd)), flush=True)
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}")
    return json.loads(Path(out_json).read_text())


def run_peer(cmd, out_json):
    """Like run, but a peer that exits 3 (it refused the shape, e.g. a buffer past the binding limit) gives None."""
    print("$", " ".join(map(str, cmd)), flush=True)
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if r.returncode == 3:
        msg = [l for l in r.stderr.splitlines() if "allocate" in l or "limit" in l]
        print("  refused:", msg[0] if msg else r.stderr.strip().splitlines()[-1], flush=True)
        return None
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}")
    return json.loads(Path(out_json).read_text())


def driver_name():
    return os.environ.get("VK_DRIVER_FILES", "system Vulkan driver")


def lbm(a, out):
    res = {"bespoke": [], "taichi-vulkan": [], "taichi-cpu": []}
    for r in range(a.rounds):
        f = out / f"lbm-bespoke-{r}.json"
        d = run([a.bespoke, "bench", "--section", "lbm", "--json", f], f)
        row = next(x for x in d["lbm"]["runs"] if x["storage"] == "f32" and x["streaming"] == "ab")
        res["bespoke"].append(row | {"copy_gbps": d["copy_gbps"], "adapter": d["adapter"]})
        n = row["nx"]
        for arch in ("vulkan", "cpu"):
            f = out / f"lbm-taichi-{arch}-{r}.json"
            res[f"taichi-{arch}"].append(run([a.python, HERE / "taichi_lbm.py", "--arch", arch, "--n", n,
                                              "--json", f], f))
    med = {k: statistics.median(x["mlups"] for x in v) for k, v in res.items()}
    copy = statistics.median(x["copy_gbps"] for x in res["bespoke"])
    print(f"\nD2Q9 f32 AB BGK periodic {n}², {driver_name()}, {a.rounds} rounds interleaved (median MLUPS)")
    print("| runtime | MLUPS | GB/s at 72 B/cell | of bespoke's copy probe | bespoke / it |")
    print("|---|---|---|---|---|")
    for k, v in med.items():
        gbps = v * 72e-3
        print(f"| {k} | {v:.1f} | {gbps:.2f} | {gbps / copy:.3f} | ×{med['bespoke'] / v:.2f} |")
    return {"n": n, "mlups": med, "copy_gbps": copy, "runs": res}


def mm(a, out):
    paths = a.mm or [ROOT / "tests" / "data" / "pyfr"]
    fb, fp = [], []
    for r in range(a.rounds):
        f = out / f"mm-bespoke-{r}.json"
        fb.append(run([a.bespoke, "mm", "bench", *paths, "--n", a.n, "--reps", 3, "--json", f], f))
        f = out / f"mm-gimmik-pocl-{r}.json"
        fp.append(run([a.python, HERE / "gimmik_pocl.py", *paths, "--n", a.n, "--reps", 3, "--json", f], f))

    def fastest(runs, copy_key="copy_gbps"):
        best = dict(runs[0])
        best[copy_key] = max(x[copy_key] for x in runs)
        mats = {}
        for d in runs:
            for m in d["matrices"]:
                k = m["name"]
                if m.get("seconds") is not None and (k not in mats or m["seconds"] < mats[k]["seconds"]):
                    mats[k] = m
                mats.setdefault(k, m)
        for m in mats.values():
            if m.get("gbps"):
                m["copy_fraction"] = m["gbps"] / best[copy_key]
        best["matrices"] = list(mats.values())
        return best

    bb, pp = fastest(fb), fastest(fp)
    (out / "mm-bespoke.json").write_text(json.dumps(bb))
    (out / "mm-gimmik-pocl.json").write_text(json.dumps(pp))
    print(f"\nSpecialised operators, {driver_name()}, {a.rounds} rounds interleaved (fastest per side)")
    subprocess.run([sys.executable, ROOT / "benches" / "tools" / "peers_table.py", out / "mm-bespoke.json",
                    out / "mm-gimmik-pocl.json"], check=True)
    return {"bespoke": str(out / "mm-bespoke.json"), "gimmik_pocl": str(out / "mm-gimmik-pocl.json")}


# Squares 512³–4096³ and PyFR-like panels (M, K ≤ 1029, N ≥ 10⁵: hex p3's 96×64, a 294×343 operator, the largest).
DENSE = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
         (96, 100000, 64), (294, 100000, 343), (1029, 100000, 1029)]


def dense_reps(m, n, k):
    """Timed runs per side and round: ~20 GFLOP of work, at least 1, at most 5."""
    return max(1, min(5, round(2e10 / (2 * m * n * k))))


def dense(a, out):
    if not Path(a.cubecl).exists():
        raise SystemExit(f"{a.cubecl} not built: cd benches/peers/cubecl && cargo build --release")
    rows = []
    for dtype in a.dense_dtypes.split(","):
        for m, n, k in (DENSE if a.dense_shapes is None else
                        [tuple(map(int, x.split("x"))) for x in a.dense_shapes.split(",")]):
            tb, tc = [], []
            reps = dense_reps(m, n, k)
            for r in range(a.rounds):
                f = out / f"dense-bespoke-{dtype}-{m}x{n}x{k}-{r}.json"
                d = run([a.bespoke, "mm", "dense-bench", "--m", m, "--n", n, "--k", k, "--dtype", dtype,
                         "--reps", reps, "--json", f], f)
                tb.append(d["gflops"])
                key = d["params"]["key"]
                f = out / f"dense-cubecl-{dtype}-{m}x{n}x{k}-{r}.json"
                tc.append(run_peer([a.cubecl, "--m", m, "--n", n, "--k", k, "--dtype", dtype, "--reps", reps,
                               "--json", f], f))
            tc = [x["gflops"] for x in tc if x is not None]
            rows.append({"dtype": dtype, "m": m, "n": n, "k": k, "bespoke_params": key,
                         "bespoke_gflops": statistics.median(tb),
                         "cubecl_gflops": statistics.median(tc) if tc else None})
    print(f"\nDense GEMM C = A·B, {driver_name()}, {a.rounds} rounds interleaved (median GFLOP/s)")
    print("| dtype | M×N×K | bespoke (model's tiling) | CubeCL | bespoke / CubeCL |")
    print("|---|---|---|---|---|")
    for r in rows:
        c = r["cubecl_gflops"]
        print(f"| {r['dtype']} | {r['m']}×{r['n']}×{r['k']} | {r['bespoke_gflops']:.2f} ({r['bespoke_params']}) | "
              + (f"{c:.2f} | ×{r['bespoke_gflops'] / c:.2f} |" if c else "refused the shape | — |"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="lbm,mm")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--bespoke", default=str(ROOT / "target" / "release" / "bespoke"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mm", nargs="*")
    ap.add_argument("--n", type=int, default=32800)
    ap.add_argument("--cubecl", default=str(HERE / "cubecl" / "target" / "release" / "cubecl-peer"))
    ap.add_argument("--dense-dtypes", default="f32,f64")
    ap.add_argument("--dense-shapes", default=None, help="MxNxK,… instead of the built-in list")
    ap.add_argument("--out", default="peers-out")
    a = ap.parse_args()
    if a.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"driver": driver_name()}
    for w in a.work.split(","):
        summary[w] = {"lbm": lbm, "mm": mm, "dense": dense}[w](a, out)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
