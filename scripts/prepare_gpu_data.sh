#!/usr/bin/env bash
# Gathers what the GPU machine needs beside the repo into .gpu_data/ (git-ignored; pass it with
# carry: [".gpu_data"]), because ../shared does not travel there:
#   .gpu_data/golden/       copy of ../shared/golden          (tests/python/test_golden.py)
#   .gpu_data/cases.json    copy of ../shared/bench/cases.json (benchmarks/bench_python.py)
#   .gpu_data/fla/          flash-linear-attention's fla/ package from a fetched mirror, if any
#                           (tests/python/test_fla.py, FLA columns of the benchmark); never committed
# The tests and the benchmark find these paths by themselves (or via FLASH_KDA_GOLDEN_DIR /
# FLASH_KDA_FLA_DIR). FLA mirror: FLA_MIRROR=<git dir>, default /work/.mirror/fla-org+flash-linear-attention/repo
# (commit used when this was written: bc3b101dcb713ddc5bd8924b66754eb68b5ccf89, FLA 0.5.2 main).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${FLASH_KDA_SHARED_DIR:-$root/../shared}"
mirror="${FLA_MIRROR:-/work/.mirror/fla-org+flash-linear-attention/repo}"
dest="$root/.gpu_data"

if ! git -C "$root" check-ignore -q "$dest/x"; then
  echo "error: .gpu_data/ is not git-ignored in $root; refusing to create it" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"

if [[ -d "$shared/golden" ]]; then
  cp -r "$shared/golden" "$dest/golden"
  chmod -R u+w "$dest/golden"
else
  echo "warning: $shared/golden not found; golden tests will skip" >&2
fi
if [[ -f "$shared/bench/cases.json" ]]; then
  cp "$shared/bench/cases.json" "$dest/cases.json"
else
  echo "warning: $shared/bench/cases.json not found" >&2
fi

if [[ -d "$mirror" ]] && git --git-dir="$mirror" rev-parse --verify -q HEAD >/dev/null; then
  commit="$(git --git-dir="$mirror" rev-parse HEAD)"
  git --git-dir="$mirror" archive HEAD fla | tar -x -C "$dest"
  echo "$commit" > "$dest/fla_commit.txt"
  echo "FLA: fla/ from $mirror at $commit"
else
  echo "note: no FLA mirror at $mirror (fetch github:fla-org/flash-linear-attention); FLA tests will skip" >&2
fi

du -sh "$dest"/* 2>/dev/null || true
total_kib="$(du -sk "$dest" | cut -f1)"
echo "total: $((total_kib / 1024)) MiB in $dest (keep everything carried well under 60 MiB)"
if (( total_kib > 50 * 1024 )); then
  echo "warning: .gpu_data is larger than 50 MiB" >&2
fi
