#!/usr/bin/env python3
"""GiMMiK 4.0's CUDA kernels and cuBLAS (through CuPy) on the operators `bespoke mm bench` runs, at the same N,
precision and β, written in the same JSON shape so the two can be set side by side (benches/tools/peers_table.py).

Usage:
  gimmik_cublas.py PATH... [--n N] [--dtype f32|f64] [--reps R] [--check-cols C] [--json FILE] [--dry-run]
                   [--compile-only] [--compile-threads T]

PATH is a Matrix Market file or a folder of them. β per matrix comes from the header comment
`% PyFR beta for this op: <β>` when present, else --beta, else 0 (as `bespoke mm bench` does). B (K×N) and C (M×N)
are row-major with ldb = ldc = N. For each matrix every kernel GiMMiK generates for it is compiled with CuPy's
RawKernel, checked, and timed (CUDA events, one warm-up, median of R); the fastest is GiMMiK's time. Where
GiMMiK generates nothing (dense operators with many distinct values: PyFR then calls cuBLAS) its time is cuBLAS's.
cuBLAS is `cupy.cublas.gemm` with the same β. "dense_seconds" is cuBLAS, so "speedup_vs_dense" is GiMMiK over
cuBLAS, as bespoke's is over its own dense kernel. gbps counts the minimum bytes, as bespoke does: B read once,
C written once and read once more when β ≠ 0. rel_err compares C with an f64 host product on C sampled columns
(a full f64 reference of a 1029 × 2^20 panel would cost more than the run).

--dry-run needs only numpy, mako and gimmik: it parses every file and generates every kernel, without a GPU, and
checks that each kernel exports the name RawKernel looks up (with NVRTC where CuPy is importable, which needs no
GPU; else by its declaration).
--compile-only generates and compiles every kernel (NVRTC, into CuPy's on-disk kernel cache: CUPY_CACHE_DIR) and
times nothing: a later run of the same operators, N and precision on the same machine finds each kernel compiled.
benches/gpu/session.sh's `peers-compile` runs it in the background while bespoke's stages use the GPU (on the H200
on 2026-11-28 the peer took 25-30 s an operator, its kernels compiled one after the other).
On the lent GPU machine (no internet) install the wheels brought along first:
  pip download --no-deps gimmik==4.0 mako -d .devbin/wheels          # here
  pip install --no-index --no-deps .devbin/wheels/*.whl               # there
"""
import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np


def read_mtx(path):
    """A dense A and the β hint from a Matrix Market file (coordinate or array; real, integer or pattern;
    general or symmetric)."""
    lines = Path(path).read_text().splitlines()
    if not lines or not lines[0].lower().startswith("%%matrixmarket"):
        raise ValueError(f"{path}: not a Matrix Market file")
    head = lines[0].split()
    if len(head) != 5 or head[1].lower() != "matrix":
        raise ValueError(f"{path}: unsupported header {lines[0]!r}")
    fmt, field, sym = head[2].lower(), head[3].lower(), head[4].lower()
    if fmt not in ("coordinate", "array") or field not in ("real", "integer", "pattern") or \
            sym not in ("general", "symmetric"):
        raise ValueError(f"{path}: unsupported kind {fmt} {field} {sym}")
    beta = None
    body = []
    for ln in lines[1:]:
        s = ln.strip()
        if s.startswith("%"):
            if "PyFR beta for this op:" in s:
                beta = float(s.split("PyFR beta for this op:")[1].split(";")[0])
            continue
        if s:
            body.append(s)
    dims = [int(t) for t in body[0].split()]
    if fmt == "coordinate":
        m, k, nnz = dims
        a = np.zeros((m, k))
        for s in body[1:1 + nnz]:
            t = s.split()
            i, j = int(t[0]) - 1, int(t[1]) - 1
            v = 1.0 if field == "pattern" else float(t[2])
            a[i, j] = v
            if sym == "symmetric":
                a[j, i] = v
        if len(body) - 1 != nnz:
            raise ValueError(f"{path}: {len(body) - 1} entries for nnz = {nnz}")
    else:
        m, k = dims
        vals = [float(s) for s in body[1:]]
        if len(vals) != m * k:
            raise ValueError(f"{path}: {len(vals)} values for {m}×{k}")
        a = np.array(vals).reshape(k, m).T  # column-major
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{path}: non-finite entries")
    return a, beta


