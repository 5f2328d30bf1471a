#!/usr/bin/env bash
# Gathers optional data for the GPU machine into .gpu_data/ (git-ignored; pass it with
# carry: [".gpu_data"]). Nothing outside the repository is read unless named here:
#   scripts/prepare_gpu_data.sh [--shared DIR] [--fla-mirror GIT_DIR]
#   --shared DIR        a copy of the shared contract folder (holding golden/ and bench/cases.json):
#                         .gpu_data/golden/     copy of DIR/golden (the independent golden check of
#                                               tests/gpu and tests/python; optional: the generated
#                                               in-repo vectors need nothing from here)
#                         .gpu_data/cases.json  copy of DIR/bench/cases.json (the benchmarks)
#   --fla-mirror GIT_DIR  a git directory of flash-linear-attention:
#                         .gpu_data/fla/        its fla/ package (tests/python/test_fla.py, the FLA
#                                               columns of the benchmark); never committed
# The tests and the benchmark find these paths by themselves (or via FLASH_KDA_GOLDEN_DIR /
# FLASH_KDA_FLA_DIR). Only these paths are replaced; anything else in .gpu_data/ (packaged binaries,
# a session's scripts) is left as it is. FLA commit used when this was written: bc3b101dcb713ddc5bd8924b66754eb68b5ccf89
# (FLA 0.5.2 main).
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
shared="" mirror=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shared) shared="${2:?--shared needs a folder}"; shift 2 ;;
    --fla-mirror) mirror="${2:?--fla-mirror needs a git directory}"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "error: unknown argument $1" >&2; usage 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.gpu_data"

if ! git -C "$root" check-ignore -q "$dest/x"; then
  echo "error: .gpu_data/ is not git-ignored in $root; refusing to create it" >&2
  exit 1
fi
# Only what this script writes (whatever else is in the folder stays).
rm -rf "$dest/golden" "$dest/cases.json" "$dest/fla" "$dest/fla_commit.txt"
mkdir -p "$dest"

if [[ -n "$shared" ]]; then
  if [[ -d "$shared/golden" ]]; then
    cp -r "$shared/golden" "$dest/golden"
    chmod -R u+w "$dest/golden"
  else
    echo "warning: $shared/golden not found; the shared golden check will skip (the in-repo one runs)" >&2
  fi
  if [[ -f "$shared/bench/cases.json" ]]; then
    cp "$shared/bench/cases.json" "$dest/cases.json"
  else
    echo "warning: $shared/bench/cases.json not found; the benchmark stages need it" >&2
  fi
else
  echo "note: no --shared folder: no shared golden copy (its check skips) and no bench cases" >&2
fi

if [[ -n "$mirror" ]]; then
  if git --git-dir="$mirror" rev-parse --verify -q HEAD >/dev/null; then
    commit="$(git --git-dir="$mirror" rev-parse HEAD)"
    git --git-dir="$mirror" archive HEAD fla | tar -x -C "$dest"
    echo "$commit" > "$dest/fla_commit.txt"
    echo "FLA: fla/ from $mirror at $commit"
  else
    echo "error: $mirror is not a git directory with a HEAD" >&2
    exit 1
  fi
else
  echo "note: no --fla-mirror: FLA tests and FLA benchmark columns will skip" >&2
fi

du -sh "$dest"/* 2>/dev/null || true
total_kib="$(du -sk "$dest" | cut -f1)"
echo "total: $((total_kib / 1024)) MiB in $dest (keep everything carried well under 60 MiB)"
if (( total_kib > 50 * 1024 )); then
  echo "warning: .gpu_data is larger than 50 MiB" >&2
fi
