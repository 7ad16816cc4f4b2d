#!/usr/bin/env bash
# Checks benches/gpu/session.sh without a GPU (CI runs it): a GPU call is scarce, so a script that breaks must
# break here first. It runs the script in a scratch copy of its folder with a stand-in `.devbin/bespoke` that
# logs its arguments, and checks that stages run in order, that `fv-order` runs in the background and that a
# stage which orders the FV mesh waits for it, that SESSION_DEADLINE skips what no longer fits, that a failing
# stage does not stop the rest, and that the archive is made.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/benches/gpu" "$work/.devbin"
cp "$here/session.sh" "$work/benches/gpu/"
# The stand-in: `fv order` takes 2 s (so a later stage must wait for it), `info` 1 s, `bench --section lbm` fails.
cat > "$work/.devbin/bespoke" <<'EOF'
#!/usr/bin/env bash
echo "$(date +%s.%N) start $*" >> "$(dirname "$0")/calls.log"
echo "tuning ${BESPOKE_NO_TUNING:-on} $*" >> "$(dirname "$0")/env.log"
case "$1 ${3:-}" in
    "fv "*) sleep 2 ;;
    "info "*) sleep 1 ;;
    "bench lbm") exit 3 ;;
esac
echo "$(date +%s.%N) end $*" >> "$(dirname "$0")/calls.log"
EOF
chmod +x "$work/.devbin/bespoke"
fail() { echo "check_session: $*" >&2; echo "--- calls" >&2; cat "$work/.devbin/calls.log" >&2 || true; exit 1; }

cd "$work"
# A tuner's decision (small) and a METIS order and the driver's pipelines (not archived) in the cache.
mkdir -p .devbin/cache/fv-shape-v3 .devbin/cache/fv-metis-order-v1 .devbin/cache/driver-pipelines-v1
echo '{"shape": 1}' > .devbin/cache/fv-shape-v3/card-1.entry
head -c 300000 /dev/zero > .devbin/cache/fv-metis-order-v1/blocks.entry
echo pipelines > .devbin/cache/driver-pipelines-v1/p.entry
OUT=$work/out SESSION_DEADLINE=40 benches/gpu/session.sh fv-order info@20 bench-lbm@20 bench-fv@20 \
    > "$work/run1.txt" 2>&1 || fail "session.sh failed: $(cat "$work/run1.txt")"
stages=$work/out-work/stages.txt
grep -q '^== fv-order: in the background' "$stages" || fail "fv-order did not start in the background"
grep -q '^== fv-order waited for [0-9]* s before bench-fv' "$stages" || fail "bench-fv did not wait for fv-order"
grep -q '^== bench-lbm: rc [1-9]' "$stages" || fail "a failing stage's status was not recorded"
grep -q '^== bench-fv: rc 0' "$stages" || fail "the stage after a failing one did not run"
# fv order ran beside info (started before info ended), and ended before bench-fv started.
calls=$work/.devbin/calls.log
t() { grep " $1 $2" "$calls" | head -1 | cut -d' ' -f1 || true; }
order_start=$(t start "fv order") order_end=$(t end "fv order")
info_end=$(t end info) fv_start=$(t start "bench --section fv")
[ -n "$order_start" ] && [ -n "$info_end" ] && [ -n "$fv_start" ] || fail "a stage did not run"
[ -n "$order_end" ] || fail "fv order never ended (stopped when the session ended: nothing waited for it)"
awk -v a="$order_start" -v b="$info_end" 'BEGIN { exit !(a < b) }' || fail "fv order did not run beside info"
awk -v a="$order_end" -v b="$fv_start" 'BEGIN { exit !(a <= b) }' || fail "bench-fv started before fv order ended"
[ -s "$work/out/session-all.tar.gz" ] || fail "no archive"
# The listing to a file first: `tar … | grep -q` under pipefail fails whenever grep stops reading before tar ends
# writing (SIGPIPE), which a loaded machine makes happen.
tar tzf "$work/out/session-all.tar.gz" > "$work/archive.txt" || fail "the archive does not list"
grep -q 'fv-order.txt' "$work/archive.txt" || fail "fv-order's log is not in the archive"
grep -q 'cache/fv-shape-v3/card-1.entry' "$work/archive.txt" || fail "the tuners' decisions are not in the archive"
! grep -q 'blocks.entry\|p.entry' "$work/archive.txt" || fail "a METIS order or the driver's pipelines were archived"

