#!/usr/bin/env bash
# The distributed lattice under real MPI (Open MPI through rsmpi): every run on 2, 3 and 4 ranks must write the
# same checkpoint bytes as the single-domain run, and bad launches must end with a clear error, never a hang.
# Needs: libopenmpi-dev openmpi-bin libclang-dev (CI installs them), a Vulkan driver.
# Usage: tests/mpi/check.sh   (builds target/release/bespoke with --features mpi)
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader   # one machine: shared memory, no network probing
# Each rank one lavapipe thread, so ranks do not fight over the two cores.
export LP_NUM_THREADS=1 XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"

cargo build --release --features mpi --quiet
bin=target/release/bespoke
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }

same_as_one_rank() {
    local name=$1; shift
    "$bin" "$@" --checkpoint "$work/$name-1.ckpt" > "$work/$name-1.out"
    for np in 2 3 4; do
        if timeout 300 mpirun -np "$np" "$bin" "$@" --checkpoint "$work/$name-$np.ckpt" > "$work/$name-$np.out" 2>&1 \
            && cmp -s "$work/$name-1.ckpt" "$work/$name-$np.ckpt" \
            && grep -q "ranks $np (.*mpi" "$work/$name-$np.out"; then
            ok "$name on $np MPI ranks is bitwise the one-domain run"
        else
            bad "$name on $np MPI ranks"; cat "$work/$name-$np.out"
        fi
    done
}

same_as_one_rank cavity-f32-ab lbm cavity --re 100 --size 48x48 --steps 61
same_as_one_rank cavity-f16-inplace lbm cavity --re 100 --size 48x48 --steps 61 --storage f16 --streaming inplace
same_as_one_rank cylinder lbm cylinder --steps 40 --collision bgk
# Finite volume: METIS parts on rank 0, which alone reads the mesh and sends each rank its part and its values;
# ghost layers; the VTU (x at full precision) and the mass must match the single-domain run (its zero-flux shift
# is an exact sum, the same bits in any order).
"$bin" fv run --box 10 --steps 40 --vtu "$work/fv-1.vtu" > "$work/fv-1.out"
for np in 2 3 4; do
    if timeout 300 mpirun -np "$np" "$bin" fv run --box 10 --steps 40 --vtu "$work/fv-$np.vtu" > "$work/fv-$np.out" 2>&1 \
        && cmp -s "$work/fv-1.vtu" "$work/fv-$np.vtu" && grep -q "ranks $np (mpi" "$work/fv-$np.out"; then
        ok "fv on $np MPI ranks is bitwise the single-domain run"
    else
        bad "fv on $np MPI ranks"; cat "$work/fv-$np.out"
    fi
done
# FV checkpoints: rank 0 gathers the stored state and writes it; resumed on 3 MPI ranks the run ends with the
# single-domain run's bits.
if timeout 300 mpirun -np 2 "$bin" fv run --box 10 --steps 17 --checkpoint "$work/fv.ck" > "$work/fvck.out" 2>&1 \
    && timeout 300 mpirun -np 3 "$bin" fv run --box 10 --steps 40 --resume "$work/fv.ck" --vtu "$work/fv-r.vtu" \
        >> "$work/fvck.out" 2>&1 \
    && cmp -s "$work/fv-1.vtu" "$work/fv-r.vtu" && grep -q "resumed at step 17" "$work/fvck.out"; then
    ok "fv checkpointed on 2 MPI ranks and resumed on 3 is bitwise the single-domain run"
else
    bad "fv checkpoint across MPI ranks"; cat "$work/fvck.out"
fi
for f in crates/fv/data/sphere_h0.2_v4.1_bin.msh crates/fv/data/sphere_h0.2_v2.2.msh; do
    "$bin" fv run "$f" --steps 30 --dirichlet 0.5 --vtu "$work/s-1.vtu" > /dev/null
    if timeout 300 mpirun -np 3 "$bin" fv run "$f" --steps 30 --dirichlet 0.5 --vtu "$work/s-3.vtu" > "$work/s.out" 2>&1 \
        && cmp -s "$work/s-1.vtu" "$work/s-3.vtu"; then
        ok "fv $(basename "$f") (Dirichlet) on 3 MPI ranks"
    else
        bad "fv $(basename "$f") on 3 MPI ranks"; cat "$work/s.out"
    fi
done

# The scaling protocol's FV setups under MPI: rank 0 alone makes each coupled box and sends the parts.
if timeout 300 mpirun -np 2 "$bin" scale --code fv --cubes 8 --steps 2 --rounds 1 > "$work/scale.out" 2>&1 \
    && grep -q "weak, 2 ranks" "$work/scale.out" && grep -q "strong, 2 ranks" "$work/scale.out"; then
    ok "fv scaling on 2 MPI ranks"
else
    bad "fv scaling on 2 MPI ranks"; cat "$work/scale.out"
fi