def files_of(paths):
    out = []
    for p in map(Path, paths):
        out.extend(sorted(p.glob("*.mtx")) if p.is_dir() else [p])
    if not out:
        raise SystemExit("no .mtx files given")
    return out


KNAME = "gimmik_mm"


def c_linkage(src, kname):
    """GiMMiK's CUDA source as RawKernel can find its kernel by name: GiMMiK 4.0 declares `__global__ void
    gimmik_mm(...)` without `extern "C"` (PyFR compiles it through its own NVRTC wrapper, which looks the mangled
    name up), so NVRTC mangles the name and `RawKernel(src, "gimmik_mm")` finds no symbol (on the H200 on
    2026-11-26 no GiMMiK kernel ran). Refuses a source whose kernel declaration it cannot find."""
    decl = re.compile(r'(extern\s+"C"\s+)?__global__(\s+__launch_bounds__\([^)]*\))?\s+void\s+' + kname + r"\s*\(")
    found = decl.search(src)
    if found is None:
        raise ValueError(f"GiMMiK source without a `__global__ void {kname}(`: the generator changed")
    if found.group(1) is None:
        src = src[:found.start()] + 'extern "C" ' + src[found.start():]
    return src


def nvrtc_entries(src, arch="compute_80"):
    """The kernel entry names NVRTC gives `src` (its PTX's `.entry` lines), or None where CuPy (with NVRTC) is not
    importable. Needs no GPU: the architecture is given."""
    try:
        from cupy.cuda import compiler
    except Exception:  # noqa: BLE001 - any import failure means no NVRTC here
        return None
    ptx = compiler.compile_using_nvrtc(src, options=("-default-device",), arch=arch)
    if isinstance(ptx, bytes):
        ptx = ptx.decode()
    return [ln.split()[-1].split("(")[0] for ln in ptx.splitlines() if ".entry" in ln]


def gimmik_kernels(a, beta, n, np_dtype):
    """(template name, source, meta) of every kernel GiMMiK 4.0 generates for this operator."""
    import gimmik
    itemsize = np.dtype(np_dtype).itemsize
    # PyFR aligns rows to 32 bytes; GiMMiK only vectorises when ldb/ldc are a multiple of the alignment.
    aligne = 32 // itemsize if n % (32 // itemsize) == 0 else None
    mm = gimmik.CUDAMatMul(a.astype(np_dtype), beta=beta, aligne=aligne, n=n, ldb=n, ldc=n)
    # kname as PyFR passes it; KNAME is what RawKernel looks up.
    out = []
    for src, meta in mm.kernels(np_dtype, kname="gimmik_mm"):
        name = meta["tplname"] + ("-v2" if meta.get("width", 1) == 2 else "")
        out.append((name, c_linkage(src, KNAME), meta))
    return out


class Device:
    def __init__(self):
        import cupy as cp
        self.cp = cp
        dev = cp.cuda.Device()
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        self.runtime = cp.cuda.runtime.runtimeGetVersion()
        self.cupy = cp.__version__

    def time(self, fn, reps):
        """Median seconds of `reps` calls after one warm-up, each between two CUDA events."""
        cp = self.cp
        fn()
        samples = []
        for _ in range(reps):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
        return float(np.median(samples))

    def copy_gbps(self, nbytes=1 << 30, reps=10):
        cp = self.cp
        src = cp.ones(nbytes // 4, dtype=cp.float32)
        dst = cp.empty_like(src)
        s = self.time(lambda: cp.copyto(dst, src), reps)
        del src, dst
        return 2 * nbytes / s / 1e9


def rel_err_cols(c_dev, a, b_host_cols, c0_cols, beta, cols):
    got = c_dev[:, cols].get().astype(np.float64)
    want = a @ b_host_cols + beta * c0_cols
    den = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / den) if den > 0 else float(np.linalg.norm(got))