# peers-compile: the peers' compiles (a stand-in peer script, 2 s a precision) in the background beside info, and
# a peers stage waits for them.
mkdir -p "$work/benches/peers" "$work/site/gimmik"
: > "$work/site/gimmik/__init__.py"
cat > "$work/benches/peers/gimmik_cublas.py" <<'EOF2'
import sys, time
log = open(".devbin/calls.log", "a")
print(f"{time.time()} start peer {' '.join(sys.argv[1:])}", file=log, flush=True)
if "--compile-only" in sys.argv:
    time.sleep(2)
print(f"{time.time()} end peer {' '.join(sys.argv[1:])}", file=log, flush=True)
EOF2
rm -rf "$work/out" "$work/out-work" "$calls"
OUT=$work/out PEER_SITE=$work/site benches/gpu/session.sh peers-compile info@20 peers9-f32@20 \
    > "$work/run-peers.txt" 2>&1 || fail "session.sh failed: $(cat "$work/run-peers.txt")"
grep -q '^== peers-compile: in the background' "$work/out-work/stages.txt" || fail "peers-compile did not start in the background"
grep -q '^== peers-compile waited for [0-9]* s before peers9-f32' "$work/out-work/stages.txt" \
    || fail "peers9-f32 did not wait for peers-compile"
for d in f32 f64; do
    grep -q " start peer tests/data/pyfr --n 1048576 --dtype $d --compile-only --compile-threads 4" "$calls" \
        || fail "peers-compile did not compile $d: $(cat "$work/out-work/peers-compile.txt")"
done
compile_start=$(t start "peer tests/data/pyfr --n 1048576 --dtype f32 --compile-only")
compile_end=$(t end "peer tests/data/pyfr --n 1048576 --dtype f64 --compile-only")
peers_start=$(grep ' start peer .*--json' "$calls" | head -1 | cut -d' ' -f1)
[ -n "$peers_start" ] || fail "peers9-f32 did not run the peer script"
awk -v a="$compile_start" -v b="$(t end info)" 'BEGIN { exit !(a < b) }' || fail "peers-compile did not run beside info"
awk -v a="$compile_end" -v b="$peers_start" 'BEGIN { exit !(a <= b) }' || fail "peers9-f32 started before the compiles ended"

# A deadline that leaves under 10 s after the first stage skips the next one.
rm -rf "$work/out" "$work/out-work" "$calls"
OUT=$work/out SESSION_DEADLINE=10 benches/gpu/session.sh info@5 bench-copy@20 > "$work/run2.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run2.txt")"
grep -q '^== bench-copy: skipped' "$work/out-work/stages.txt" || fail "a stage past the deadline was not skipped"
grep -q 'bench --section copy' "$calls" && fail "the skipped stage ran"
# mm-big: three `mm bench` calls on hex-p6-m132, each a group of variants with its own JSON, tuning unbounded.
rm -rf "$work/out" "$work/out-work" "$calls"
OUT=$work/out benches/gpu/session.sh mm-big-f64@20 > "$work/run-big.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run-big.txt")"
[ "$(grep -c 'start mm bench tests/data/pyfr/hex-p6-m132-dflt.mtx .*--dtype f64 --tune-budget inf --retune' "$calls")" = 3 ] \
    || fail "mm-big did not run three unbounded mm bench calls on hex-p6-m132"
for v in bstream-msplit-s4-a1024 bstream-msplit-s8-a4096-smem48 bstream-msplit-s4 bstream-msplit-s4-a4096 \
        cstream-ksplit-s4-a4096 rolled-r8-v4; do
    grep -q -- "--variants \([^ ]*,\)\?$v\(,[^ ]*\)\? " "$calls" || fail "mm-big did not time $v"
