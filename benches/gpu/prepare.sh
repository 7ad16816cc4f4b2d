#!/usr/bin/env bash
# Packs what a GPU session needs into the git-ignored .gl/ and .devbin/ (run here, from the repository root):
# the release binary, every test binary (tests.tar.xz) and three examples (stripped, to stay inside the device
# tool's 64 MiB carry), the Vulkan loader packages
# (docs/gpu.md), GiMMiK 4.0 and Mako wheels for the peer script, and the PyFR suite given as an argument.
#   benches/gpu/prepare.sh PYFR_CORE_DIR
# Then run benches/gpu/session.sh STAGE... on the device with carry [".gl", ".devbin"].
set -euo pipefail
pyfr=${1:?usage: prepare.sh PYFR_CORE_DIR (the folder of PyFR .mtx operators)}
[ -d "$pyfr" ] || { echo "prepare.sh: $pyfr is not a folder" >&2; exit 1; }
cd "$(git rev-parse --show-toplevel)"
# A fresh clone may have no info/ folder.
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")" && touch "$exclude"
for d in /.gl/ /.devbin/; do grep -qxF "$d" "$exclude" || echo "$d" >> "$exclude"; done

cargo build --release
mkdir -p .devbin/pyfr .devbin/wheels
strip -o .devbin/bespoke target/release/bespoke
# Every test binary of the workspace, stripped, in one tar.xz with a list: binary, its package's folder relative
# to the repository root. Tests read data from the CARGO_MANIFEST_DIR they were built with: session.sh links
# that path (build-root.txt) to the carried tree.
rm -rf .devbin/tests && mkdir -p .devbin/tests
cargo test --release --workspace --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, os, sys
root = os.getcwd()
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"].get("test"):
        pkg = os.path.relpath(os.path.dirname(m["manifest_path"]), root)
        print(m["executable"], pkg)
' > .devbin/tests/list.raw
: > .devbin/tests/list.tsv
while read -r exe pkg; do
    name=$(basename "$exe")
    strip -o ".devbin/tests/$name" "$exe"
    printf '%s\t%s\n' "$name" "$pkg" >> .devbin/tests/list.tsv
done < .devbin/tests/list.raw
rm .devbin/tests/list.raw
pwd > .devbin/tests/build-root.txt
(cd .devbin && tar cJf tests.tar.xz tests && rm -rf tests)
echo "test binaries: $(tar tJf .devbin/tests.tar.xz | grep -vc '\.t[sx][vt]$\|/$') in $(du -h .devbin/tests.tar.xz | cut -f1)"
# The lbm diagnostics session.sh's lbm-examples stage runs (where the step's time goes; populations in textures).
cargo build --release -p bespoke-lbm --example step_cost --example texture_trial
# And the memory-pattern probe of session.sh's streams stage (the step's loads and stores with nothing else).
cargo build --release -p bespoke-gpu --example streams
for e in step_cost texture_trial streams; do strip -o ".devbin/$e" "target/release/examples/$e"; done
rm -rf .devbin/pyfr/core && cp -r "$pyfr" .devbin/pyfr/core
pip download -q --no-deps gimmik==4.0 mako -d .devbin/wheels

if [ -z "$(ls .gl/*.deb 2>/dev/null)" ]; then
    mkdir -p .gl /tmp/amd64/partial
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    (cd .gl && apt-get $o download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh .gl .devbin