def compile_all(dev, kerns, threads):
    """Compiles `kerns` (CuPy RawKernels) on `threads` threads, each with the device current; the seconds of each,
    or None where threads are off or a compile failed there (then each compiles at its first launch)."""
    if threads <= 1 or len(kerns) < 2:
        return None
    from concurrent.futures import ThreadPoolExecutor
    cp = dev.cp
    dev_id = cp.cuda.Device().id

    def one(kern):
        cp.cuda.Device(dev_id).use()
        t0 = time.perf_counter()
        kern.compile()
        return time.perf_counter() - t0

    try:
        with ThreadPoolExecutor(max_workers=min(threads, len(kerns))) as pool:
            return list(pool.map(one, kerns))
    except Exception as e:  # noqa: BLE001 - any failure falls back to the sequential path, said on stderr
        print(f"compiling in threads failed ({type(e).__name__}: {e}); compiling one by one", file=sys.stderr)
        return None


def compile_matrix(dev, a, beta, n, np_dtype, threads):
    """Generates and compiles (into CuPy's kernel cache) every GiMMiK kernel of one operator; nothing runs. The
    seconds of generation and compiles, and how many kernels."""
    t0 = time.perf_counter()
    kernels = gimmik_kernels(a, beta, n, np_dtype) if np.any(a) else []
    generate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    kerns = [dev.cp.RawKernel(src, KNAME) for _, src, _ in kernels]
    if compile_all(dev, kerns, threads) is None:
        for kern in kerns:
            kern.compile()
    return {"kernels": len(kerns), "generate_seconds": generate_s, "compile_seconds": time.perf_counter() - t0}


