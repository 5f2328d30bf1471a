#!/usr/bin/env bash
# `scripts/mutants.sh check` (ctest: mutants_apply) passes only patches that apply to the tree exactly.
# Three folders of patches (MUTANT_PATCH_DIR), no GPU (ctest: mutants_check_selftest):
# - a copy of tests/mutants: every patch applies, exit 0;
# - the same with one patch's first context line changed (a stale line). Plain `patch`, with its default
#   fuzz, still applies it (checked here, or the case would prove nothing); check must refuse it by name;
# - an empty folder: check must fail, not pass having checked nothing.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/flash_kda_mutants_check.XXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

mkdir -p "$tmp/good" "$tmp/stale" "$tmp/empty" "$tmp/tree"
cp "$ROOT"/tests/mutants/*.patch "$tmp/good/"
n=$(ls "$tmp/good" | wc -l)
out=$(MUTANT_PATCH_DIR="$tmp/good" bash "$ROOT/scripts/mutants.sh" check); rc=$?
[ $rc -eq 0 ] || fail "the copy of tests/mutants: exit $rc, expected 0"
[ "$(echo "$out" | grep -c ': applies$')" -eq "$n" ] || fail "the copy of tests/mutants: not all $n patches reported as applying"

# The stale patch: the first patch's first context line (the line after its first @@) gets a comment
# appended, as if the tree's line had been edited since the patch was written.
victim=$(ls "$tmp/good"/*.patch | head -1)
name=$(basename "$victim")
cp "$tmp/good"/*.patch "$tmp/stale/"
awk 'done == 0 && seen && /^ ./ { print $0 " /* edited since */"; done = 1; next }
     /^@@/ { seen = 1 } { print }' "$victim" > "$tmp/stale/$name"
cmp -s "$victim" "$tmp/stale/$name" && fail "$name: the awk edit changed nothing"
cp -r "$ROOT/src" "$ROOT/include" "$ROOT/reference" "$tmp/tree/"
if ! patch -s --dry-run -d "$tmp/tree" -p1 < "$tmp/stale/$name" > /dev/null 2>&1; then
  fail "$name with a stale first context line: plain patch (default fuzz) refuses it too, so this case shows nothing"
fi
out=$(MUTANT_PATCH_DIR="$tmp/stale" bash "$ROOT/scripts/mutants.sh" check); rc=$?
[ $rc -eq 1 ] || fail "the stale patch: exit $rc, expected 1 (one stale patch)"
echo "$out" | grep -q "^$name: does not apply exactly" || fail "the stale patch $name is not named: $(echo "$out" | head -2)"
[ "$(echo "$out" | grep -c ': applies$')" -eq $((n - 1)) ] || fail "the $((n - 1)) other patches are not all reported as applying"

out=$(MUTANT_PATCH_DIR="$tmp/empty" bash "$ROOT/scripts/mutants.sh" check); rc=$?
[ $rc -ne 0 ] || fail "an empty folder of patches: exit 0, expected a failure"
echo "$out" | grep -q "^no patches in" || fail "an empty folder of patches: no 'no patches' line: $out"

if [ $failed -eq 0 ]; then echo "mutants check: $n patches apply; the stale $name refused; an empty folder refused"; fi
exit $failed
