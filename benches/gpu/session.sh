#!/usr/bin/env bash
# One GPU session's measurements, in stages that each fit the device tool's 10-minute limit. Run on the device
# from the repository root, with .gl/ and .devbin/ carried (benches/gpu/prepare.sh makes them):
#   benches/gpu/session.sh info bench peers9-f32 peers9-f64
#   SESSION_DEADLINE=570 benches/gpu/session.sh info@20 tests@170 bench@330   (each stage stopped after so many
#                 seconds, and none past 570 s: run with the device tool's timeout_s 600)
# Stages:
#   info          the adapters (with PCI bus ids), then the one taken: features, limits, copy probe
#   tests         every test binary of the workspace (prepare.sh packs them), each from its package's folder with
#                 BESPOKE_REQUIRE_GPU=1, under a timeout of its own (TEST_TIMEOUT, 120 s, cut to what the stage has
#                 left), TEST_JOBS (4) at a time, longest expected first (benches/gpu/test-seconds.tsv), cli_ranks
#                 alone after them, with a cache folder of their own;
#                 tests/summary.txt lists each binary's result line; TEST_ONLY=REGEX runs those whose name matches;
#                 the tests named …_without_a_device (no device opened; CI runs them) are skipped unless
#                 TEST_DEVICE_FREE=1.
#                 On an H200 (2026-11-27) all 33 one at a time took ~5 min (bespoke_mm's unit tests alone ~60 s of
#                 naga validation); four at a time not yet timed there
#   bench         every `bespoke bench` section at GPU sizes (mm: 9 shipped operators at N = 2^20, f32 and f64;
#                 lbm: 8192²; fv: 16.5 M tets); bench-copy, bench-dense, bench-mm, bench-lbm, bench-fv run one
#                 section each, when all of them together would pass the 10-minute limit
#   lab           `bespoke lab`: copy variants; LBM 8192² at every step workgroup, cells per invocation, one
#                 buffer, without collision or pulls, with the mask wrap, with a flag field; the 9 operators at
#                 N = 2^19 against their access and copy floors; FV orderings × kernels (docs/gpu.md, "The lab").
#                 One group per stage: bench-lab-copy, bench-lab-lbm, bench-lab-mm, bench-lab-fv (each row is
#                 also printed as it is measured, so a stage cut short keeps its rows in its log)
#   dense         `mm dense-bench` (the model's pick) at issue 36's shapes: 2048³–8192³, 96×100 000×64,
#                 343×100 000×1029 in f32; 2048³, 4096³ in f64; 4096³ f32 again with the bounds checks kept, and
#                 three tilings at 4096³ with their K steps in a loop and unrolled (-u), and their lanes paired
#                 and laid in rows (-r)
#   dense-sweep   screened sweeps (model pick against the best found) at 4096³ f32, 96×100 000×64 f32, 2048³ f64,
#                 every configuration and its unrolled twin
#   peers-dense   cuBLAS at the same shapes (benches/peers/cublas_dense.py, TF32 off, checked first)
#   mm9-f32 mm9-f64  the 9 shipped operators at N = 2^20 in `mm bench`'s JSON (what peers_table.py joins)
#   mm-f32 mm-f64 the whole PyFR suite at N = 2^20 (long: split by shape with mm-f32-hex, mm-f64-tet, ...)
#   mm-big-f32 mm-big-f64  hex-p6-m132 (343×1029, 7056 non-zeros) at N = 2^20, tuning unbounded so every
#                 candidate of a group is compiled and timed (compile seconds and times in the JSON's candidates),
#                 each group its own `mm bench` and JSON, so a stage cut short keeps the groups before the cut.
#                 Since 2026-12-04 (the sixth H200 session timed the families at the default launch length, 4
#                 launches reading B 2.03×, ×2.05 the copy floor at best, and their long twins, one launch
#                 reading B once, slower): first bstream-msplit with fewer accumulators an invocation or more
#                 workgroup memory in flight (mid twins -a1024: 2 launches reading B 1.38×; 8 invocation rows;
#                 -smem32/-smem48 stages) beside the sixth session's pick, bstream-msplit-s4; then the long
#                 twins of the families it timed, with the rolled pick of 2026-11-26/28
#   peers9-f32 peers9-f64 peers-f32 peers-f64
#                 GiMMiK 4.0 CUDA and cuBLAS on the 9 shipped operators / the whole suite, same N and β
#   peers-lbm     a plain CUDA D2Q9 step (benches/peers/cuda_lbm.py: 256-thread blocks, pull, SoA, f32 and f16) at 8192²,
#                 checked against a numpy step first: the kernel bespoke's lbm rows are measured against
#   peers-compile (not a stage of its own, like fv-order) in the background: every GiMMiK kernel of the 9 shipped
#                 operators at N = 2^20, f32 then f64, compiled by NVRTC into CuPy's kernel cache (.devbin/cupy-cache)
#                 on 4 threads, nothing run on the GPU, while bespoke's stages use it; a later peers stage in the
#                 same call waits for it and finds its kernels compiled, as does one in a later call while the
#                 machine is warm (on 2026-11-28 peers9-f32 spent 25-30 s an operator, mostly compiling)
#   fv-order      (not a stage of its own: it starts and the next stage follows at once) `bespoke fv order --box 140`
#                 in the background: the METIS order of the GPU bench's 16.5 M-tet mesh (84–93 s on one core of the
#                 build VM) into .devbin/cache while other stages use the GPU; bench, lab, bench-fv and bench-lab-fv
#                 wait for it before they start. List it first in a call that runs one of those.
#   streams       the LBM step's memory pattern alone (crates/gpu/examples/streams/: K streams in and out, widths,
#                 bindings, staggering, bounds checks, cells per invocation, the step built up, 18 allocations;
#                 on a constant, random words, a smooth field and it less its mean, then random and smooth swapped
#                 between their allocations; at the 8192² lattice's size)
#   lbm-width     the generated f32 step beside a hand-written one on the same buffers (step_cost f32) at 8192×8192,
#                 4096×16384 and 8256×8128, and the streams rows with 8192-wide pulls: whether the LBM's 0.36 of
#                 copy is the generated code or the lattice's width or row alignment (docs/gpu.md, next session)
#   lbm-examples  at 8192² (LBM_SIZE="NX NY" overrides): where the LBM step's time goes (step_cost: memory only vs collision vs pulls vs f16
#                 conversions) and the populations-in-textures trial (texture_trial)
#   lbm-cylinder  Schäfer–Turek 2D-2 at D = 40 and 80 cells, lattice velocity 0.05 and 0.025 (resolution and Mach
#                 convergence of c_D, c_L, St, ΔP; minutes on a GPU, hours on lavapipe)
# Results go to $OUT (the device tool's folder) or ./results; the tuning cache persists in .devbin/cache
# while the machine stays warm.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Stages write into a folder beside $OUT; $OUT gets only the archive, the stage list and the tests' summary (the
# device tool hands back at most 8 files from $OUT).
RESULTS=${OUT:-results}
mkdir -p "$RESULTS"
OUT=${SESSION_WORK:-$(cd "$RESULTS" && pwd)-work}
export SESSION_WORK=$OUT
mkdir -p "$OUT"
N=1048576

