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
tar tzf "$work/out/session-all.tar.gz" | grep -q 'fv-order.txt' || fail "fv-order's log is not in the archive"

# A deadline that leaves under 10 s after the first stage skips the next one.
rm -rf "$work/out" "$work/out-work" "$calls"
OUT=$work/out SESSION_DEADLINE=10 benches/gpu/session.sh info@5 bench-copy@20 > "$work/run2.txt" 2>&1 \
    || fail "session.sh failed: $(cat "$work/run2.txt")"
grep -q '^== bench-copy: skipped' "$work/out-work/stages.txt" || fail "a stage past the deadline was not skipped"
grep -q 'bench --section copy' "$calls" && fail "the skipped stage ran"
echo "check_session: session.sh runs its stages in order, fv-order in the background, and keeps its deadline"
