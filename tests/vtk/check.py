"""VTK's own readers (ParaView's) read every file bespoke writes, and hold what our reader holds.

Run by check.sh in a folder of files the CLI wrote: the same cylinder on 2x2 thread ranks as a `.pvti` series
(`flow.pvti`, frames and `flow.pvd`), on one domain as `.vti` and as legacy `.vtk`, and FV's `.vtu` of a box of
n^3 cubes with its series (`mesh.pvd`, a frame a step). Fails (exit 1) naming what differs.
"""
import sys
import xml.etree.ElementTree as ET

import numpy as np
import vtk
from vtk.util.numpy_support import vtk_to_numpy

nx, ny, cubes = (int(a) for a in sys.argv[1:4])

# VTK reports a reader's errors and warnings (a malformed file, an array it cannot read) to its output window, not
# through the reader's error code: collected here, and any is a failure.
log = vtk.vtkStringOutputWindow()
vtk.vtkOutputWindow.SetInstance(log)


def read(reader_cls, path):
    r = reader_cls()
    r.SetFileName(path)
    r.Update()
    said = log.GetOutput()
    if r.GetErrorCode() != 0 or said:
        sys.exit(f"FAILED: {path}: VTK's reader says: {said or r.GetErrorCode()}")
    return r.GetOutput()


def arrays(data):
    return {data.GetArrayName(i): vtk_to_numpy(data.GetArray(i)) for i in range(data.GetNumberOfArrays())}


def check(ok, what):
    if not ok:
        sys.exit(f"FAILED: {what}")
    print(f"ok: {what}")


fields = ["rho", "velocity", "vorticity", "cell_type"]
par = read(vtk.vtkXMLPImageDataReader, "flow.pvti")
one = read(vtk.vtkXMLImageDataReader, "one.vti")
check(par.GetExtent() == (0, nx, 0, ny, 0, 0), f"flow.pvti's whole extent {par.GetExtent()} is the {nx}x{ny} domain's cells")
check(one.GetExtent() == par.GetExtent(), "one.vti has the same extent")
check(one.GetOrigin() == (-0.5, -0.5, 0.0) and one.GetSpacing() == (1.0, 1.0, 1.0), "cell centres at integer coordinates")
a, b = arrays(par.GetCellData()), arrays(one.GetCellData())
check(sorted(a) == sorted(fields) and sorted(b) == sorted(fields), f"cell data {sorted(a)}")
for k in fields:
    same = a[k].shape == b[k].shape and np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8))
    check(same, f"{k} {a[k].shape} {a[k].dtype}: the 2x2 ranks' pieces, read by VTK, are the one domain's bit for bit")
    check(bool(np.all(np.isfinite(a[k].astype(float)))), f"{k} finite")
check({0, 1, 2, 3} <= set(a["cell_type"].tolist()), "fluid, solid, inlet and outlet cells present")

legacy = vtk.vtkStructuredPointsReader()
legacy.SetFileName("legacy.vtk")
legacy.ReadAllScalarsOn()
legacy.ReadAllVectorsOn()
legacy.Update()
lo = legacy.GetOutput()
check(not log.GetOutput(), f"legacy.vtk read without a word from VTK: {log.GetOutput()}")
c = arrays(lo.GetPointData())
check(lo.GetDimensions() == (nx, ny, 1), f"legacy.vtk: {lo.GetDimensions()} points, one a cell")
for k in fields:
    check(k in c and np.array_equal(c[k].astype(float), b[k].astype(float)), f"legacy.vtk's {k} is the .vti's")

ug = read(vtk.vtkXMLUnstructuredGridReader, "mesh.vtu")
tets = 6 * cubes**3
types = {ug.GetCellType(i) for i in range(ug.GetNumberOfCells())}
check(ug.GetNumberOfCells() == tets and types == {vtk.VTK_TETRA}, f"mesh.vtu: {ug.GetNumberOfCells()} tetrahedra")
u = arrays(ug.GetCellData())
check(sorted(u) == ["physical", "x", "x0"], f"mesh.vtu cell data {sorted(u)}")
check(all(np.all(np.isfinite(v.astype(float))) for v in u.values()), "mesh.vtu's fields finite")
quality = vtk.vtkMeshQuality()
quality.SetInputData(ug)
quality.SetTetQualityMeasureToVolume()
quality.Update()
volume = vtk_to_numpy(quality.GetOutput().GetCellData().GetArray("Quality"))
check(volume.min() > 0 and abs(volume.sum() - 1.0) < 1e-9, f"every tet's volume positive, {volume.sum():.12f} in all (the unit box)")

frames = ET.parse("flow.pvd").getroot().find("Collection").findall("DataSet")
steps = [float(f.get("timestep")) for f in frames]
check(len(steps) >= 2 and steps == sorted(steps), f"flow.pvd lists {len(steps)} frames in step order")
for f in frames:
    frame = read(vtk.vtkXMLPImageDataReader, f.get("file"))
    check(frame.GetNumberOfCells() == nx * ny, f"{f.get('file')} read whole")
last = arrays(read(vtk.vtkXMLPImageDataReader, frames[-1].get("file")).GetCellData())
check(np.array_equal(last["rho"].view(np.uint8), a["rho"].view(np.uint8)), "the last frame is the final state")

series = ET.parse("mesh.pvd").getroot().find("Collection").findall("DataSet")
check([float(f.get("timestep")) for f in series] == [1.0, 2.0, 3.0], f"mesh.pvd lists {len(series)} FV frames in step order")
for f in series:
    check(read(vtk.vtkXMLUnstructuredGridReader, f.get("file")).GetNumberOfCells() == tets, f"{f.get('file')} read whole")
last = arrays(read(vtk.vtkXMLUnstructuredGridReader, series[-1].get("file")).GetCellData())
check(np.array_equal(last["x"].view(np.uint8), u["x"].view(np.uint8)), "the FV series' last frame is the final state")
print(f"every file read by VTK {vtk.vtkVersion.GetVTKVersion()}")
