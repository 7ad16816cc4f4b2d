#!/usr/bin/env python3
"""The D2Q9 step of `bespoke bench --section lbm` (f32, two lattices, pull, BGK at ω = 1, periodic, a decaying
Taylor–Green field) written in Taichi, for a side-by-side figure on the same adapter.

Install (PyPI only):   python3 -m venv venv && venv/bin/pip install taichi==1.7.4 numpy
Usage:                 taichi_lbm.py [--arch vulkan|cpu] [--n 2048] [--reps 10] [--json FILE] [--dump-spirv DIR]

Taichi's Vulkan backend goes through the same Vulkan loader as bespoke, so VK_DRIVER_FILES (and LD_LIBRARY_PATH)
pick the same lavapipe for both (docs/perf.md: "Mesa 25.0.7 beside the system's"); `cpu` is Taichi's own LLVM x64 backend.

Layout and arithmetic as bespoke's f32 AB kernel: structure of arrays (one 2-D field per direction, as bespoke
has one buffer per direction), populations
stored as f − w (shifted, as bespoke stores them), pull streaming, BGK with the second-order equilibrium. Before
timing, 6 steps on a 48×40 lattice are checked against a float64 numpy reference (max |Δf| ≤ 1e-6). Timing: two
warm-up pairs, then `reps` timed pairs, each ended by ti.sync(); the median pair over two is the step time.
The JSON carries the same fields as bespoke's lbm section (mlups, bytes_per_cell, gbps, seconds_per_step).

`--dump-spirv DIR` (Vulkan): compiles into a fresh offline cache and writes every SPIR-V module Taichi hands the
driver to DIR (`taichi-<n>.spv`), for `benches/tools/spirv_stats.py` beside naga's output for bespoke's kernel.
"""
import argparse
import json
import math
import os
import statistics
import struct
import sys
import tempfile
import time

import numpy as np
import taichi as ti

C = [(0, 0), (1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, 1), (-1, -1), (1, -1)]
W = [4 / 9] + [1 / 9] * 4 + [1 / 36] * 4


def taylor_green(nx, ny):
    x, y = np.meshgrid(np.arange(nx) * 2 * math.pi / nx, np.arange(ny) * 2 * math.pi / ny, indexing="ij")
    return np.ones((nx, ny)), -0.05 * np.cos(x) * np.sin(y), 0.05 * np.sin(x) * np.cos(y)


def equilibrium(rho, ux, uy):
    usq = ux * ux + uy * uy
    return np.stack([W[i] * rho * (1 + 3 * (cx * ux + cy * uy) + 4.5 * (cx * ux + cy * uy) ** 2 - 1.5 * usq)
                     for i, (cx, cy) in enumerate(C)])


def reference_step(f, omega):
    """One pull + BGK step in float64 on unshifted populations f[9, nx, ny]."""
    g = np.stack([np.roll(f[i], shift=(cx, cy), axis=(0, 1)) for i, (cx, cy) in enumerate(C)])
    rho = g.sum(0)
    ux = sum(cx * g[i] for i, (cx, _) in enumerate(C)) / rho
    uy = sum(cy * g[i] for i, (_, cy) in enumerate(C)) / rho
    return g + omega * (equilibrium(rho, ux, uy) - g)


def make_stepper(nx, ny, omega):
    """Two lattices of 9 fields each (one per direction: a lattice of 2048² f32 is 151 MB as one field, past
    lavapipe's 128 MiB binding limit, so Taichi's Vulkan backend refuses it), and a kernel per direction of copy."""
    a = [ti.field(ti.f32, shape=(nx, ny)) for _ in range(9)]
    b = [ti.field(ti.f32, shape=(nx, ny)) for _ in range(9)]
    cx = [c[0] for c in C]
    cy = [c[1] for c in C]

    def kernel(src, dst):
        @ti.kernel
        def step():
            for x, y in ti.ndrange(nx, ny):
                f = ti.Vector([0.0] * 9, ti.f32)
                for i in ti.static(range(9)):
                    f[i] = src[i][(x - cx[i] + nx) % nx, (y - cy[i] + ny) % ny]
                # Shifted populations: Σ f = ρ − 1, Σ c f = ρ u.
                rho = 1.0 + f.sum()
                ux = (f[1] - f[3] + f[5] - f[6] - f[7] + f[8]) / rho
                uy = (f[2] - f[4] + f[5] + f[6] - f[7] - f[8]) / rho
                usq = 1.5 * (ux * ux + uy * uy)
                for i in ti.static(range(9)):
                    cu = 3.0 * (cx[i] * ux + cy[i] * uy)
                    feq = W[i] * (rho * (1.0 + cu + 0.5 * cu * cu - usq) - 1.0)
                    dst[i][x, y] = f[i] + omega * (feq - f[i])

        return step

    return a, b, kernel(a, b), kernel(b, a)


