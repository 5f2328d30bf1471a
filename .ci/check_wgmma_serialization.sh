#!/usr/bin/env bash
# Fails when ptxas serialises any wgmma of the library's kernels (its notes C7510-C7520: "wgmma.mma_async
# instructions are serialized ..."): a register write, a shared load or a branch inside a wgmma batch
# makes ptxas wait for each wgmma before issuing the next, which cost the recurrence up to 20% until
# 2026-12-01 (docs/performance_notes.md, "The wgmma recurrence without serialised wgmma"). Also fails
# when any kernel of those translation units spills registers: a setmaxnreg split or a register cap
# too small for a role shows only as spills (checked to fail with the producer warpgroup's split set
# to 40 / 232), except the single pass's preparation warps in its pieces, partial and walk instances,
# allowed up to 16 bytes each way (reported); the whole-sequence instance may not spill (version 48).
# Compiles (to a cubin) the translation units that instantiate wgmma kernels (today src/launch/fwd_sm90.cu and
# src/launch/single_pass_sm90.cu) for sm_90a with the library's flags (-lineinfo included: it moves
# ptxas' register allocation, the walk instance spilling 4 bytes with it and none without) and ptxas' verbose notes, by default and with the build knobs
# that change a wgmma batch (FLASH_KDA_SPLIT_U=1: a second update product); checked to fail on
# 83ba1ed's kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bad=0
for knobs in "" "-DFLASH_KDA_SPLIT_U=1"; do
  for tu in $(grep -l "wgmma\|single_pass_kernel" src/launch/*.cu); do
    log="$out/$(basename "$tu").log"
    # shellcheck disable=SC2086
    nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -lineinfo -I. -Iinclude -gencode arch=compute_90a,code=sm_90a \
      $knobs -Xptxas -v -cubin "$tu" -o "$out/x.cubin" >"$log" 2>&1 || { cat "$log"; exit 1; }
    kernels=$(grep -c 'Used [0-9]* registers' "$log" || true)
    # The single pass's preparation warps (setmaxnreg 136) spill a few bytes: allowed up to
    # 16 bytes each way, reported, but not in the whole-sequence instance (<false, false, false>,
    # 128 / 248 since version 48); any other kernel, or more, fails (docs/design.md §3.5).
    spills=$(awk -v cap=16 '/Function properties for/ {f = $NF}
      /bytes spill stores/ && !/ 0 bytes spill stores, 0 bytes spill loads/ {
        if (f ~ /single_pass_kernel/ && f !~ /single_pass_kernelILb0ELb0ELb0E/ && $5 + 0 <= cap && $9 + 0 <= cap) { print "  (allowed) " f ": " $0 > "/dev/stderr"; next }
        n++ } END {print n + 0}' "$log")
    if grep -E "wgmma\.mma_async instructions are serialized" "$log"; then
      echo "check_wgmma_serialization: ptxas serialised wgmma in $tu ${knobs:-(defaults)} (above)"
      bad=1
    elif [ "$spills" -gt 0 ]; then
      awk '/Function properties for/ {f = $NF} /bytes spill stores/ && !/ 0 bytes spill stores, 0 bytes spill loads/ {print f ": " $0}' "$log"
      echo "(single_pass_kernel's pieces, partial and walk instances may spill up to 16 bytes each way; nothing else may spill)"
      echo "check_wgmma_serialization: $spills kernels of $tu ${knobs:-(defaults)} spill registers (above)"
      bad=1
    else
      echo "check_wgmma_serialization: $tu ${knobs:-(defaults)}: $kernels kernels, no serialised wgmma, no spills (but those allowed above)"
    fi
    # The single pass's instructions per instance, reported (the instruction cache's budget:
    # scripts/kernel_sizes.sh says why); fails only if no kernel is found in the cubin.
    if [ -z "$knobs" ] && [[ "$tu" == *single_pass* ]]; then scripts/kernel_sizes.sh --report "$out/x.cubin" "$log"; fi
  done
done
exit $bad
