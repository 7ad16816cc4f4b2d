#!/usr/bin/env python3
"""What a SPIR-V module asks of the driver, counted by kind of instruction: for setting the module Taichi hands
lavapipe beside the one naga writes for bespoke's kernel (issue 21). Python's standard library only.

Usage: spirv_stats.py FILE.spv...      (naga writes bespoke's: `naga kernel.wgsl kernel.spv`;
                                        Taichi's: `benches/peers/taichi_lbm.py --dump-spirv DIR`)

Prints one column per module: instruction counts by group, the capabilities and the memory model, the storage
classes of its variables and the decorations that tell the driver about aliasing and access.
"""
import struct
import sys

MAGIC = 0x07230203

GROUPS = {
    "load": {61},
    "store": {62},
    "access chain": {65, 66, 67, 68},  # OpAccessChain, InBounds, Ptr, InBoundsPtr
    "float arith": {127, 129, 131, 133, 136, 141},  # FNegate FAdd FSub FMul FDiv FMod
    "int arith": {126, 128, 130, 132, 134, 135, 137, 138, 139},  # SNegate IAdd ISub IMul UDiv SDiv UMod SRem SMod
    "bit/shift": {194, 195, 196, 197, 198, 199, 200},
    "convert/bitcast": set(range(109, 125)),
    "compare": set(range(164, 192)) - {169},
    "select": {169},
    "ext inst (GLSL.std.450)": {12},
    "phi": {245},
    "branch": {249, 250, 251},  # Branch BranchConditional Switch
    "block (label)": {248},
    "loop": {246},
    "function call": {57},
    "barrier": {224, 225},
    "atomic": set(range(227, 243)),
}
STORAGE = {0: "UniformConstant", 1: "Input", 2: "Uniform", 3: "Output", 4: "Workgroup", 5: "CrossWorkgroup",
           6: "Private", 7: "Function", 9: "PushConstant", 12: "StorageBuffer", 5349: "PhysicalStorageBuffer"}
DECOR = {19: "Restrict", 20: "Aliased", 24: "NonWritable", 25: "NonReadable", 21: "Volatile", 22: "Constant",
         23: "Coherent", 2: "Block", 3: "BufferBlock", 6: "ArrayStride", 35: "Offset"}
ADDRESSING = {0: "Logical", 1: "Physical32", 2: "Physical64", 5348: "PhysicalStorageBuffer64"}
MEMORY = {0: "Simple", 1: "GLSL450", 2: "OpenCL", 3: "Vulkan"}


def stats(path):
    data = open(path, "rb").read()
    if len(data) < 20 or len(data) % 4:
        raise SystemExit(f"{path}: not a SPIR-V module ({len(data)} bytes)")
    words = struct.unpack(f"<{len(data) // 4}I", data)
    if words[0] != MAGIC:
        raise SystemExit(f"{path}: no SPIR-V magic number")
    counts = {g: 0 for g in GROUPS}
    total = 0
    caps, storage, decor = set(), {}, {}
    model = "?"
    pos = 5
    while pos < len(words):
        n, op = words[pos] >> 16, words[pos] & 0xFFFF
        if n == 0 or pos + n > len(words):
            raise SystemExit(f"{path}: malformed instruction at word {pos}")
        args = words[pos + 1:pos + n]
        total += 1
        for g, ops in GROUPS.items():
            if op in ops:
                counts[g] += 1
        if op == 17:
            caps.add(args[0])
        elif op == 14:
            model = f"{ADDRESSING.get(args[0], args[0])}/{MEMORY.get(args[1], args[1])}"
        elif op == 59:  # OpVariable: result type, id, storage class
            sc = STORAGE.get(args[2], str(args[2]))
            storage[sc] = storage.get(sc, 0) + 1
        elif op in (71, 72):  # OpDecorate, OpMemberDecorate
            d = args[1] if op == 71 else args[2]
            if d in DECOR:
                decor[DECOR[d]] = decor.get(DECOR[d], 0) + 1
        pos += n
    return total, counts, sorted(caps), model, storage, decor


def main():
    files = sys.argv[1:]
    if not files:
        raise SystemExit(__doc__)
    rows = [stats(f) for f in files]
    names = [f.rsplit("/", 1)[-1] for f in files]
    print("| | " + " | ".join(names) + " |")
    print("|---" * (len(files) + 1) + "|")
    print("| instructions | " + " | ".join(str(r[0]) for r in rows) + " |")
    for g in GROUPS:
        print(f"| {g} | " + " | ".join(str(r[1][g]) for r in rows) + " |")
    print("| memory model | " + " | ".join(r[3] for r in rows) + " |")
    print("| capabilities | " + " | ".join(",".join(map(str, r[2])) for r in rows) + " |")
    print("| variables | " + " | ".join(", ".join(f"{k} {v}" for k, v in sorted(r[4].items())) for r in rows) + " |")
    print("| decorations | " + " | ".join(", ".join(f"{k} {v}" for k, v in sorted(r[5].items())) for r in rows)
          + " |")


if __name__ == "__main__":
    main()
