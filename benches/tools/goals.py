#!/usr/bin/env python3
"""Issue 35's and 36's goals against what a GPU session measured: one markdown row per goal and figure.

    python3 benches/tools/goals.py DIR [DIR ...]      # folders of a session (session.sh's $OUT, or its
                                                      # session-all.tar.gz unpacked; calls in subfolders)
    python3 benches/tools/goals.py ARCHIVE.tar.gz     # the same, unpacked into a temporary folder

It reads the JSON the stages write: bench-lbm / bench-fv / bench (the lbm and fv sections), peers-lbm (the plain
CUDA D2Q9 step), mm9-f32 / mm9-f64 with peers9-f32 / peers9-f64 (the nine operators and GiMMiK's CUDA kernels),
dense-<dtype>-<m>x<n>x<k> with peers-dense (the checked pick and cuBLAS), dense-sweep-* (the model's pick against
the best found). A goal with no figure says which stage would give it. Each row names its file: where two calls
measured the same thing, both rows are there.
"""
import glob
import json
import os
import re
import sys
import tarfile
import tempfile

from mm_table import load  # same folder


def files(dirs, pattern):
    """Every file under `dirs` whose name matches `pattern` (a regex on the base name), sorted by path."""
    out = []
    for d in dirs:
        for path in glob.glob(os.path.join(d, "**", "*.json"), recursive=True):
            if re.fullmatch(pattern, os.path.basename(path)):
                out.append(path)
    return sorted(out)


class Table:
    def __init__(self, roots):
        self.roots = roots
        self.rows = []

    def src(self, path):
        for r in self.roots:
            if path.startswith(r):
                return os.path.relpath(path, r)
        return path

    def add(self, issue, goal, figure, met, path):
        mark = "—" if met is None else ("**met**" if met else "not met")
        self.rows.append(f"| {issue} | {goal} | {figure} | {mark} | {self.src(path) if path else '—'} |")

    def missing(self, issue, goal, stage):
        self.add(issue, goal, f"not measured (stage `{stage}`)", None, None)


def lbm_runs(dirs):
    """(path, run) of every LBM run in bench JSON (bench-lbm.json, bench.json's lbm section)."""
    for path in files(dirs, r"bench(-lbm)?\.json"):
        for run in load(path).get("lbm", {}).get("runs", []):
            if run.get("seconds_per_step"):
                yield path, run


def judged(r, ok):
    """A goal is set at 8192² (the issue's lattice; FV's at 16.5 M tets): elsewhere the figure is shown, not
    judged."""
    return ok if (r.get("nx"), r.get("ny")) == (8192, 8192) else None


def rate(mlups):
    return f"{mlups / 1e3:.1f} GLUPS" if mlups >= 1e3 else f"{mlups:.1f} MLUPS"


def size(r):
    return f"{r['nx']}×{r['ny']}" if (r["nx"], r["ny"]) != (8192, 8192) else "8192²"


def lbm(t, dirs):
    runs = list(lbm_runs(dirs))
    cuda = {}
    for path in files(dirs, r"peers-lbm\.json"):
        for r in load(path).get("runs", []):
            cuda[r["storage"]] = (path, r)
    if not runs:
        t.missing(35, "D2Q9 8192² f32 two lattices ≥ 0.85 of copy, f16 ≥ 0.8, in place within 5 %", "bench-lbm")
    by = {}
    for path, r in runs:
        key = (r["storage"], r["streaming"])
        by.setdefault(path, {})[key] = r
        if r["streaming"] != "ab":
            continue
        goal = 0.85 if r["storage"] == "f32" else 0.8
        shape = r.get("step_shape", {})
        t.add(35, f"D2Q9 {size(r)} {r['storage']} two lattices ≥ {goal} of copy",
              f"{r['copy_fraction']:.3f} ({r['seconds_per_step'] * 1e3:.3f} ms, {rate(r['mlups'])}; "
              f"wg {shape.get('workgroup', '?')}, {shape.get('cells', '?')} a lane"
              f"{', one buffer' if shape.get('one_buffer') else ''}"
              f"{', alternate steps backwards' if shape.get('alternate') else ''})",
              judged(r, r["copy_fraction"] >= goal), path)
        if r["storage"] in cuda:
            cpath, c = cuda[r["storage"]]
            ratio = r["mlups"] / c["mlups"]
            want = 0.9 if r["storage"] == "f32" else None
            t.add(35, f"D2Q9 {size(r)} {r['storage']} against the plain CUDA kernel" + (" ≥ 0.9×" if want else ""),
                  f"×{ratio:.2f} ({rate(c['mlups'])}, {c['copy_fraction']:.3f} of its copy; {t.src(cpath)})",
                  judged(r, ratio >= want) if want else None, path)
    for path, got in by.items():
        for storage in ("f32", "f16"):
            ab, inplace = got.get((storage, "ab")), got.get((storage, "inplace"))
            if ab and inplace:
                slower = inplace["seconds_per_step"] / ab["seconds_per_step"]
                t.add(35, f"D2Q9 {size(ab)} {storage} in place within 5 % of two lattices",
                      f"×{slower:.3f} the two-lattice time ({inplace['copy_fraction']:.3f} of copy)",
                      judged(ab, slower <= 1.05), path)