done
grep -q -- '--json [^ ]*/mm-big-f64-bstream-msplit-s4-a1024.json' "$calls" || fail "mm-big's JSON names"
# dense and dense-sweep: the sweeps screen the unrolled twins, and each named tiling runs in a loop and unrolled.
rm -rf "$work/out" "$work/out-work" "$calls"
OUT=$work/out benches/gpu/session.sh dense@20 dense-sweep@20 > "$work/run-dense.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run-dense.txt")"
[ "$(grep -c 'start mm dense-sweep .*--unrolled' "$calls")" = 3 ] || fail "the sweeps do not screen unrolled twins"
for p in t4x16v4-w32x16-k8-s1-b2 t8x8v4-w16x16-k8-s1-b2; do
    grep -q -- "--params $p --json" "$calls" && grep -q -- "--params $p-u --json" "$calls" \
        && grep -q -- "--params $p-r --json" "$calls" \
        || fail "dense did not time $p in a loop, unrolled and with its lanes in rows"
done
grep -q -- '--dtype f64 --params t16x4v4-w8x32-k8-s1-b2-u ' "$calls" || fail "dense did not time the f64 twin"
grep -q -- '--dtype f64 --params t16x4v4-w8x32-k8-s1-b2-r ' "$calls" || fail "dense did not time the f64 rows twin"
for a in stage-once fragments-once; do
    [ "$(grep -c -- "start mm dense-bench .* --params [^ ]* --ablate $a --json" "$calls")" = 3 ] \
        || fail "dense did not time the $a ablation"
done
# The tests stage: binaries TEST_JOBS at a time, cli_ranks alone after them, a binary that would outlive the
# stage stopped by its own limit first, the summary in list order. The stand-in test binaries sleep (1 s, t5 2 s,
# the `slow` one 30 s) and log when they start (with their arguments) and end.
rm -rf "$work/out" "$work/out-work" "$calls"
mkdir -p "$work/tb/tests" "$work/crates/a"
: > "$work/tb/tests/list.tsv"
for name in t1 t2 t3 t4 t5 cli_ranks-x slow; do
    secs=1
    [ "$name" = t5 ] && secs=2
    [ "$name" = slow ] && secs=30
    printf '#!/usr/bin/env bash\necho "$(date +%%s.%%N) start %s $PWD $*" >> "%s/tests.log"\necho "%s tuning ${BESPOKE_NO_TUNING:-on}" >> "%s/tests-env.log"\nsleep %s\necho "$(date +%%s.%%N) end %s" >> "%s/tests.log"\necho "test result: ok. 1 passed; 0 failed"\n' \
        "$name" "$work" "$name" "$work" "$secs" "$name" "$work" > "$work/tb/tests/$name"
    chmod +x "$work/tb/tests/$name"
    printf '%s\t%s\n' "$name" "crates/a" >> "$work/tb/tests/list.tsv"
done
echo "$work" > "$work/tb/tests/build-root.txt"
(cd "$work/tb" && tar cJf "$work/.devbin/tests.tar.xz" tests)
# The stage starts the longest expected first (TEST_SECONDS): `slow` (30 s), listed last, then t5 (25 s), then t1..t4 (unlisted: 20 s).
printf '# stand-in\nslow\t30\nt5\t25\n' > "$work/test-seconds.tsv"
OUT=$work/out TEST_TIMEOUT=4 TEST_SECONDS=$work/test-seconds.tsv benches/gpu/session.sh tests@30 > "$work/run3.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run3.txt")"
summary=$work/out-work/tests/summary.txt
grep -q '^slow .*rc 124' "$summary" || fail "the slow binary was not stopped by TEST_TIMEOUT: $(cat "$summary")"
listed=$(sed -n '/^-- in list order/,$p' "$summary" | awk 'NR > 1 { print $1 }' | tr '\n' ' ')
[ "$listed" = "t1 t2 t3 t4 t5 cli_ranks-x slow " ] || fail "summary not in list order: $listed"
grep -q "start t1 $work/crates/a" "$work/tests.log" || fail "a test did not run in its package's folder"
# The tests that open no device are CI's: on a GPU they are skipped.
grep -q "start t1 $work/crates/a --test-threads 4 --skip _without_a_device\$" "$work/tests.log" \
    || fail "the device-free tests were not skipped: $(grep 'start t1 ' "$work/tests.log")"
