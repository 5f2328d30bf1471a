#!/usr/bin/env bash
# `scripts/gpu_verify.sh publish` times nothing unless the GPU is an H200 (BENCHMARK_H200.md must not get
# another GPU's numbers): run with a stand-in nvidia-smi on PATH that names an H100, then finds no GPU; then
# an H200, and an H100 with PUBLISH_ANY_GPU=1, which pass the GPU check and are refused for their
# BASE_BUILD, which holds no benchmark. Each must fail the stage before anything is built or timed (no pip
# install, no bench JSON). Needs no GPU (ctest: publish_guard).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/flash_kda_publish_guard.XXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
# check NAME GPU EXPECTED_SUMMARY [VAR=VALUE ...]: GPU empty = an nvidia-smi that finds no GPU (a stand-in
# too, first on PATH, so that a GPU machine's own nvidia-smi is never asked).
check() {
  local name=$1 gpu=$2 expect=$3
  shift 3
  local bin=$tmp/$name/bin out=$tmp/$name/out
  mkdir -p "$bin" "$out"
  if [ -n "$gpu" ]; then
    printf '#!/bin/sh\ncase "$*" in *-L*) echo "GPU 0: %s (UUID: GPU-test)";; *) echo "%s";; esac\n' "$gpu" "$gpu" > "$bin/nvidia-smi"
  else
    printf '#!/bin/sh\necho "NVIDIA-SMI has failed" >&2\nexit 9\n' > "$bin/nvidia-smi"
  fi
  chmod +x "$bin/nvidia-smi"
  local path=$bin:/usr/bin:/bin
  # Every case names a BASE_BUILD without a benchmark, the stage's second refusal: a case that got past
  # the GPU check is refused there, before anything is built or timed, and its summary says so.
  env -i HOME="$tmp" TMPDIR="$tmp" PATH="$path" OUT="$out" BUILD="$tmp/no_build" BASE_BUILD="$tmp/no_base" "$@" \
    bash "$ROOT/scripts/gpu_verify.sh" publish \
    > "$tmp/$name/log" 2>&1
  local rc=$?
  if [ $rc -ne 1 ]; then echo "$name: exit $rc, expected 1 (one failed stage)"; failed=$((failed + 1)); fi
  if ! grep -q "publish    FAIL(1) $expect" "$out/summary.txt" 2>/dev/null; then
    echo "$name: summary '$(cat "$out/summary.txt" 2>/dev/null)', expected 'publish    FAIL(1) $expect'"; failed=$((failed + 1))
  fi
  if grep -q "pip install\|Successfully installed" "$tmp/$name/log" || ls "$out" | grep -q "^bench"; then
    echo "$name: something was installed or timed"; failed=$((failed + 1))
  fi
  [ $failed -eq 0 ] && echo "$name: refused ($(grep -m1 '^publish:' "$tmp/$name/log"))"
}
check h100 "NVIDIA H100 80GB HBM3" "not an H200 (NVIDIA H100 80GB HBM3): nothing timed"
check no_gpu "" "not an H200 (no GPU): nothing timed"
# An H200 gets past the GPU check (refused for the base instead), and so does an H100 with
# PUBLISH_ANY_GPU=1: what refuses the first two cases is the GPU check, reading the stand-in.
check h200 "NVIDIA H200" "BASE_BUILD without a benchmark"
check h100_any "NVIDIA H100 80GB HBM3" "BASE_BUILD without a benchmark" PUBLISH_ANY_GPU=1
[ $failed -eq 0 ] && echo "publish guard: PASS" || echo "publish guard: $failed failure(s)"
exit $failed