def fv(t, dirs):
    found = False
    for path in files(dirs, r"bench(-fv)?\.json"):
        fvs = load(path).get("fv")
        if not fvs:
            continue
        metis = [r for r in fvs.get("runs", []) if r.get("ordering") == "metis" and r.get("copy_fraction")]
        if not metis:
            continue
        found = True
        best = max(metis, key=lambda r: r["copy_fraction"])
        t.add(35, f"FV METIS-ordered ≥ 0.75 of copy ({fvs.get('tets', 0) / 1e6:.1f} M tets)",
              f"{best['copy_fraction']:.3f} ({best['kernel']} {best['layout']}, {best['seconds_per_step'] * 1e6:.0f} µs;"
              f" {len(metis)} kernels × layouts from {min(r['copy_fraction'] for r in metis):.3f})",
              best["copy_fraction"] >= 0.75 if fvs.get("tets", 0) >= 16_000_000 else None, path)
        # The 16-bit offsets against tet-major (since 2026-11-30): where faster, `Layout::default_for` should take
        # them on GPUs.
        gather = {r["layout"]: r for r in metis if r["kernel"] == "gather"}
        for full in ("tet-major", "slot-major-x4"):
            d16 = f"{full}-d16"
            if full in gather and d16 in gather:
                r = gather[d16]["seconds_per_step"] / gather[full]["seconds_per_step"]
                far = gather[d16].get("far_fraction")
                far = f", {far:.3f} of tets far" if far is not None else ""
                t.add(35, f"FV METIS-ordered: {d16}'s time against {full}'s",
                      f"×{r:.3f} ({gather[d16]['copy_fraction']:.3f} of copy{far})", None, path)
    if not found:
        t.missing(35, "FV METIS-ordered ≥ 0.75 of copy", "bench-fv")
    # The same comparison at one launch shape (the lab's rows): the bench's rows run each layout in its own tuned
    # shape, which on lavapipe once made d16 look ×0.85 tet-major's time where one shape gave no gain.
    for path in files(dirs, r"(bench-lab-fv|lab|bench)\.json"):
        d = load(path)
        runs = (d.get("lab-fv") or d.get("lab") or {}).get("runs", [])
        times = {}
        for r in runs:
            m = re.fullmatch(r"\S+ tets metis f32 gather (\S+)", r.get("case", ""))
            if r.get("group") == "fv" and m and r.get("seconds") and "no-" not in r.get("variant", ""):
                times[(m.group(1), r["variant"])] = r["seconds"]
        for full in ("tet-major", "slot-major-x4"):
            d16 = f"{full}-d16"
            ratios = sorted(times[(d16, v)] / times[(l, v)] for (l, v) in times if l == full and (d16, v) in times)
            if ratios:
                t.add(35, f"FV METIS-ordered: {d16}'s time against {full}'s at one launch shape",
                      f"×{ratios[0]:.3f}–{ratios[-1]:.3f} over {len(ratios)} shapes", None, path)