ts() { grep " $1 $2\( \|$\)" "$work/tests.log" | head -1 | cut -d' ' -f1 || true; }
before() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a <= b) }'; }
# Longest expected first: slow and t5 among the first four (in list order they would be the last two), t3 and
# t4 after them. Four at once: t2 started before t1 ended, t3 only after one of the first four ended.
for t in slow t5; do
    before "$(ts start $t)" "$(ts start t3)" \
        || fail "the binaries did not start longest first: $(grep start "$work/tests.log" | tr '\n' ';')"
done
before "$(ts start t2)" "$(ts end t1)" || fail "the binaries did not run at once"
first_end=$(grep ' end t[125]$' "$work/tests.log" | head -1 | cut -d' ' -f1)
before "$first_end" "$(ts start t3)" || fail "more than 4 binaries at once"
# cli_ranks alone, after every other binary ended (the slow one stopped by its limit).
for t in t1 t2 t3 t4 t5; do
    before "$(ts end $t)" "$(ts start cli_ranks-x)" || fail "cli_ranks started before $t ended"
done
# The test binaries run with the library's tuners off (docs/gpu.md, "Tuning off").
grep -q '^t1 tuning 1$' "$work/tests-env.log" || fail "the tests ran with tuning on: $(cat "$work/tests-env.log")"
# A binary whose limit would pass the stage's is given what the stage has left (less a margin), so it ends
# before the stage's own timeout, which would stop the stage's shell and leave the binary running.
rm -rf "$work/out" "$work/out-work"
start=$(date +%s)
OUT=$work/out TEST_ONLY='^slow$' TEST_TIMEOUT=100 benches/gpu/session.sh tests@14 > "$work/run4.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run4.txt")"
took=$(($(date +%s) - start))
[ "$took" -lt 14 ] || fail "the tests stage ran into its own limit (${took} s): a binary outlived it"
grep -q '^slow .*rc 124' "$work/out-work/tests/summary.txt" \
    || fail "the slow binary was not cut at the stage's end: $(cat "$work/run4.txt")"
# A tests stage run in the script's own shell (no @) leaves its settings behind it: the next stage tunes.
rm -rf "$work/out" "$work/out-work" "$work/.devbin/env.log"
OUT=$work/out TEST_ONLY='^t1$' benches/gpu/session.sh tests info > "$work/run5.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run5.txt")"
grep -q '^tuning on info' "$work/.devbin/env.log" \
    || fail "a stage after tests ran with its settings: $(cat "$work/.devbin/env.log" 2> /dev/null)"
# Every stage docs/gpu.md plans (its `session.sh …` commands and the later stages it lists) and every `bespoke`
# stage of session.sh is one it knows, and every `bespoke` command those stages run parses with the real CLI
# (`BESPOKE_ARGS_ONLY=1`: parsed, bench sections checked, nothing run): a renamed or refused argument (a count
# of 0, a tiling key, a variant or section name) fails here, not on a lent GPU.
repo=$(cd "$here/../.." && pwd)
real=${BESPOKE_BIN:-}
if [ -z "$real" ]; then
    (cd "$repo" && cargo build -q --bin bespoke) || fail "could not build bespoke to check the session's arguments"
    real=$repo/target/debug/bespoke
fi
planned=$(grep -o '`[^`]*session\.sh [^`]*`' "$repo/docs/gpu.md" | sed 's/^.*session\.sh //; s/`$//' | tr ' ' '\n' \
    | grep -v '^STAGE' || true)
later=$(sed -n '/^\*\*Next session\*\*/,/^## /p' "$repo/docs/gpu.md" | grep -o '`[a-z0-9@ -]*@[0-9]*[^`]*`' | tr -d '`' | tr ' ' '\n' || true)
every="info bench lab bench-copy bench-dense bench-mm bench-lbm bench-fv bench-scale bench-lab bench-lab-copy
    bench-lab-lbm bench-lab-mm bench-lab-fv mm9-f32 mm9-f64 mm-f32 mm-f64 mm-big-f32 mm-big-f64 dense dense-sweep
    lbm-cylinder lbm-host fv-order peers-compile"
