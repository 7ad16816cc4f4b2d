#!/usr/bin/env python3
"""cuBLAS GEMM (through CuPy, TF32 off) at the shapes `bespoke mm dense-bench` runs, on the same GPU in the same
hour: the peer of issue 36's goals (f32 ≥ 0.75× cuBLAS; f64 against the measured FMA peak, since cuBLAS's f64 uses
FP64 tensor cores WGSL cannot reach).

Usage:
  cublas_dense.py [--shapes MxNxK,...] [--dtypes f32,f64] [--reps R] [--json FILE] [--dry-run]

Each product C = A·B (row-major, random inputs in [-1, 1)) is checked against a float64 host product on 64 sampled
entries first, then timed with CUDA events (median of R after a warm-up). GFLOP/s counts 2·M·N·K.
--dry-run parses the arguments and checks the host reference only (no GPU, no CuPy).
"""
import argparse
import json
import sys

import numpy as np

DEFAULT_SHAPES = "2048x2048x2048,4096x4096x4096,8192x8192x8192,96x100000x64,343x100000x1029"


def shapes_of(text):
    out = []
    for s in text.split(","):
        parts = s.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"cublas_dense: shape {s!r} is not MxNxK with positive sizes")
        out.append(tuple(int(p) for p in parts))
    return out


def sampled_error(a, b, c, rng, samples=64):
    """Largest relative error of c against a float64 product on sampled entries."""
    m, n = c.shape
    worst = 0.0
    for _ in range(samples):
        i, j = rng.integers(m), rng.integers(n)
        want = float(np.dot(a[i].astype(np.float64), b[:, j].astype(np.float64)))
        scale = float(np.abs(a[i]).astype(np.float64) @ np.abs(b[:, j]).astype(np.float64)) or 1.0
        worst = max(worst, abs(float(c[i, j]) - want) / scale)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    shapes = shapes_of(a.shapes)
    dtypes = a.dtypes.split(",")
    if any(d not in ("f32", "f64") for d in dtypes) or a.reps < 1:
        raise SystemExit("cublas_dense: --dtypes from f32,f64 and --reps ≥ 1")
    rng = np.random.default_rng(5)
    # The host reference on a small product.
    x, y = rng.uniform(-1, 1, (7, 5)), rng.uniform(-1, 1, (5, 3))
    assert sampled_error(x, y, x @ y, rng) < 1e-12, "the host reference is wrong"
    if a.dry_run:
        print(f"cublas_dense: {len(shapes)} shapes × {dtypes}; reference ok")
        return
    import cupy as cp
    cp.cuda.set_allocator(None)
    runs = []
    for dtype in dtypes:
        np_dtype = np.float32 if dtype == "f32" else np.float64
        for m, n, k in shapes:
            ha = rng.uniform(-1, 1, (m, k)).astype(np_dtype)
            hb = rng.uniform(-1, 1, (k, n)).astype(np_dtype)
            da, db = cp.asarray(ha), cp.asarray(hb)
            # TF32 off: the default compute type of cuBLAS for float32 through CuPy is full f32 unless
            # CUPY_TF32=1; it is unset here.
            dc = da @ db
            err = sampled_error(ha, hb, dc.get(), rng)
            tol = 1e-5 if dtype == "f32" else 1e-12
            if not err < tol:
                raise SystemExit(f"cublas_dense {dtype} {m}x{n}x{k}: sampled error {err:.2e} > {tol:.0e}")
            for _ in range(2):
                cp.matmul(da, db, out=dc)
            cp.cuda.Device().synchronize()
            samples = []
            for _ in range(a.reps):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record()
                cp.matmul(da, db, out=dc)
                e.record()
                e.synchronize()
                samples.append(cp.cuda.get_elapsed_time(s, e) * 1e-3)
            seconds = float(np.median(samples))
            gflops = 2.0 * m * n * k / seconds / 1e9
            runs.append({"dtype": dtype, "m": m, "n": n, "k": k, "seconds": seconds, "gflops": gflops,
                         "sampled_rel_err": err})
            print(f"cublas {dtype} {m}x{n}x{k}: {gflops:.0f} GFLOP/s ({seconds * 1e3:.3f} ms)", flush=True)
            del da, db, dc
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": name, "cupy": cp.__version__, "runs": runs}, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