# Each rank's GPU is chosen by its rank among the ranks on its machine (MPI_Comm_split_type shared), not by its
# job rank: what the phase log says each rank took.
if BESPOKE_PHASE_TIMES=1 timeout 300 mpirun -np 3 "$bin" lbm cavity --re 100 --size 48x48 --steps 5 \
        > "$work/node.out" 2>&1 \
    && grep -q "rank 0: rank 0 of 3 on its machine, adapter " "$work/node.out" \
    && grep -q "rank 1: rank 1 of 3 on its machine, adapter " "$work/node.out" \
    && grep -q "rank 2: rank 2 of 3 on its machine, adapter " "$work/node.out"; then
    ok "3 MPI ranks on one machine are its ranks 0, 1 and 2"
else
    bad "node ranks under MPI"; cat "$work/node.out"
fi

# Blocks along both axes, no overlap.
if timeout 300 mpirun -np 4 "$bin" lbm cavity --re 100 --size 48x48 --steps 61 --ranks 2x2 --no-overlap \
    --checkpoint "$work/grid.ckpt" > "$work/grid.out" 2>&1 && cmp -s "$work/cavity-f32-ab-1.ckpt" "$work/grid.ckpt"; then
    ok "2x2 blocks without overlap"
else
    bad "2x2 blocks without overlap"; cat "$work/grid.out"
fi

# A parallel VTK image (each rank its own piece; the vorticity at a block's edge from its neighbours' lines, point
# to point): the same piece files as thread ranks of the same blocks write (two ranks: the left and right
# neighbour are one rank, two messages to it).
for run in 2:2 2x2:4; do
    grid=${run%:*} np=${run#*:}
    "$bin" lbm cavity --re 100 --size 48x48 --steps 31 --ranks "$grid" --vtk "$work/t$np.pvti" > /dev/null
    same=1
    if timeout 300 mpirun -np "$np" "$bin" lbm cavity --re 100 --size 48x48 --steps 31 --ranks "$grid" \
        --vtk "$work/m$np.pvti" > "$work/vtk.out" 2>&1; then
        for r in $(seq 0 $((np - 1))); do
            cmp -s "$work/t${np}_p$r.vti" "$work/m${np}_p$r.vti" || same=0
        done
        diff -q <(sed "s/t${np}_p/X_p/" "$work/t$np.pvti") <(sed "s/m${np}_p/X_p/" "$work/m$np.pvti") > /dev/null || same=0
    else
        same=0
    fi
    if [ "$same" = 1 ]; then
        ok "a .pvti on $np MPI ranks ($grid) has the thread ranks' pieces, byte for byte"
    else
        bad "a .pvti on $np MPI ranks ($grid)"; cat "$work/vtk.out"
    fi
done

# Expected failures: a non-zero exit with the message, well inside the timeout.
expect_error() {
    local what=$1 want=$2; shift 2
    local rc=0
    timeout 120 "$@" > "$work/err.out" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q -- "$want" "$work/err.out"; then
        ok "$what: rc $rc, says '$want'"
    else
        bad "$what: rc $rc (124 is a hang)"; cat "$work/err.out"
    fi
}
expect_error "--ranks that does not match -np" "asks for 3 ranks but mpirun started 2" \
    mpirun -np 2 "$bin" lbm cavity --size 32x32 --steps 10 --ranks 3
expect_error "more ranks than the lattice can be cut into" "more ranks than the lattice can be cut into" \
    mpirun -np 4 "$bin" lbm cavity --size 6x6 --steps 10
expect_error "more ranks than tets" "more ranks than the mesh has tets (6)" \
    mpirun -np 7 "$bin" fv run --box 1 --steps 5
# Only rank 0 reads the mesh: when it cannot, the job ends with its message, not with ranks waiting for it.
expect_error "a mesh rank 0 cannot read" "nonexistent" \
    mpirun -np 3 "$bin" fv run /nonexistent/mesh.msh --steps 5
# Only rank 0 reads a checkpoint to resume: a damaged one ends the job with its message.
head -c 300 "$work/fv.ck" > "$work/fv-short.ck"
expect_error "an FV checkpoint rank 0 finds truncated" "truncated" \
    mpirun -np 3 "$bin" fv run --box 10 --steps 40 --resume "$work/fv-short.ck"
expect_error "ranks given different arguments" "disagree on the command line" \
    mpirun -np 1 "$bin" lbm cavity --size 32x32 --steps 10 : -np 1 "$bin" lbm cavity --size 32x32 --steps 20
# The checkpoint path is a folder: refused before the first step, on every rank (until 2026-11-26 it passed the
# early checks and only rank 0's write at the end failed, after the whole run).
mkdir -p "$work/a-folder"
expect_error "a checkpoint path that is a folder is refused at the start, on every rank" "folder, not a file" \
    mpirun -np 2 "$bin" lbm cavity --size 32x32 --steps 10 --checkpoint "$work/a-folder"
expect_error "a checkpoint in a missing folder is refused at the start, on every rank" "does not exist" \
    mpirun -np 2 "$bin" lbm cavity --size 32x32 --steps 10 --checkpoint /nonexistent/dir/c.ckpt

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