def big(t, dirs, dtype):
    """hex-p6-m132 in `mm-big-*`'s groups (tuning unbounded, each group its own JSON): the fastest candidate's
    final timing against the copy floor, beside the library's own pick in mm9-*."""
    rows = []
    for path in files(dirs, rf"mm-big-{dtype}-.*\.json"):
        for m in load(path).get("matrices", []):
            if m["name"].startswith("hex-p6-m132") and m.get("seconds") and m.get("copy_floor_seconds"):
                rows.append((m["seconds"] / m["copy_floor_seconds"], m, path))
    if not rows:
        return
    ratio, m, path = min(rows, key=lambda r: r[0])
    tried = sorted({c["name"] for _, r, _ in rows for c in r.get("candidates", []) if c.get("seconds")})
    t.add(35, f"hex-p6-m132 {dtype} within ×2 of its floor, best of `mm-big-{dtype}`'s {len(tried)} timed candidates",
          f"{m['seconds'] * 1e3:.2f} ms, ×{ratio:.2f} the copy floor ({m['variant']}; {len(rows)} groups)",
          ratio <= 2, path)


def operators(t, dirs):
    for dtype in ("f32", "f64"):
        big(t, dirs, dtype)
        ours = files(dirs, rf"mm9-{dtype}\.json")
        peers = files(dirs, rf"peers9-{dtype}\.json")
        if not ours:
            t.missing(35, f"the nine operators {dtype} ≤ 1.1× GiMMiK's time; hex-p6-m132 within ×2 of its floor",
                      f"mm9-{dtype}")
            continue
        gimmik = {}
        for p in peers:
            for m in load(p).get("matrices", []):
                if m.get("seconds"):
                    gimmik[m["name"]] = m["seconds"]
        for path in ours:
            b = load(path)
            ratios = []
            for m in b.get("matrices", []):
                if m["name"].startswith("hex-p6-m132"):
                    floor = m.get("copy_floor_seconds")
                    fig = f"{m['seconds'] * 1e3:.2f} ms, ×{m['over_floor']:.2f} its access floor"
                    if floor:
                        fig += f", ×{m['seconds'] / floor:.2f} the copy floor"
                    t.add(35, f"hex-p6-m132 {dtype} within ×2 of its floor", f"{fig} ({m['variant']})",
                          m["seconds"] / floor <= 2 if floor else m["over_floor"] <= 2, path)
                if m["name"] in gimmik:
                    ratios.append((m["seconds"] / gimmik[m["name"]], m["name"]))
            if not b.get("complete", True):
                note = f" (cut: {len(b.get('matrices', []))} of {b.get('operators', '?')} operators)"
            else:
                note = ""
            if ratios:
                worst = max(ratios)
                met = sum(r <= 1.1 for r, _ in ratios)
                t.add(35, f"the nine operators {dtype} ≤ 1.1× GiMMiK's time",
                      f"{met} of {len(ratios)} within; worst ×{worst[0]:.2f} ({worst[1]}){note}",
                      met == len(ratios) == 9, path)
            else:
                t.add(35, f"the nine operators {dtype} ≤ 1.1× GiMMiK's time",
                      f"no GiMMiK figure beside them (stage `peers9-{dtype}`){note}", None, path)


