#!/usr/bin/env python3
"""Where the kernels spill, from their SASS: per kernel the instruction count, HGMMA and HMMA counts and
every local-memory store and load (STL / LDL), optionally with the instructions around each.

ptxas -v (scripts/kernel_sizes.sh, .ci/check_wgmma_serialization.sh) says how many bytes a kernel spills,
not where: a word stored once in a CTA's setup and reloaded in every chunk's hand-over costs the chunk
loop, one saved around a path that never runs costs nothing (docs/performance_notes.md, version 50: the
single pass's partial-chunk instance reloaded three words per chunk until then). The build machine has
no disassembler, so this runs where the CUDA toolkit's cuobjdump is (the GPU machine:
`scripts/gpu_verify.sh spills`), or on a listing brought back from there. (The `sass` stage's
scripts/ncu_role_stalls.py counts the same opcodes per role from a profile, executed; this needs no
profile and says where they are.)

Usage: scripts/sass_spills.py LISTING [--kernel SUBSTRING] [--spilling] [--context N]
       scripts/sass_spills.py --binary EXE [--kernel SUBSTRING] [--spilling] [--context N]   (runs cuobjdump -sass EXE)
       scripts/sass_spills.py --self-test
LISTING is `cuobjdump -sass` output. --kernel keeps the kernels whose mangled name contains SUBSTRING
(default: every kernel), --spilling those with an STL or LDL; --context N prints N instructions before
and after each STL / LDL (default 0: counts only). A last line counts the kernels listed and those that
spill.
"""
import argparse
import re
import subprocess
import sys

FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# An instruction line: /*offset*/ then the instruction, then its encoding in a trailing comment.
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\*\s*0x[0-9a-f]+\s*\*/\s*$")
OPCODE = re.compile(r"^(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)")


def parse(lines):
    """{kernel: [(offset, instruction text, opcode)]} in listing order."""
    kernels, current = {}, None
    for line in lines:
        m = FUNCTION.match(line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        if current is None:
            continue
        m = INSTRUCTION.match(line)
        if m:
            text = m.group(2).rstrip(" ;")
            op = OPCODE.match(text)
            current.append((m.group(1), text, op.group(1) if op else ""))
    return kernels


def report(kernels, name_filter="", context=0, out=sys.stdout, spilling=False):
    """Prints one line per kernel (and the spill sites with `context`; with `spilling` only the kernels
    that have some); returns the kernels' total of STL + LDL instructions."""
    total = 0
    for name, ins in kernels.items():
        if name_filter and name_filter not in name:
            continue
        ops = [op for _, _, op in ins]
        sites = [i for i, op in enumerate(ops) if op in ("STL", "LDL")]
        if spilling and not sites:
            continue
        total += len(sites)
        print(f"{len(ins):6d} instructions  HGMMA {ops.count('HGMMA'):4d}  HMMA {ops.count('HMMA'):4d}  "
              f"STL {ops.count('STL'):3d}  LDL {ops.count('LDL'):3d}  {name}", file=out)
        if context > 0:
            for i in sites:
                for j in range(max(0, i - context), min(len(ins), i + context + 1)):
                    mark = ">>" if j == i else "  "
                    print(f"    {mark} /*{ins[j][0]}*/ {ins[j][1]}", file=out)
                print("    --", file=out)
    return total


SELF_TEST = """\
\tcode for sm_90a
\t\tFunction : _ZN3kda4sm9018single_pass_kernelILb1ELb0ELb0EEEvNS0_16SinglePassParamsE14CUtensorMap_stS3_S3_S3_
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                              /* 0x00000a00ff017b82 */
                                                                                                       /* 0x000fe20000000800 */
        /*10a50*/              @!P0 BRA 0x13580 ;                                                       /* 0x0000002800c88947 */
        /*10a60*/                   STL [R1], R0 ;                                                      /* 0x0000000001007387 */
        /*10a70*/                   VIADD R22, R2, 0x800 ;                                              /* 0x0000080002167836 */
        /*10d90*/                   HGMMA.64x32x16.F32.BF16 R168, gdesc[UR8].tnspA, R168 ;              /* 0x2060000008a879f0 */
        /*11c30*/                   LDL.LU R0, [R1] ;                                                   /* 0x0000000001007983 */
        /*152e0*/                   HMMA.16816.F32.BF16 R36, R28, R60, R36 ;                            /* 0x0000003c1c24723c */
\t\tFunction : _ZN3kda4sm9018single_pass_kernelILb0ELb0ELb0EEEvNS0_16SinglePassParamsE14CUtensorMap_stS3_S3_S3_
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                              /* 0x00000a00ff017b82 */
        /*0010*/                   EXIT ;                                                              /* 0x000000000000794d */
"""


def self_test():
    kernels = parse(SELF_TEST.splitlines())
    names = list(kernels)
    assert len(names) == 2 and "ILb1ELb0ELb0E" in names[0] and "ILb0ELb0ELb0E" in names[1], names
    partial = kernels[names[0]]
    assert [op for _, _, op in partial] == ["LDC", "BRA", "STL", "VIADD", "HGMMA", "LDL", "HMMA"], partial
    assert partial[2] == ("10a60", "STL [R1], R0", "STL"), partial[2]

    class Sink:
        text = ""

        def write(self, s):
            self.text += s

    sink = Sink()
    assert report(kernels, context=1, out=sink) == 2
    assert "7 instructions  HGMMA    1  HMMA    1  STL   1  LDL   1" in sink.text, sink.text
    assert ">> /*10a60*/ STL [R1], R0" in sink.text and "   /*10a50*/ @!P0 BRA 0x13580" in sink.text, sink.text
    assert "2 instructions  HGMMA    0  HMMA    0  STL   0  LDL   0" in sink.text, sink.text
    sink = Sink()
    assert report(kernels, name_filter="ILb0ELb0ELb0E", out=sink) == 0 and sink.text.count("\n") == 1, sink.text
    sink = Sink()
    assert report(kernels, spilling=True, out=sink) == 2 and sink.text.count("\n") == 1, sink.text
    print("sass_spills self-test: OK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("listing", nargs="?")
    ap.add_argument("--binary")
    ap.add_argument("--kernel", default="")
    ap.add_argument("--context", type=int, default=0)
    ap.add_argument("--spilling", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if a.binary:
        lines = subprocess.run(["cuobjdump", "-sass", a.binary], check=True, capture_output=True,
                               text=True).stdout.splitlines()
    elif a.listing:
        with open(a.listing, errors="replace") as f:
            lines = f.read().splitlines()
    else:
        ap.error("a LISTING or --binary is required")
    kernels = parse(lines)
    if not kernels:
        print("error: no kernel found in the listing (expected `cuobjdump -sass` output)", file=sys.stderr)
        return 1
    listed = [n for n in kernels if a.kernel in n]
    report(kernels, a.kernel, a.context, spilling=a.spilling)
    spill = sum(1 for n in listed if any(op in ("STL", "LDL") for _, _, op in kernels[n]))
    print(f"{len(listed)} kernels, {spill} with local-memory stores or loads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
