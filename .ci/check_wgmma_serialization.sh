#!/usr/bin/env bash
# Fails when ptxas serialises any wgmma of the library's kernels (its notes C7510-C7520: "wgmma.mma_async
# instructions are serialized ..."): a register write, a shared load or a branch inside a wgmma batch
# makes ptxas wait for each wgmma before issuing the next, which cost the recurrence up to 20% until
# 2026-12-01 (docs/performance_notes.md, "The wgmma recurrence without serialised wgmma"). Also fails
# when any kernel of those translation units spills registers: a setmaxnreg split or a register cap
# too small for a role shows only as spills (checked to fail with the producer warpgroup's split set
# to 40 / 232). No kernel may spill, the single pass's four instances included (since version 51; until
# then its pieces, partial and walk instances were allowed 12, 4 and 4 bytes each way).
# Compiles (to a cubin) the translation units that instantiate wgmma kernels (today src/launch/fwd_sm90.cu and
# src/launch/single_pass_sm90.cu) and the preparation's (src/launch/prep_sm90.cu: its spills) for sm_90a
# with the library's flags (-lineinfo included: it moves ptxas' register allocation: until version 51
# the walk instance spilled 4 bytes with it and none without) and ptxas' verbose notes, by default and
# with the build knobs that change a wgmma batch (FLASH_KDA_SPLIT_U=1: a second update product), and the
# single pass with its precheck (FLASH_KDA_SP_PRECHECK=1, off by default: measured in session 49, it costs the
# decaying cases 2-5%; kept compiling spill-free as the knob stays); checked to fail on 83ba1ed's kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bad=0
for knobs in "" "-DFLASH_KDA_SPLIT_U=1" "-DFLASH_KDA_SP_PRECHECK=1"; do
  for tu in $(grep -l '^#include "src/kernels/sm90/\(chunk_recurrence_wgmma\|single_pass\|chunk_prep\)_kernel.cuh"' src/launch/*.cu); do
    if [[ "$knobs" == *SP_PRECHECK* && "$tu" != *single_pass* ]]; then continue; fi  # (the single pass's knob only)
    log="$out/$(basename "$tu").log"
    # shellcheck disable=SC2086
    nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -lineinfo -I. -Iinclude -gencode arch=compute_90a,code=sm_90a \
      $knobs -Xptxas -v -cubin "$tu" -o "$out/x.cubin" >"$log" 2>&1 || { cat "$log"; exit 1; }
    kernels=$(grep -c 'Used [0-9]* registers' "$log" || true)
    # Every kernel spill-free, the single pass's instances included (docs/design.md §3.5). Until version
    # 51 its preparation warps (setmaxnreg 136) were allowed what each instance spilled then: pieces 12
    # bytes each way, partial 4 (12 until version 50, whose reloads in every chunk's hand-over cost the
    # packed batches 5-7%), walk 4 (docs/performance_notes.md, versions 50-51). A change that brings a
    # spill back fails here; scripts/gpu_verify.sh spills shows where it lands in SASS.
    spilled=$(awk '/Function properties for/ {f = $NF}
      /bytes spill stores/ && !/ 0 bytes spill stores, 0 bytes spill loads/ {print f ": " $0}' "$log")
    if grep -E "wgmma\.mma_async instructions are serialized" "$log"; then
      echo "check_wgmma_serialization: ptxas serialised wgmma in $tu ${knobs:-(defaults)} (above)"
      bad=1
    elif [ -n "$spilled" ]; then
      echo "$spilled"
      echo "check_wgmma_serialization: $(echo "$spilled" | wc -l) kernels of $tu ${knobs:-(defaults)} spill registers (above)"
      bad=1
    else
      echo "check_wgmma_serialization: $tu ${knobs:-(defaults)}: $kernels kernels, no serialised wgmma, no spills"
    fi
    # The single pass's instructions per instance, reported (the instruction cache's budget:
    # scripts/kernel_sizes.sh says why); fails only if no kernel is found in the cubin.
    if [[ -z "$knobs" || "$knobs" == *SP_PRECHECK* ]] && [[ "$tu" == *single_pass* ]]; then
      scripts/kernel_sizes.sh --report "$out/x.cubin" "$log"
    fi
  done
done
exit $bad