def dense(t, dirs):
    cublas = {}
    for path in files(dirs, r"peers-dense\.json"):
        for r in load(path).get("runs", []):
            cublas[(r["dtype"], r["m"], r["n"], r["k"])] = r["gflops"]
    shapes = files(dirs, r"dense-f(32|64)-\d+x\d+x\d+\.json")
    if not shapes:
        t.missing(36, "f32 ≥ 0.75× cuBLAS; f64 ≥ 0.6 of the FMA peak", "dense")
    for path in shapes:
        d = load(path)
        key = (d["dtype"], d["m"], d["n"], d["k"])
        shape = f"{d['m']}×{d['n']}×{d['k']} {d['dtype']}"
        tiling = d["params"]["key"]
        if d["dtype"] == "f32":
            if key in cublas:
                r = d["gflops"] / cublas[key]
                t.add(36, f"{shape} ≥ 0.75× cuBLAS", f"×{r:.2f} ({d['gflops']:.0f} against {cublas[key]:.0f} GFLOP/s; "
                      f"{tiling}, {d['peak_fraction']:.2f} of the FMA peak)", r >= 0.75, path)
            else:
                t.add(36, f"{shape} ≥ 0.75× cuBLAS", f"{d['gflops']:.0f} GFLOP/s, no cuBLAS figure (stage `peers-dense`)",
                      None, path)
        elif max(d["m"], d["n"], d["k"]) >= 2048:
            t.add(36, f"{shape} ≥ 0.6 of the FMA peak", f"{d['peak_fraction']:.3f} ({d['gflops']:.0f} of "
                  f"{d['fma_peak_gflops']:.0f} GFLOP/s; {tiling})", d["peak_fraction"] >= 0.6, path)
    sweeps = files(dirs, r"dense-sweep.*\.json")
    if not sweeps:
        t.missing(36, "the model's pick within 10 % of the best found", "dense-sweep")
    for path in sweeps:
        s = load(path)
        shape = f"{s['m']}×{s['n']}×{s['k']} {s['dtype']}"
        checked = s.get("checked_pick") or {}
        key = lambda pick: pick.get("params", {}).get("key", "?")
        fig = f"E = {s['efficiency']:.3f} (model pick {key(s['model_pick'])})"
        if checked.get("efficiency") is not None:
            fig += f"; checked pick E = {checked['efficiency']:.3f} ({key(checked)})"
        t.add(36, f"{shape}: the model's pick within 10 % of the best of {s.get('configs_screened', '?')}", fig,
              s["efficiency"] >= 0.9, path)


def tuning_notes(dirs):
    """Per mm9-* / mm-big-* JSON: the operators' tuning seconds, and what compiling the candidates at once took
    against their compiles one by one (`parallel_compile`, since the thirty-eighth session)."""
    notes = []
    for path in files(dirs, r"mm(9|-big)-.*\.json"):
        rows = [m for m in load(path).get("matrices", []) if not m.get("from_cache")]
        if not rows:
            continue
        tuned = sum(m.get("tune_seconds", 0.0) for m in rows)
        at_once = [m["parallel_compile"] for m in rows if m.get("parallel_compile")]
        line = f"{os.path.basename(path)}: {len(rows)} operators tuned in {tuned:.1f} s"
        if at_once:
            kernels = sum(p["kernels"] for p in at_once)
            wall = sum(p["wall_seconds"] for p in at_once)
            one = sum(p["kernel_seconds"] for p in at_once)
            workers = max(p["threads"] for p in at_once)
            line += (f"; {kernels} kernels compiled at once on up to {workers} workers in {wall:.1f} s "
                     f"({one:.1f} s of compiles one by one)")
        else:
            line += "; compiled one by one"
        notes.append(line)
    return notes


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        sys.exit(__doc__)
    tmp = None
    dirs = []
    for a in args:
        if a.endswith((".tar.gz", ".tgz")):
            tmp = tmp or tempfile.TemporaryDirectory()
            dest = os.path.join(tmp.name, str(len(dirs)))
            with tarfile.open(a) as tf:
                try:
                    tf.extractall(dest, filter="data")
                except TypeError:  # Python before 3.11.4 / 3.12: no extraction filters
                    tf.extractall(dest)
            dirs.append(dest + os.sep)
        elif os.path.isdir(a):
            dirs.append(os.path.join(a, ""))
        else:
            sys.exit(f"goals.py: {a} is neither a folder nor a .tar.gz")
    t = Table(dirs)
    lbm(t, dirs)
    fv(t, dirs)
    operators(t, dirs)
    dense(t, dirs)
    print("| issue | goal | figure | | file |")
    print("|---|---|---|---|---|")
    print("\n".join(t.rows))
    met = sum("**met**" in r for r in t.rows)
    judged = sum(("**met**" in r) or ("not met" in r) for r in t.rows)
    print(f"\n{met} of {len(t.rows)} rows met ({judged} with a goal to judge).")
    notes = tuning_notes(dirs)
    if notes:
        print("\nTuning (not a goal):\n" + "\n".join(f"- {n}" for n in notes))


if __name__ == "__main__":
    main()
