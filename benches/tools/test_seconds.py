#!/usr/bin/env python3
"""Rewrites benches/gpu/test-seconds.tsv from a GPU run's tests/summary.txt (session.sh's tests stage): each test
binary's "finished in" seconds, by its name without cargo's hash (the larger where two binaries share a name),
longest first, the file's comment kept. Binaries the run did not finish keep their old figure.

    python3 benches/tools/test_seconds.py OUT/tests/summary.txt [benches/gpu/test-seconds.tsv]
"""
import re
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    summary = sys.argv[1]
    table = sys.argv[2] if len(sys.argv) == 3 else "benches/gpu/test-seconds.tsv"
    comment, seconds = [], {}
    with open(table) as f:
        for line in f:
            if line.startswith("#"):
                comment.append(line)
            elif line.strip():
                name, secs = line.rstrip("\n").split("\t")
                seconds[name] = float(secs)
    measured = {}
    with open(summary) as f:
        for line in f:
            if line.startswith("-- in list order"):
                break
            m = re.match(r"^(\S+)\s+rc\s+\d+\s+test result: .*finished in ([0-9.]+)s", line)
            if m:
                name = re.sub(r"-[0-9a-f]+$", "", m.group(1))
                measured[name] = max(measured.get(name, 0.0), float(m.group(2)))
    if not measured:
        sys.exit(f"{summary}: no finished test binary in it")
    seconds.update(measured)
    with open(table, "w") as f:
        f.writelines(comment)
        for name, secs in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"{name}\t{secs:g}\n")
    print(f"{table}: {len(measured)} binaries measured, {len(seconds)} listed")


if __name__ == "__main__":
    main()
