#!/usr/bin/env bash
# Every file bespoke writes for ParaView is read by VTK's own readers (tests/vtk/check.py): a `.pvti` series of a
# cylinder on 2x2 thread ranks, the same run as `.vti` and legacy `.vtk`, and FV's `.vtu` and its series (`.pvd`). Our tests read the
# files back with our own reader; this is the check that ParaView would open them. It needs Python's `vtk`
# package: installed with pip where it is missing; where that fails, it says so and passes (no VTK, no check).
set -euo pipefail
bin="$(realpath "${1:-target/debug/bespoke}")"
here="$(cd "$(dirname "$0")" && pwd)"
# Where the system's Python lacks them, vtk and numpy go into a folder of their own (`pip --target`: nothing of
# the system's is changed, and a Python that refuses system-wide installs allows it).
if ! python3 -c 'import vtk, numpy' 2>/dev/null; then
    py="${BESPOKE_VTK_PYTHONPATH:-${TMPDIR:-/tmp}/bespoke-vtk-python}"
    export PYTHONPATH="$py${PYTHONPATH:+:$PYTHONPATH}"
    if ! python3 -c 'import vtk, numpy' 2>/dev/null; then
        timeout 600 python3 -m pip install -q --target "$py" vtk numpy >/dev/null 2>&1 || true
    fi
    if ! python3 -c 'import vtk, numpy' 2>/dev/null; then
        echo "SKIPPED: Python's vtk package is not here and could not be installed; the files were not read by VTK"
        exit 0
    fi
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export BESPOKE_SKIP_WARM_UP=1
nx=160 ny=40 cubes=6
"$bin" lbm cylinder --size ${nx}x${ny} --steps 60 --ranks 2x2 --vtk flow.pvti --vtk-every 20 > run.txt
"$bin" lbm cylinder --size ${nx}x${ny} --steps 60 --vtk one.vti >> run.txt
"$bin" lbm cylinder --size ${nx}x${ny} --steps 60 --vtk legacy.vtk >> run.txt
"$bin" fv run --box $cubes --steps 3 --vtu mesh.vtu --vtu-every 1 >> run.txt
python3 "$here/check.py" $nx $ny $cubes