stages=$(printf '%s\n' $planned $later $every | sed 's/@.*//' | grep -v '^$' | sort -u)
[ -n "$planned" ] && [ -n "$later" ] || fail "no planned session.sh stages found in docs/gpu.md"
rm -rf "$work/out" "$work/out-work" "$calls"
mkdir -p "$work/tests/data/pyfr"
# Each stage in a process of its own (STAGE@SECONDS), so one that fails here (no GPU, no CuPy) stops only itself.
# shellcheck disable=SC2046
OUT=$work/out benches/gpu/session.sh $(for s in $stages; do echo "$s@60"; done) > "$work/run5.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run5.txt")"
grep -q 'unknown stage' "$work/run5.txt" && fail "a planned stage is unknown to session.sh: $(grep 'unknown stage' "$work/run5.txt")"
n=0
while read -r _ what args; do
    [ "$what" = start ] || continue
    n=$((n + 1))
    # shellcheck disable=SC2086
    BESPOKE_ARGS_ONLY=1 "$real" $args > "$work/args.txt" 2>&1 \
        || fail "session.sh runs \`bespoke $args\`, which the CLI refuses: $(cat "$work/args.txt")"
done < "$calls"
[ "$n" -ge 40 ] || fail "only $n bespoke commands were checked"
echo "check_session: $n bespoke commands of $(echo $stages | wc -w) stages parse with the real CLI"
# The goals table (benches/tools/goals.py) reads a session's archive: each shipped one gives its known figures (a
# renamed field or file fails here, not while a lent GPU's results wait to be read).
# goals_hold NAME ARCHIVE ROW...: goals.py reads ARCHIVE and prints each ROW (the start of a table line).
goals_hold() {
    local name=$1 archive=$2 out="$work/goals-$1.txt"
    shift 2
    python3 "$repo/benches/tools/goals.py" "$repo/docs/data/$archive" > "$out" 2>&1 \
        || fail "goals.py failed on the $name session: $(cat "$out")"
    for row in "$@"; do
        grep -q "^$row" "$out" || fail "goals.py lost a row of the $name session ($row): $(cat "$out")"
    done
}
goals_hold fifth h200-2026-11-28-fifth-session.tar.gz '| 35 | FV METIS-ordered ≥ 0.75 of copy (16.5 M tets) | 0.370' \
    '| 36 | 4096×4096×4096 f32 ≥ 0.75× cuBLAS | ×0.73' '| 36 | 2048×2048×2048 f64 ≥ 0.6 of the FMA peak | 0.531' \
    '| 36 | 96×100000×64 f32: the model.s pick within 10 % of the best of 1530 | E = 0.781'
# The sixth (2026-12-04): the first with every goal measured warm, paired lanes and unrolled twins.
goals_hold sixth h200-2026-12-04-call3.tar.gz '| 35 | D2Q9 8192² f16 two lattices ≥ 0.8 of copy | 0.957' \
    '| 35 | the nine operators f64 ≤ 1.1× GiMMiK.s time | 9 of 9 within' '| 36 | 4096×4096×4096 f32 ≥ 0.75× cuBLAS | ×0.85' \
    '| 36 | 96×100000×64 f32: the model.s pick within 10 % of the best of 3060 | E = 0.593'
# Its second call: hex-p6-m132 in mm-big's groups, the fastest candidate of all of them.
goals_hold sixth-call2 h200-2026-12-04-call2.tar.gz \
    '| 35 | hex-p6-m132 f32 within ×2 of its floor, best of .mm-big-f32..s 13 timed candidates | 2.76 ms, ×2.05 the copy floor (bstream-msplit-s4; 3 groups)'
echo "check_session: goals.py reads the fifth and sixth H200 sessions' archives"
echo "check_session: session.sh runs its stages in order, fv-order in the background, tests 4 at a time, and keeps its deadlines"
