#!/usr/bin/env python3
"""Re-encode gmsh meshes so that one mesh exists in all four .msh variants the reader accepts.

gmsh wrote sphere_h0.2_v2.2.msh (2.2 ASCII) and sphere_h0.2_v4.1_bin.msh (4.1 binary) from the same
geometry. This script changes only the encoding, never the content:
  2.2 ASCII  -> sphere_h0.2_v2.2_bin.msh  (2.2 binary: nodes as int + 3 doubles, elements in typed blocks)
  4.1 binary -> sphere_h0.2_v4.1.msh      (4.1 ASCII: same entities, blocks and tags; doubles with repr())
so the test that all four variants give the same adjacency exercises every reader path in CI. Formats: gmsh
reference manual, section "MSH file format" (4.1) and "Legacy formats" (2.2). Run from this folder:
    python3 msh_variants.py
"""

import struct
import sys

# Nodes per element type (gmsh numbering): the linear elements gmsh writes for tetrahedral meshes.
NODES = {1: 2, 2: 3, 3: 4, 4: 4, 5: 8, 6: 6, 7: 5, 15: 1}


def sections(text):
    """Maps section name -> list of lines between $Name and $EndName (ASCII files)."""
    out, name, body = {}, None, []
    for line in text.splitlines():
        if line.startswith("$End"):
            out[name] = body
            name, body = None, []
        elif line.startswith("$"):
            name = line[1:]
        elif name is not None:
            body.append(line)
    return out


def ascii22_to_binary22(src, dst):
    s = sections(open(src).read())
    assert s["MeshFormat"][0].split()[:2] == ["2.2", "0"], "expected 2.2 ASCII"
    out = bytearray(b"$MeshFormat\n2.2 1 8\n" + struct.pack("<i", 1) + b"\n$EndMeshFormat\n")
    if "PhysicalNames" in s:
        out += ("$PhysicalNames\n" + "\n".join(s["PhysicalNames"]) + "\n$EndPhysicalNames\n").encode()
    nodes = s["Nodes"]
    n = int(nodes[0])
    out += b"$Nodes\n%d\n" % n
    for line in nodes[1 : 1 + n]:
        f = line.split()
        out += struct.pack("<i3d", int(f[0]), *map(float, f[1:4]))
    out += b"\n$EndNodes\n"
    elems = s["Elements"]
    m = int(elems[0])
    out += b"$Elements\n%d\n" % m
    # Consecutive elements of one type and tag count form a block: header (type, count, tags) then records.
    rows = [list(map(int, line.split())) for line in elems[1 : 1 + m]]
    i = 0
    while i < m:
        etype, ntags = rows[i][1], rows[i][2]
        j = i
        while j < m and rows[j][1] == etype and rows[j][2] == ntags:
            j += 1
        out += struct.pack("<3i", etype, j - i, ntags)
        for r in rows[i:j]:
            assert len(r) == 3 + ntags + NODES[etype], f"element {r[0]} has the wrong length"
            out += struct.pack("<%di" % (1 + ntags + NODES[etype]), r[0], *r[3:])
        i = j
    out += b"\n$EndElements\n"
    open(dst, "wb").write(out)


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def line(self):
        end = self.data.index(b"\n", self.pos)
        text = self.data[self.pos : end].decode()
        self.pos = end + 1
        return text

    def take(self, fmt):
        vals = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return vals


def num(v):
    return repr(v) if isinstance(v, float) else str(v)


def binary41_to_ascii41(src, dst):
    r = Reader(open(src, "rb").read())
    out = []
    while r.pos < len(r.data):
        head = r.line()
        if not head.startswith("$"):
            continue
        name = head[1:]
        if name == "MeshFormat":
            version, binary, size = r.line().split()
            assert (version, binary, size) == ("4.1", "1", "8"), "expected 4.1 binary with 8-byte size_t"
            assert r.take("i") == (1,), "expected little-endian"
            r.line()
            out += ["$MeshFormat", "4.1 0 8"]
        elif name == "PhysicalNames":
            count = int(r.line())
            out += ["$PhysicalNames", str(count)] + [r.line() for _ in range(count)]
        elif name == "Entities":
            counts = r.take("4Q")
            out += ["$Entities", " ".join(map(str, counts))]
            for dim, count in enumerate(counts):
                for _ in range(count):
                    tag = r.take("i")
                    box = r.take("3d" if dim == 0 else "6d")
                    (nphys,) = r.take("Q")
                    phys = r.take("%di" % nphys)
                    f = [*tag, *box, nphys, *phys]
                    if dim > 0:
                        (nb,) = r.take("Q")
                        f += [nb, *r.take("%di" % nb)]
                    out.append(" ".join(map(num, f)))
            r.line()
        elif name == "Nodes":
            blocks, total, lo, hi = r.take("4Q")
            out += ["$Nodes", f"{blocks} {total} {lo} {hi}"]
            for _ in range(blocks):
                dim, tag, parametric = r.take("3i")
                (count,) = r.take("Q")
                assert parametric == 0, "parametric nodes are not re-encoded"
                out.append(f"{dim} {tag} {parametric} {count}")
                out += [str(t) for t in r.take("%dQ" % count)]
                xyz = r.take("%dd" % (3 * count))
                out += [" ".join(map(repr, xyz[3 * i : 3 * i + 3])) for i in range(count)]
            r.line()
        elif name == "Elements":
            blocks, total, lo, hi = r.take("4Q")
            out += ["$Elements", f"{blocks} {total} {lo} {hi}"]
            for _ in range(blocks):
                dim, tag, etype = r.take("3i")
                (count,) = r.take("Q")
                out.append(f"{dim} {tag} {etype} {count}")
                width = 1 + NODES[etype]
                vals = r.take("%dQ" % (width * count))
                out += [" ".join(map(str, vals[width * i : width * (i + 1)])) for i in range(count)]
            r.line()
        else:
            sys.exit(f"section ${name} is not re-encoded")
        end = r.line()
        assert end == "$End" + name, f"expected $End{name}, found {end!r}"
        out.append(end)
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    ascii22_to_binary22("sphere_h0.2_v2.2.msh", "sphere_h0.2_v2.2_bin.msh")
    binary41_to_ascii41("sphere_h0.2_v4.1_bin.msh", "sphere_h0.2_v4.1.msh")
