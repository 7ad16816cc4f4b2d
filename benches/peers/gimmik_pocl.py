#!/usr/bin/env python3
"""GiMMiK 4.0's OpenCL kernels on PoCL (the CPU OpenCL runtime), on the operators `bespoke mm bench` runs, at the
same N, precision and β, written in the same JSON shape (benches/tools/peers_table.py sets the two side by side).

Install (Debian and PyPI only):
  apt-get install pocl-opencl-icd ocl-icd-libopencl1
  python3 -m venv venv && venv/bin/pip install gimmik==4.0 pyopencl numpy
Usage:
  gimmik_pocl.py PATH... [--n N] [--dtype f32|f64] [--reps R] [--check-cols C] [--json FILE]

PyFR's way: every kernel GiMMiK generates for an operator is built, checked against an f64 product on C sampled
columns of random B and C, and timed (OpenCL profiling events, one warm-up, median of R); the fastest correct one
is GiMMiK's time. GiMMiK's OpenCL backend refuses operators with more than 2048 non-zeros (PyFR then calls a
BLAS): those are reported as refused, with no time. gbps counts the minimum bytes as bespoke does (B read once,
C written once and read once more when β ≠ 0); copy_gbps is PoCL's own clEnqueueCopyBuffer of 256 MiB (bytes read
plus written), the runtime's counterpart of bespoke's copy probe; same_size_copy_gbps is its copy of
the operator's own bytes (half of them copied), timed like the kernels: what a kernel of that size can reach.
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gimmik_cublas import files_of, read_mtx  # noqa: E402  (one Matrix Market reader for both peers)

TOL = {"f32": 1e-5, "f64": 1e-12}


class Device:
    def __init__(self):
        plats = [p for p in cl.get_platforms() if "portable" in p.name.lower() or "pocl" in p.name.lower()]
        if not plats:
            raise SystemExit("no PoCL platform (apt-get install pocl-opencl-icd)")
        self.dev = plats[0].get_devices()[0]
        self.ctx = cl.Context([self.dev])
        self.queue = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.name = f"{self.dev.name} ({plats[0].version})"

    def time(self, launch, reps):
        launch().wait()
        samples = []
        for _ in range(reps):
            ev = launch()
            ev.wait()
            samples.append((ev.profile.end - ev.profile.start) * 1e-9)
        return float(np.median(samples))

    def copy_gbps(self, nbytes=256 << 20, reps=5):
        src = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, nbytes)
        dst = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, nbytes)
        cl.enqueue_fill_buffer(self.queue, src, np.float32(1), 0, nbytes).wait()
        s = self.time(lambda: cl.enqueue_copy(self.queue, dst, src, byte_count=nbytes), reps)
        return 2 * nbytes / s / 1e9


def bench_matrix(dev, path, a, beta, n, dtype, reps, check_cols, rng):
    import gimmik
    np_dtype = np.float32 if dtype == "f32" else np.float64
    m, k = a.shape
    itemsize = np.dtype(np_dtype).itemsize
    aligne = 32 // itemsize if n % (32 // itemsize) == 0 else None
    mm = gimmik.OpenCLMatMul(a.astype(np_dtype), beta=beta, aligne=aligne, n=n, ldb=n, ldc=n)
    nnz = int(np.count_nonzero(a))
    b = rng.standard_normal((k, n)).astype(np_dtype)
    c0 = rng.standard_normal((m, n)).astype(np_dtype)
    cols = np.sort(rng.choice(n, size=min(check_cols, n), replace=False))
    want = a @ b[:, cols].astype(np.float64) + beta * c0[:, cols].astype(np.float64)
    mf = cl.mem_flags
    bb = cl.Buffer(dev.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    cb = cl.Buffer(dev.ctx, mf.READ_WRITE, c0.nbytes)
    candidates = []
    for src, meta in mm.kernels(np_dtype, kname="gimmik_mm"):
        name = meta["tplname"] + ("-v2" if meta.get("width", 1) == 2 else "")
        t0 = time.perf_counter()
        kern = cl.Program(dev.ctx, src).build().gimmik_mm
        gws = tuple(meta["global_work_size"])
        lws = meta.get("local_work_size")
        lws = tuple(lws) if lws is not None else None

        def launch(kern=kern, gws=gws, lws=lws):
            return kern(dev.queue, gws, lws, bb, cb)

        cl.enqueue_copy(dev.queue, cb, c0).wait()
        launch().wait()
        compile_s = time.perf_counter() - t0
        got = np.empty_like(c0)
        cl.enqueue_copy(dev.queue, got, cb).wait()
        den = np.linalg.norm(want)
        err = float(np.linalg.norm(got[:, cols].astype(np.float64) - want) / den) if den > 0 else math.inf
        candidates.append({"variant": f"gimmik-{name}", "seconds": dev.time(launch, reps), "rel_err": err,
                           "compile_seconds": compile_s})
    good = [c for c in candidates if c["rel_err"] <= TOL[dtype]]
    c_passes = 1 if beta == 0 else 2
    nbytes = itemsize * n * (k + c_passes * m)
    row = {"name": Path(path).stem, "m": m, "k": k, "nnz": nnz, "beta": beta, "candidates": candidates,
           "rejected": [c["variant"] for c in candidates if c["rel_err"] > TOL[dtype]]}
    if not good:
        row |= {"variant": "refused" if not candidates else "none correct", "seconds": None, "gbps": None,
                "rel_err": None}
        return row
    best = min(good, key=lambda c: c["seconds"])
    # The runtime's copy of the same bytes (nbytes / 2 copied: read plus written), timed like the kernels.
    same = dev.copy_gbps(nbytes // 2 // 16 * 16, reps)
    return row | {"variant": best["variant"], "seconds": best["seconds"], "gbps": nbytes / best["seconds"] / 1e9,
                  "same_size_copy_gbps": same,
                  "rel_err": best["rel_err"], "tune_seconds": sum(c["compile_seconds"] for c in candidates)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--n", type=int, default=32800)
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--check-cols", type=int, default=512)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.n <= 0 or args.reps <= 0 or args.check_cols <= 0:
        raise SystemExit("--n, --reps and --check-cols must be positive")
    dev = Device()
    copy = dev.copy_gbps()
    print(f"device: {dev.name}; copy {copy:.2f} GB/s; {args.dtype}, N = {args.n}", flush=True)
    rng = np.random.default_rng(12345)
    rows = []
    for f in files_of(args.paths):
        a, beta = read_mtx(f)
        beta = args.beta if beta is None else beta
        r = bench_matrix(dev, f, a, beta, args.n, args.dtype, args.reps, args.check_cols, rng)
        r["copy_fraction"] = r["gbps"] / copy if r["gbps"] else None
        rows.append(r)
        if r["seconds"] is None:
            print(f"{r['name']:<22} {r['m']:>4}×{r['k']:<4} nnz {r['nnz']:>6}: {r['variant']}", flush=True)
        else:
            print(f"{r['name']:<22} {r['m']:>4}×{r['k']:<4} nnz {r['nnz']:>6} β={beta:g} {r['variant']:<26} "
                  f"{r['seconds'] * 1e3:9.3f} ms {r['gbps']:7.2f} GB/s ({r['copy_fraction']:.3f} of copy, "
                  f"{r['gbps'] / r['same_size_copy_gbps']:.3f} of a same-size copy) "
                  f"err {r['rel_err']:.1e}", flush=True)
    out = {
        "adapter": {"name": dev.name, "backend": "opencl", "driver": dev.dev.driver_version,
                    "device_type": "Cpu"},
        "tool": "GiMMiK 4.0 OpenCL kernels on PoCL (pyopencl)", "copy_gbps": copy, "dtype": args.dtype,
        "n": args.n, "matrices": rows,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    bad = [r["name"] for r in rows if r["variant"] == "none correct"]
    if bad:
        sys.exit(f"no GiMMiK kernel within tolerance for: {', '.join(bad)}")


if __name__ == "__main__":
    main()
