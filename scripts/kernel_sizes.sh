#!/usr/bin/env bash
# Instructions per kernel (and spilled bytes) of the library's SM90 translation units, on a machine
# without a GPU or a disassembler: each unit compiled to a cubin with the library's flags (-lineinfo
# included: it moves ptxas' allocation), each kernel's .text section size from readelf / 16 bytes per
# SASS instruction (the count cuobjdump -sass gives, padding included; checked 2026-12-02 on
# single_pass_sm90: 6,368 / 8,416 / 7,008 / 6,784 both ways), and ptxas' spill report.
#
# Why: the single pass sits at the edge of the instruction cache. Its pieces instance lost ~10% to ~70
# more hot instructions (version 40), and a balanced walk of 8,456 instructions against the pieces
# instance's 6,784 ran 15% slower with `no_instruction` stalls per issue 0.88 against 0.19 (2026-12-02,
# docs/performance_notes.md). Compare a change's sizes with main's before spending device time on it.
#
# Usage: scripts/kernel_sizes.sh [translation units...]   (default: src/launch/single_pass_sm90.cu)
#        NVCC_EXTRA="-DKNOB=1" scripts/kernel_sizes.sh ...  (extra compile flags)
#        scripts/kernel_sizes.sh --report CUBIN PTXAS_LOG  (a cubin already built with -Xptxas -v and its log:
#                                                           .ci/check_wgmma_serialization.sh, which CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."

report() {  # cubin, ptxas -v log
  readelf -SW "$1" 2>/dev/null | python3 -c '
import re, sys
spills = {}
for line in open(sys.argv[1]):
    m = re.search(r"Function properties for (\S+)", line)
    if m: name = m.group(1)
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m: spills[name] = (int(m.group(1)), int(m.group(2)))
rows = []
for line in sys.stdin:
    m = re.search(r"\] \.text\.(\S+)\s+PROGBITS\s+\S+\s+\S+\s+([0-9a-f]+)", line)
    if m: rows.append((m.group(1), int(m.group(2), 16) // 16))
if not rows: sys.exit("kernel_sizes: no .text sections in the cubin")
for name, n in rows:
    st, ld = spills.get(name, (0, 0))
    print(f"  {n:7d} instructions  spills {st:4d} / {ld:4d} B  {name}")
' "$2"
}

if [ "${1:-}" = "--report" ]; then
  report "$2" "$3"
  exit 0
fi
units=("$@")
[ ${#units[@]} -gt 0 ] || units=(src/launch/single_pass_sm90.cu)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for tu in "${units[@]}"; do
  cubin="$out/$(basename "$tu" .cu).cubin"
  # shellcheck disable=SC2086
  nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -lineinfo -I. -Iinclude -gencode arch=compute_90a,code=sm_90a \
    ${NVCC_EXTRA:-} -Xptxas -v -cubin "$tu" -o "$cubin" >"$out/ptxas.log" 2>&1 || { cat "$out/ptxas.log"; exit 1; }
  echo "$tu"
  report "$cubin" "$out/ptxas.log"
done