def bench_matrix(dev, path, a, beta, n, np_dtype, reps, check_cols, rng, threads=1):
    cp = dev.cp
    t_setup = time.perf_counter()
    m, k = a.shape
    b = cp.asarray(rng.standard_normal((k, n), dtype=np.float32).astype(np_dtype))
    c0 = cp.asarray(rng.standard_normal((m, n), dtype=np.float32).astype(np_dtype))
    c = cp.empty_like(c0)
    cols = np.sort(rng.choice(n, size=min(check_cols, n), replace=False))
    b_cols = b[:, cols].get().astype(np.float64)
    c0_cols = c0[:, cols].get().astype(np.float64)
    a_dev = cp.asarray(a.astype(np_dtype))

    def checked(run):
        cp.copyto(c, c0)
        run()
        cp.cuda.Device().synchronize()
        return rel_err_cols(c, a, b_cols, c0_cols, beta, cols)

    def cublas():
        if hasattr(cp, "cublas"):
            cp.cublas.gemm("N", "N", a_dev, b, out=c, alpha=1.0, beta=beta)
        elif beta == 0:
            cp.matmul(a_dev, b, out=c)
        else:  # older CuPy: cuBLAS's product plus an elementwise update
            c[...] = cp.matmul(a_dev, b) + beta * c

    phases = {"setup_seconds": time.perf_counter() - t_setup}
    t0 = time.perf_counter()
    cublas_err = checked(cublas)
    cublas_s = dev.time(cublas, reps)
    phases["cublas_seconds"] = time.perf_counter() - t0

    # Every candidate's NVRTC compile at once, on `threads` threads (on the H200 on 2026-11-28 the peer took
    # 25-30 s an operator with its kernels compiled one after the other); where that fails, each compiles at its
    # first launch, as before.
    t0 = time.perf_counter()
    kernels = gimmik_kernels(a, beta, n, np_dtype)
    phases["generate_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    kerns = [cp.RawKernel(src, KNAME) for _, src, _ in kernels]
    compiled = compile_all(dev, kerns, threads)
    phases["compile_seconds"] = time.perf_counter() - t0
    phases["compiled_in_threads"] = compiled is not None

    candidates = []
    t_runs = time.perf_counter()
    for (name, src, meta), kern, compile_s in zip(kernels, kerns, compiled or [None] * len(kerns)):
        t0 = time.perf_counter()
        shared = meta.get("dynamic_shared", 0)
        if shared:
            kern.max_dynamic_shared_size_bytes = shared
        grid, block = tuple(meta["grid"]), tuple(meta["block"])

        def launch(kern=kern, grid=grid, block=block, shared=shared):
            kern(grid, block, (b, c), shared_mem=shared)

        err = checked(launch)
        first_s = time.perf_counter() - t0
        candidates.append({"variant": f"gimmik-{name}", "seconds": dev.time(launch, reps), "rel_err": err,
                           # its own compile where compiled in a thread, else compile and first checked run
                           "compile_seconds": compile_s if compile_s is not None else first_s})
    phases["candidates_seconds"] = time.perf_counter() - t_runs
    tol = 1e-5 if np_dtype == np.float32 else 1e-12
    good = [cand for cand in candidates if cand["rel_err"] <= tol]
    if good:
        best = min(good, key=lambda cand: cand["seconds"])
        variant, seconds, err = best["variant"], best["seconds"], best["rel_err"]
    else:
        variant, seconds, err = "cublas", cublas_s, cublas_err
    itemsize = np.dtype(np_dtype).itemsize
    c_passes = 1 if beta == 0 else 2
    nbytes = itemsize * n * (k + c_passes * m)
    return {
        "name": Path(path).stem, "m": m, "k": k, "nnz": int(np.count_nonzero(a)), "beta": beta,
        "variant": variant, "seconds": seconds, "gbps": nbytes / seconds / 1e9,
        "dense_seconds": cublas_s, "speedup_vs_dense": cublas_s / seconds, "rel_err": err,
        "cublas_rel_err": cublas_err, "candidates": candidates, "phases": phases,
        "rejected": [cand["variant"] for cand in candidates if cand["rel_err"] > tol],
    }


def write_report(args, dev, copy, rows, of):
    """The JSON report of the matrices measured so far (`complete` once all `of` are), written whole."""
    if not args.json:
        return
    sp = [r["speedup_vs_dense"] for r in rows]
    out = {
        "adapter": {"name": dev.name, "backend": "cuda", "driver": f"CUDA runtime {dev.runtime}",
                    "device_type": "DiscreteGpu"},
        "tool": f"GiMMiK 4.0 CUDA kernels and cuBLAS via CuPy {dev.cupy}",
        "copy_gbps": copy, "dtype": args.dtype, "n": args.n, "complete": len(rows) == of, "operators": of,
        "matrices": rows,
        "geomean_speedup_vs_dense": math.exp(sum(map(math.log, sp)) / len(sp)) if sp else None,
        "min_speedup_vs_dense": min(sp) if sp else None,
    }
    tmp = Path(args.json + ".part")
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(args.json)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--check-cols", type=int, default=4096)
    ap.add_argument("--json")
    ap.add_argument("--compile-threads", type=int, default=8,
                    help="compile each matrix's GiMMiK kernels on this many threads (1: one by one, at first use)")
    ap.add_argument("--dry-run", action="store_true", help="parse and generate only; no GPU needed")
    ap.add_argument("--compile-only", action="store_true",
                    help="generate and compile every kernel into CuPy's kernel cache; time nothing")
    args = ap.parse_args()
    if args.n <= 0 or args.reps <= 0 or args.check_cols <= 0:
        raise SystemExit("--n, --reps and --check-cols must be positive")
    np_dtype = np.float32 if args.dtype == "f32" else np.float64
    files = files_of(args.paths)

    if args.dry_run:
        total, nvrtc_missing = 0, False
        for f in files:
            a, beta = read_mtx(f)
            beta = args.beta if beta is None else beta
            ks = gimmik_kernels(a, beta, args.n, np_dtype) if np.any(a) else []
            total += len(ks)
            for name, src, _ in ks:
                # What RawKernel will look up must be there: by NVRTC where CuPy is, else by the declaration.
                entries = nvrtc_entries(src)
                if entries is None:
                    nvrtc_missing = True
                    if not re.search(r'extern\s+"C"\s+__global__', src):
                        raise SystemExit(f"{f.stem} {name}: kernel {KNAME} has no C linkage")
                elif KNAME not in entries:
                    raise SystemExit(f"{f.stem} {name}: NVRTC gives entries {entries}, not {KNAME}")
            names = ", ".join(name for name, _, _ in ks) or "none (cuBLAS)"
            print(f"{f.stem:<22} {a.shape[0]:>4}×{a.shape[1]:<4} β={beta:g} kernels: {names}")
        print(f"{len(files)} matrices, {total} GiMMiK kernels generated, each declaring {KNAME} with C linkage"
              + ("" if nvrtc_missing else " (NVRTC: every kernel's entry found)"))
        if nvrtc_missing:
            print("NVRTC check skipped: CuPy is not importable here; checked the declarations instead")
        return

    dev = Device()
    if args.compile_only:
        t_all = time.perf_counter()
        for f in files:
            a, beta = read_mtx(f)
            beta = args.beta if beta is None else beta
            r = compile_matrix(dev, a, beta, args.n, np_dtype, args.compile_threads)
            print(f"{f.stem:<22} {a.shape[0]:>4}×{a.shape[1]:<4} β={beta:g} {r['kernels']} kernels generated in "
                  f"{r['generate_seconds']:.1f} s, compiled in {r['compile_seconds']:.1f} s", flush=True)
        print(f"{len(files)} matrices compiled for {args.dtype}, N = {args.n} in {time.perf_counter() - t_all:.1f} s")
        return
    copy = dev.copy_gbps()
    print(f"device: {dev.name}, CUDA runtime {dev.runtime}, CuPy {dev.cupy}; copy {copy:.1f} GB/s; "
          f"{args.dtype}, N = {args.n}", flush=True)
    rng = np.random.default_rng(12345)
    rows = []
    for f in files:
        a, beta = read_mtx(f)
        beta = args.beta if beta is None else beta
        r = bench_matrix(dev, f, a, beta, args.n, np_dtype, args.reps, args.check_cols, rng,
                         args.compile_threads)
        r["copy_fraction"] = r["gbps"] / copy
        rows.append(r)
        ph = r["phases"]
        print(f"{r['name']:<22} {r['m']:>4}×{r['k']:<4} β={beta:g} {r['variant']:<26} "
              f"{r['seconds'] * 1e3:9.3f} ms {r['gbps']:8.1f} GB/s ({r['copy_fraction']:.2f} of copy)  "
              f"cuBLAS {r['dense_seconds'] * 1e3:9.3f} ms ×{r['speedup_vs_dense']:.2f}  err {r['rel_err']:.1e}  "
              f"[set-up {ph['setup_seconds']:.1f} s, cuBLAS {ph['cublas_seconds']:.1f} s, "
              f"{len(r['candidates'])} kernels compiled in {ph['compile_seconds']:.1f} s"
              f"{' on threads' if ph['compiled_in_threads'] else ''}, run {ph['candidates_seconds']:.1f} s]",
              flush=True)
        # The report so far after every matrix: a run cut short by its time limit keeps what it measured.
        write_report(args, dev, copy, rows, len(files))
    sp = [r["speedup_vs_dense"] for r in rows]
    geo = math.exp(sum(map(math.log, sp)) / len(sp))
    print(f"{len(rows)} matrices: GiMMiK over cuBLAS geomean ×{geo:.2f}, min ×{min(sp):.2f}")
    bad = [r["name"] for r in rows if not r["rel_err"] <= (1e-5 if args.dtype == "f32" else 1e-12)]
    if bad:
        sys.exit(f"{len(bad)} results exceed the tolerance: {', '.join(bad)}")


if __name__ == "__main__":
    main()