def upload(fields, f):
    for i, fi in enumerate(fields):
        fi.from_numpy(np.ascontiguousarray(f[i]))


def download(fields):
    return np.stack([fi.to_numpy() for fi in fields])


def shifted(f):
    return (f - np.array(W)[:, None, None]).astype(np.float32)


def check(omega):
    nx, ny = 48, 40
    a, _, ab, ba = make_stepper(nx, ny, omega)
    f = equilibrium(*taylor_green(nx, ny))
    # A non-equilibrium start, so the collision has work: a deterministic perturbation.
    f = f * (1 + 0.01 * np.sin(np.arange(f.size).reshape(f.shape)))
    upload(a, shifted(f))
    for k in range(6):
        ab() if k % 2 == 0 else ba()
        f = reference_step(f, omega)
    got = download(a).astype(np.float64) + np.array(W)[:, None, None]
    err = float(np.abs(got - f).max())
    if not err <= 1e-6:
        raise SystemExit(f"Taichi D2Q9 differs from the f64 reference by {err:e}")
    return err


SPIRV_MAGIC = 0x07230203


def spirv_modules(blob):
    """SPIR-V modules inside a Taichi offline-cache file. Taichi serialises each module as a word count (u64,
    little-endian) followed by the words; a module is kept when its instruction stream (each instruction's first
    word holds its word count) ends exactly at that length."""
    out = []
    start = blob.find(struct.pack("<I", SPIRV_MAGIC))
    while start >= 8:
        count = struct.unpack_from("<Q", blob, start - 8)[0]
        end = start + 4 * count
        pos = start + 20  # magic, version, generator, bound, schema
        while end <= len(blob) and pos < end:
            n = struct.unpack_from("<I", blob, pos)[0] >> 16
            if n == 0:
                break
            pos += 4 * n
        if end <= len(blob) and pos == end:
            out.append(blob[start:end])
        start = blob.find(struct.pack("<I", SPIRV_MAGIC), start + 4)
    return out


def dump_spirv(cache_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    n = 0
    for root, _, files in os.walk(cache_dir):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                blob = f.read()
            for m in spirv_modules(blob):
                with open(os.path.join(out_dir, f"taichi-{n}.spv"), "wb") as f:
                    f.write(m)
                n += 1
    if n == 0:
        raise SystemExit(f"no SPIR-V found in Taichi's offline cache at {cache_dir}")
    print(f"{n} SPIR-V modules written to {out_dir}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=["vulkan", "cpu"], default="vulkan")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--dump-spirv", metavar="DIR")
    args = ap.parse_args()
    cache = {}
    if args.dump_spirv:
        if args.arch != "vulkan":
            raise SystemExit("--dump-spirv needs --arch vulkan")
        cache = {"offline_cache_file_path": tempfile.mkdtemp(prefix="taichi-spirv-")}
    ti.init(arch=ti.vulkan if args.arch == "vulkan" else ti.cpu, default_fp=ti.f32, offline_cache=True,
            log_level=ti.WARN, **cache)
    omega = 1.0
    err = check(omega)
    n = args.n
    a, _, ab, ba = make_stepper(n, n, omega)
    upload(a, shifted(equilibrium(*taylor_green(n, n))))

    def pair():
        ab()
        ba()

    for _ in range(2):
        pair()
    ti.sync()
    times = []
    for _ in range(args.reps):
        t = time.perf_counter()
        pair()
        ti.sync()
        times.append(time.perf_counter() - t)
    sps = statistics.median(times) / 2
    bytes_per_cell = 2 * 9 * 4
    mlups = n * n / sps / 1e6
    out = {
        "peer": f"taichi-{args.arch}", "taichi": ti.__version__, "arch": args.arch, "nx": n, "ny": n,
        "storage": "f32", "streaming": "ab", "collision": "bgk", "seconds_per_step": sps, "mlups": mlups,
        "bytes_per_cell": bytes_per_cell, "gbps": mlups * 1e6 * bytes_per_cell / 1e9, "reps": args.reps,
        "check_max_abs_err": err,
    }
    print(json.dumps(out))
    if args.dump_spirv:
        ti.reset()  # writes the offline cache
        dump_spirv(cache["offline_cache_file_path"], args.dump_spirv)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