if [ -n "$(ls .gl/*.deb 2>/dev/null)" ] && ! ldconfig -p | grep -q libvulkan.so.1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export BESPOKE_REQUIRE_GPU=1 BESPOKE_CACHE_DIR=$PWD/.devbin/cache
# CuPy's compiled kernels: where peers-compile leaves them for the peers stages.
export CUPY_CACHE_DIR=$PWD/.devbin/cupy-cache
bin=.devbin/bespoke
suite=.devbin/pyfr/core

# GiMMiK importable (installed from the carried wheels where it is not), or a message into $OUT/NAME.txt.
peer_site() {  # peer_site NAME
    local site=${PEER_SITE:-/tmp/peer-site}
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    python3 -c 'import gimmik' 2>/dev/null && return 0
    if ! ls .devbin/wheels/*.whl > /dev/null 2>&1; then
        echo "$1: no GiMMiK here and no .devbin/wheels: add .devbin/wheels to the run's carry" | tee "$OUT/$1.txt"
        return 1
    fi
    python3 -m pip install -q --no-index --no-deps --target "$site" .devbin/wheels/*.whl
}

peers() {  # peers NAME DTYPE FILES...
    local name=$1 dtype=$2
    shift 2
    peer_site "$name" || return 1
    python3 benches/peers/gimmik_cublas.py "$@" --n $N --dtype "$dtype" --json "$OUT/$name.json" \
        2>&1 | tee "$OUT/$name.txt"
}

# The peers' NVRTC compiles ahead of their stages (peers-compile, in the background).
peers_compile() {
    peer_site peers-compile || return 1
    for dtype in f32 f64; do
        python3 benches/peers/gimmik_cublas.py tests/data/pyfr --n $N --dtype $dtype --compile-only \
            --compile-threads 4 || echo "peers-compile: $dtype failed (the peers stages compile for themselves)"
    done
}

# The test list (NAME<TAB>PKG lines) longest expected first, by TEST_SECONDS (benches/gpu/test-seconds.tsv: a
# binary's name without its hash, its seconds on the last GPU run; one not listed counts 20 s), ties in list
# order. In cargo's order the longest binary (bespoke_mm, 70 s) started last on 2026-11-28 and ran alone at the
# end: the stage took 182 s where its binaries' seconds, four at a time, come to ~110.
longest_first() {
    local table=${TEST_SECONDS:-benches/gpu/test-seconds.tsv}
    [ -f "$table" ] || table=/dev/null
    # (FILENAME, not NR == FNR: an empty table would take the list for itself.)
    awk -F'\t' 'FILENAME == ARGV[1] { if ($1 !~ /^#/) s[$1] = $2; next }
        { n = $1; sub(/-[0-9a-f]+$/, "", n); printf "%s\t%d\t%s\t%s\n", (n in s) ? s[n] : 20, FNR, $1, $2 }' \
        "$table" "$1" | sort -t$'\t' -k1,1gr -k2,2n | cut -f3-
}

# One test binary: NAME PKG LIMIT ARGS... → $OUT/tests/NAME.txt, a line in summary.txt as it ends.
# Tests named `…_without_a_device` open no device (bespoke_gpu::testing::DEVICE_FREE, enforced there): naga's
# validation of every generated kernel and the like, 90 s of bespoke_mm's CPU time on the 2-core VM. CI runs them;
# here they would only spend the device's time, so they are skipped unless TEST_DEVICE_FREE=1.
run_test() {
    local name=$1 pkg=$2 limit=$3 rc=0 skip=(--skip _without_a_device)
    shift 3
    [ "${TEST_DEVICE_FREE:-0}" = 1 ] && skip=()
    (cd "$pkg" && CI=true INSTA_WORKSPACE_ROOT=$top \
        exec timeout "$limit" "$dir/tests/$name" --test-threads 4 "${skip[@]}" "$@") > "$OUT/tests/$name.txt" 2>&1 || rc=$?
    echo "$rc" > "$OUT/tests/$name.rc"
    printf '%-40s rc %3d  %s\n' "$name" "$rc" \
        "$(grep -E '^test result:' "$OUT/tests/$name.txt" | tail -1 || true)" >> "$OUT/tests/summary.txt"
}

# Seconds left before this stage's own limit (STAGE_END, set by STAGE@SECONDS), less a margin to write up; a
# large number outside such a stage.
stage_left() {
    if [ -n "${STAGE_END:-}" ]; then echo $((STAGE_END - 8 - $(date +%s))); else echo 100000; fi
}

# Every test binary, TEST_JOBS (4) at a time: a GPU runs several small test processes at once, and on an H200 the
# 33 binaries one after the other took ~5 minutes of the session's 15. cli_ranks (thread ranks, a device each)
# runs alone after the rest. Each binary's limit ends before the stage's, so none outlives it (the stage's
# timeout stops this shell, not its children). summary.txt: a line per binary as it ends, then all in list order.
tests() {
    local root running=() alive p name pkg limit left
    top=$PWD
    dir=$(mktemp -d)
    tar xJf .devbin/tests.tar.xz -C "$dir"
    # The tests were built with CARGO_MANIFEST_DIR under the build machine's checkout: that path, here, is this
    # tree. insta finds its snapshots from INSTA_WORKSPACE_ROOT instead of `cargo metadata` (no cargo here).
    root=$(cat "$dir/tests/build-root.txt")
    if [ "$root" != "$PWD" ] && [ ! -e "$root" ]; then
        mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
    fi
    # The CLI tests run the binary at the path cargo gave them (target/release/bespoke under the checkout).
    if [ ! -x target/release/bespoke ]; then
        mkdir -p target/release && cp .devbin/bespoke target/release/bespoke
    fi
    # The tests' tuning and model caches apart from the bench's: what several test processes measure at once on
    # one device is no input for the bench stages (and not in $OUT: a driver's pipeline cache may be large).
    export BESPOKE_CACHE_DIR=$PWD/.devbin/tests-cache
    # The library's launch-shape tuners take their defaults: each binary would tune its lattices and operators at
    # GPU sizes from an empty cache (docs/gpu.md, "Tuning off"); the tuners' own tests and the CLI's still tune.
    export BESPOKE_NO_TUNING=1
    mkdir -p "$OUT/tests"
    : > "$OUT/tests/summary.txt"
    local jobs=${TEST_JOBS:-4} last=()
    while IFS=$'\t' read -r name pkg; do
        # TEST_ONLY=REGEX: only the binaries whose name (e.g. shape-1a2b…) matches it.
        if [ -n "${TEST_ONLY:-}" ] && ! [[ $name =~ $TEST_ONLY ]]; then continue; fi
        # cli_ranks runs the CLI 15 times on 1–4 thread ranks: 13–26 s on an H200 once four ranks closed their
        # devices in turn (2026-11-27; before, four-rank runs hung at exit). It prints each run's time and phases
        # (--nocapture), gets a limit of its own and runs alone; BESPOKE_CLI_TIMEOUT stops a single run.
        if [[ $name =~ ^cli_ranks- ]]; then last=("$name" "$pkg"); continue; fi
        while [ "${#running[@]}" -ge "$jobs" ]; do
            sleep 0.2
            alive=()
            for p in "${running[@]}"; do kill -0 "$p" 2> /dev/null && alive+=("$p"); done
            running=("${alive[@]}")
        done
        left=$(stage_left)
        if [ "$left" -lt 5 ]; then echo "$name: not started, the stage's time is up" >> "$OUT/tests/summary.txt"; continue; fi
        limit=${TEST_TIMEOUT:-120}
        [ "$left" -lt "$limit" ] && limit=$left
        # bespoke-gpu's device tests print what the card does where lavapipe differs (does it fuse multiply-adds,
        # flush subnormals, run workgroups in id order), bespoke-lbm's step tests how its pack2x16float rounds
        # (the f16 populations' stores): their logs keep it.
        if [[ $name =~ ^(device|step)- ]]; then
            run_test "$name" "$pkg" "$limit" --nocapture &
        else
            run_test "$name" "$pkg" "$limit" &
        fi
        running+=($!)
    done < <(longest_first "$dir/tests/list.tsv")
    # Not a bare `wait`: outside a STAGE@SECONDS stage the telemetry logger is a child too, and never ends.
    if [ "${#running[@]}" -gt 0 ]; then wait "${running[@]}" 2> /dev/null || true; fi
    if [ "${#last[@]}" -gt 0 ]; then
        left=$(stage_left) limit=${TEST_TIMEOUT_RANKS:-300}
        [ "$left" -lt "$limit" ] && limit=$left
        if [ "$limit" -ge 5 ]; then
            run_test "${last[0]}" "${last[1]}" "$limit" --nocapture
        else
            echo "${last[0]}: not started, the stage's time is up" >> "$OUT/tests/summary.txt"
        fi
    fi
    # The summary again in list order (the lines above are in the order the binaries ended).
    {
        echo "-- in list order"
        while IFS=$'\t' read -r name pkg; do
            [ -f "$OUT/tests/$name.rc" ] || continue
            printf '%-40s rc %3d  %s\n' "$name" "$(cat "$OUT/tests/$name.rc")" \
                "$(grep -E '^test result:' "$OUT/tests/$name.txt" | tail -1 || true)"
        done < "$dir/tests/list.tsv"
    } >> "$OUT/tests/summary.txt"
    cat "$OUT/tests/summary.txt"
    rm -rf "$dir"
}

# Everything in one archive, also when a stage failed: a remote machine may hand back only a few files. It is
# remade after every stage, so a call the device tool stops at its limit still hands back what finished.
pack() {
    [ -n "${SESSION_NESTED:-}" ] && return 0
    # What the tuners and the dense model decided on this card (.devbin/cache's small entries: launch shapes,
    # operator tunings, checked picks, the model's measured inputs), beside the figures they produced: a record of
    # the choices, and priors a later session can start from. Not the driver's pipelines nor the METIS orders.
    if [ -d .devbin/cache ]; then
        (cd .devbin/cache && find . -name '*.entry' -size -256k ! -path './driver-pipelines*' -print0 \
            | tar cf - --null -T - 2> /dev/null) | { mkdir -p "$OUT/cache" && tar xf - -C "$OUT/cache"; } || true
    fi
    tar czf "$OUT.tar.gz" -C "$OUT" . && mv "$OUT.tar.gz" "$RESULTS/session-all.tar.gz"
    for f in stages.txt tests/summary.txt; do [ -f "$OUT/$f" ] && cp "$OUT/$f" "$RESULTS/${f//\//-}"; done
    return 0
}
# The card's clocks, power, temperature and throttle reasons every 200 ms while the stages run (nvidia-smi only
# reads them; METHOD.md: never set them), so a row that moves between calls can be set beside the card's state
# then: on 2026-11-27 the same LBM kernel on the same buffers read 0.37 of copy in one call and 0.84 in another.
telemetry_pid=
if [ -z "${SESSION_NESTED:-}" ] && command -v nvidia-smi > /dev/null; then
    fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,utilization.memory
    for r in clocks_event_reasons.active clocks_throttle_reasons.active; do
        if nvidia-smi --query-gpu=$r --format=csv > /dev/null 2>&1; then fields=$fields,$r; break; fi
    done
    nvidia-smi --query-gpu=$fields --format=csv -lms 200 > "$OUT/gpu-telemetry.csv" 2>&1 &
    telemetry_pid=$!
fi
fv_order_pid=
peers_compile_pid=
finish() {
    for pid in "$telemetry_pid" "$fv_order_pid" "$peers_compile_pid"; do
        if [ -n "$pid" ]; then kill "$pid" 2> /dev/null || true; fi
    done
    pack
}
trap finish EXIT

# Waits for a background job (fv-order, peers-compile) before the stage that needs it, and says how long.
await() {  # await JOB PID STAGE WHAT-THE-STAGE-DOES-IF-IT-FAILED
    local start
    start=$(date +%s)
    wait "$2" || echo "== $1 failed: $3 $4" | tee -a "$OUT/stages.txt"
    echo "== $1 waited for $(($(date +%s) - start)) s before $3" | tee -a "$OUT/stages.txt"
}

# SESSION_DEADLINE=SECONDS: no STAGE@SECONDS stage runs past so many seconds from here (its limit is cut to
# what is left, and one with under 10 s left is skipped), so the script packs and ends inside the device tool's
# limit however long each stage turns out to take.
t0=$(date +%s)
for stage in "$@"; do
    case ${stage%@*} in
        fv-order)
            echo "== fv-order: in the background ($(date -u +%FT%TZ))" | tee -a "$OUT/stages.txt"
            BESPOKE_PHASE_TIMES=1 $bin fv order --box 140 > "$OUT/fv-order.txt" 2>&1 &
            fv_order_pid=$!
            continue ;;
        peers-compile)
            echo "== peers-compile: in the background ($(date -u +%FT%TZ))" | tee -a "$OUT/stages.txt"
            peers_compile > "$OUT/peers-compile.txt" 2>&1 &
            peers_compile_pid=$!
            continue ;;
        peers9-*|peers-f32|peers-f64|peers-f32-*|peers-f64-*)
            if [ -n "$peers_compile_pid" ]; then
                await peers-compile "$peers_compile_pid" "${stage%@*}" "compiles for itself"
                peers_compile_pid=
            fi ;;
        bench|lab|bench-fv|bench-lab-fv)
            if [ -n "$fv_order_pid" ]; then
                await fv-order "$fv_order_pid" "${stage%@*}" "orders the mesh itself"
                fv_order_pid=
            fi ;;
    esac
    # STAGE@SECONDS: the stage in a process of its own, stopped after SECONDS (the rest still run).
    case $stage in
        *@*)
            limit=${stage#*@} stage=${stage%@*}
            if [ -n "${SESSION_DEADLINE:-}" ]; then
                left=$((t0 + SESSION_DEADLINE - $(date +%s)))
                if [ "$left" -lt 10 ]; then
                    echo "== $stage: skipped, $left s left" | tee -a "$OUT/stages.txt"
                    continue
                fi
                [ "$left" -lt "$limit" ] && limit=$left
            fi
            echo "== $stage, at most $limit s ($(date -u +%FT%TZ))"
            start=$(date +%s)
            rc=0
            SESSION_NESTED=1 OUT=$RESULTS STAGE_END=$((start + limit)) timeout -k 10 "$limit" "$0" "$stage" || rc=$?
            echo "== $stage: rc $rc after $(($(date +%s) - start)) s (from $(date -u -d @"$start" +%FT%TZ))" \
                | tee -a "$OUT/stages.txt"
            pack
            continue ;;
    esac
    echo "== $stage ($(date -u +%FT%TZ))"
    case $stage in
        info) { $bin adapters; $bin info; } 2>&1 | tee -a "$OUT/info.txt" ;;
        # In a subshell: its exports (the tests' cache, no tuning) stay out of the stages after it.
        tests) ( tests ) ;;
        # Each phase's seconds (set-up, orderings, tuning, timed runs) in the log: where a stage's time went.
        bench) BESPOKE_PHASE_TIMES=1 $bin bench --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt" ;;
        lab) BESPOKE_PHASE_TIMES=1 $bin lab --json "$OUT/lab.json" 2>&1 | tee "$OUT/lab.txt" ;;
        bench-*)
            BESPOKE_PHASE_TIMES=1 $bin bench --section "${stage#bench-}" --json "$OUT/$stage.json" 2>&1 \
                | tee "$OUT/$stage.txt" ;;
        mm9-f32|mm9-f64)
            $bin mm bench tests/data/pyfr --n $N --dtype "${stage#mm9-}" --json "$OUT/$stage.json" 2>&1 | tee "$OUT/$stage.txt" ;;
        mm-f32|mm-f64)
            $bin mm bench $suite --n $N --dtype "${stage#mm-}" --json "$OUT/$stage.json" 2>&1 | tee "$OUT/$stage.txt" ;;
        mm-f32-*|mm-f64-*)
            dtype=${stage:3:3} shape=${stage:7}
            $bin mm bench $suite/"$shape"-*.mtx --n $N --dtype "$dtype" --json "$OUT/$stage.json" \
                2>&1 | tee "$OUT/$stage.txt" ;;
        mm-big-f32|mm-big-f64)
            # The groups expected nearest the floor first (fewer accumulators an invocation, more bytes in flight).
            for group in bstream-msplit-s4-a1024,bstream-msplit-s8-a4096,bstream-msplit-s8-a4096-smem48,bstream-msplit-s4-a4096-smem48,bstream-msplit-s4 \
                    bstream-msplit-s8-a1024,bstream-msplit-s4-a1024-smem48,bstream-msplit-s8-a4096-smem32,bstream-msplit-s2-a1024,bstream-a1024 \
                    bstream-msplit-s4-a4096,bstream-a4096,cstream-ksplit-s4-a4096,rolled-r8-v4; do
                $bin mm bench tests/data/pyfr/hex-p6-m132-dflt.mtx --n $N --dtype "${stage#mm-big-}" \
                    --tune-budget inf --retune --variants "$group" --json "$OUT/$stage-${group%%,*}.json" \
                    2>&1 | tee -a "$OUT/$stage.txt"
            done ;;
        dense)
            # The model's measured inputs (θ, the accumulator curves, workgroup-memory rates), kept beside its picks.
            for dtype in f32 f64; do
                $bin mm dense-model --dtype $dtype > "$OUT/dense-model-$dtype.txt" 2>&1 || true
            done
            for shape in 2048x2048x2048 4096x4096x4096 8192x8192x8192 96x100000x64 343x100000x1029 \
                    f64:2048x2048x2048 f64:4096x4096x4096; do
                dtype=f32
                case $shape in f64:*) dtype=f64 shape=${shape#f64:} ;; esac
                IFS=x read -r m n k <<< "$shape"
                $bin mm dense-bench --m "$m" --n "$n" --k "$k" --dtype $dtype \
                    --json "$OUT/dense-$dtype-$shape.json" 2>&1 | tee -a "$OUT/dense.txt"
            done
            # What naga's runtime bounds checks cost the kernel (off by default since 2026-11-26).
            $bin mm dense-bench --m 4096 --n 4096 --k 4096 --bounds-checks \
                --json "$OUT/dense-f32-4096-checked.json" 2>&1 | tee -a "$OUT/dense.txt"
            # K steps in naga's loop against unrolled (-u), and lanes paired (the default since 2026-12-03) against
            # laid in rows (-r, every kernel the H200 ran before): the fifth session's best f32 tiling, CUTLASS's
            # SIMT point, and the best f64 tiling of its 2048³ sweep (the checked picks above time the -u twins too).
            for p in t4x16v4-w32x16-k8-s1-b2 t8x8v4-w16x16-k8-s1-b2 f64:t16x4v4-w8x32-k8-s1-b2; do
                dtype=f32
                case $p in f64:*) dtype=f64 p=${p#f64:} ;; esac
                for q in $p $p-u $p-r; do
                    $bin mm dense-bench --m 4096 --n 4096 --k 4096 --dtype $dtype --params $q \
                        --json "$OUT/dense-$dtype-4096-$q.json" 2>&1 | tee -a "$OUT/dense.txt"
                done
                # Where the time goes (docs/dense-model.md, "Ablations"): no loads of A and B after the first K
                # tile; fragments from workgroup memory once per tile. Against the plain kernel's time above.
                for ablation in stage-once fragments-once; do
                    $bin mm dense-bench --m 4096 --n 4096 --k 4096 --dtype $dtype --params $p --ablate $ablation \
                        --json "$OUT/dense-$dtype-4096-$p-$ablation.json" 2>&1 | tee -a "$OUT/dense.txt"
                done
            done ;;
        dense-sweep)
            # Phase times: the compiles of every configuration against the screening runs.
            export BESPOKE_PHASE_TIMES=1
            # Every configuration and its unrolled twin (-u).
            $bin mm dense-sweep --m 4096 --n 4096 --k 4096 --screen 0.5 --confirm 4 --unrolled \
                --json "$OUT/dense-sweep-4096.json" 2>&1 | tee "$OUT/dense-sweep.txt"
            $bin mm dense-sweep --m 96 --n 100000 --k 64 --screen 0.05 --confirm 4 --unrolled \
                --json "$OUT/dense-sweep-panel.json" 2>&1 | tee -a "$OUT/dense-sweep.txt"
            $bin mm dense-sweep --m 2048 --n 2048 --k 2048 --dtype f64 --screen 0.5 --confirm 4 --unrolled \
                --json "$OUT/dense-sweep-f64-2048.json" 2>&1 | tee -a "$OUT/dense-sweep.txt" ;;
        peers-dense) python3 benches/peers/cublas_dense.py --json "$OUT/peers-dense.json" 2>&1 | tee "$OUT/peers-dense.txt" ;;
        peers-lbm) python3 benches/peers/cuda_lbm.py --size 8192 --json "$OUT/peers-lbm.json" 2>&1 | tee "$OUT/peers-lbm.txt" ;;
        peers9-f32|peers9-f64) peers "$stage" "${stage#peers9-}" tests/data/pyfr ;;
        peers-f32|peers-f64) peers "$stage" "${stage#peers-}" $suite ;;
        peers-f32-*|peers-f64-*)
            peers "$stage" "${stage:6:3}" $suite/"${stage:10}"-*.mtx ;;
        streams)
            # At the 8192² lattice's size (2^26 cells a stream, 4.8 GB moved a row), so its rows compare with
            # step_cost's; STREAMS_CELLS overrides.
            .devbin/streams "${STREAMS_CELLS:-67108864}" 2>&1 | tee "$OUT/streams.txt" ;;
        lbm-width)
            # 8256 × 8128: about as many cells, rows not a power of two (whether the row stride's alignment is it).
            for size in "8192 8192" "4096 16384" "8256 8128"; do
                # shellcheck disable=SC2086
                .devbin/step_cost $size f32 2>&1 | tee -a "$OUT/lbm-width.txt"
            done
            .devbin/streams 67108864 8192 2>&1 | tee -a "$OUT/lbm-width.txt" ;;
        lbm-examples)
            # shellcheck disable=SC2086
            .devbin/step_cost ${LBM_SIZE:-8192 8192} 2>&1 | tee "$OUT/lbm-step-cost.txt"
            # shellcheck disable=SC2086
            .devbin/texture_trial ${LBM_SIZE:-8192 8192} 2>&1 | tee "$OUT/lbm-texture-trial.txt" ;;
        lbm-host)
            # Host memory of a lattice a GPU holds (docs/lbm.md, "Host memory"): the peak resident set of a run
            # that sets up 16384² (f32, 19 GB on the device), checkpoints it (9.7 GB), of its resume, and of the
            # same case on two thread ranks (each its own device, metrics from its own cells: docs/scale.md). On
            # lavapipe the device buffers are host memory; here they are not, so this is the host's own share.
            ck=/tmp/bespoke-lbm-host.ckpt
            for args in "--size 16384x16384 --steps 10 --checkpoint $ck" "--steps 20 --resume $ck" \
                    "--size 16384x16384 --steps 10 --ranks 2"; do
                # shellcheck disable=SC2086
                python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
print(f"peak resident set {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6:.2f} GB (rc {rc}): {sys.argv[1:]}")' \
                    $bin lbm taylor-green $args 2>&1 | tee -a "$OUT/lbm-host.txt"
            done
            rm -f "$ck" ;;
        lbm-cylinder)
            for size in 881x166 1761x330; do
                for u in 0.05 0.025; do
                    $bin lbm cylinder --size $size --u $u --json "$OUT/lbm-cylinder-$size-u$u.json" 2>&1 \
                        | tee "$OUT/lbm-cylinder-$size-u$u.txt"
                done
            done ;;
        *) echo "session.sh: unknown stage $stage" >&2; exit 2 ;;
    esac
    pack
done
