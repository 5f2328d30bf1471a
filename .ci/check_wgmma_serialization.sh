#!/usr/bin/env bash
# Fails when ptxas serialises any wgmma of the library's kernels (its notes C7510-C7520: "wgmma.mma_async
# instructions are serialized ..."): a register write, a shared load or a branch inside a wgmma batch
# makes ptxas wait for each wgmma before issuing the next, which cost the recurrence up to 20% until
# 2026-12-01 (docs/performance_notes.md, "The wgmma recurrence without serialised wgmma"). Also fails
# when any kernel of those translation units spills registers: a setmaxnreg split or a register cap
# too small for a role shows only as spills (checked to fail with the producer warpgroup's split set
# to 40 / 232), except the single pass's preparation warps in its pieces, partial and walk instances,
# allowed 12, 4 and 4 bytes each way (reported; version 50); the whole-sequence instance may not spill.
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
    # The single pass's preparation warps (setmaxnreg 136) spill a few bytes: allowed, reported, up to
    # what each instance spills today, each way: pieces <false, true, false> 12 bytes, partial <true,
    # false, false> 4 (12 until version 50, whose reloads in every chunk's hand-over cost the packed
    # batches 5-7%: docs/performance_notes.md), walk <false, false, true> 4; the whole-sequence instance
    # <false, false, false> (128 / 248 since version 48) none. Any other kernel, or more, fails
    # (docs/design.md §3.5): a change that moves them says so here, after a look at where they land.
    spills=$(awk '/Function properties for/ {f = $NF}
      /bytes spill stores/ && !/ 0 bytes spill stores, 0 bytes spill loads/ {
        cap = -1
        if (f ~ /single_pass_kernelILb0ELb1ELb0E/) cap = 12
        else if (f ~ /single_pass_kernelILb1ELb0ELb0E/ || f ~ /single_pass_kernelILb0ELb0ELb1E/) cap = 4
        if ($5 + 0 <= cap && $9 + 0 <= cap) { print "  (allowed, at most " cap " bytes) " f ": " $0 > "/dev/stderr"; next }
        n++ } END {print n + 0}' "$log")
    if grep -E "wgmma\.mma_async instructions are serialized" "$log"; then
      echo "check_wgmma_serialization: ptxas serialised wgmma in $tu ${knobs:-(defaults)} (above)"
      bad=1
    elif [ "$spills" -gt 0 ]; then
      awk '/Function properties for/ {f = $NF} /bytes spill stores/ && !/ 0 bytes spill stores, 0 bytes spill loads/ {print f ": " $0}' "$log"
      echo "(single_pass_kernel's pieces instance may spill up to 12 bytes each way, its partial and walk instances 4; nothing else may spill)"
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
