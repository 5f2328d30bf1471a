#!/usr/bin/env python3
"""Warp-stall samples of a warp-specialised kernel, split by role.

Input: the source page of an Nsight Compute report as CSV (optionally gzipped), e.g.
    ncu --import r.ncu-rep --page source --csv --print-source sass | gzip > source.csv.gz
The SASS is split at the consumers' / preparation's boundary: the first USETMAXREG.DEALLOC (the
preparation's setmaxnreg.dec) when there is one, else the first EXIT. Everything before it is counted as
"consumer", everything after as "prep" (out-of-line retry loops of barrier waits, which ptxas places at
the end of the function, count with the preparation; look at the top instructions to tell them apart).

Usage: ncu_role_stalls.py SOURCE_CSV[.gz] [c|p N]
  prints per role: stall samples, warp instructions executed, the eight largest stall reasons, and the
  static (executed) counts of HGMMA, WARPGROUP.DEPBAR, HMMA, LDL and STL instructions;
  with c|p N also the N most-sampled instructions of that role.
Used for docs/performance_notes.md ("The preparation taking its stage late").
"""
import csv
import gzip
import sys


def num(x):
    try:
        return float(x)
    except ValueError:
        return 0.0


def main():
    path = sys.argv[1]
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    hdr = next(r for r in rows if "Source" in r and "Address" in r)
    data = rows[rows.index(hdr) + 1:]
    ix = {h: i for i, h in enumerate(hdr)}
    src = [r[ix["Source"]].strip() for r in data]
    dealloc = [i for i, s in enumerate(src) if "SETMAXREG.DEALLOC" in s]
    exits = [i for i, s in enumerate(src) if s.endswith("EXIT")]
    if not dealloc and not exits:
        sys.exit("no USETMAXREG.DEALLOC and no EXIT: not a role-split kernel")
    cut = dealloc[0] if dealloc else exits[0] + 1
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    samples = ix["Warp Stall Sampling (All Samples)"]
    executed = ix["Instructions Executed"]
    for name, lo, hi in (("consumer", 0, cut), ("prep", cut, len(src))):
        tot = sum(num(data[i][samples]) for i in range(lo, hi)) or 1.0
        ins = sum(num(data[i][executed]) for i in range(lo, hi))
        per = {r: sum(num(data[i][ix[r]]) for i in range(lo, hi)) for r in reasons}
        top = sorted(per.items(), key=lambda x: -x[1])[:8]
        print(name, "samples", int(tot), "warp instr", int(ins),
              " ".join(f"{k[6:]}={v / tot * 100:.1f}%" for k, v in top))
        # Tensor-core and local-memory instructions of the role: static count (executed warp instructions).
        ops = {}
        for i in range(lo, hi):
            op = src[i].split()[0] if src[i] else ""
            if op.startswith("@"):
                op = src[i].split()[1] if len(src[i].split()) > 1 else ""
            for key in ("HGMMA", "WARPGROUP.DEPBAR", "HMMA", "LDL", "STL"):
                if op.startswith(key):
                    c = ops.setdefault(key, [0, 0])
                    c[0] += 1
                    c[1] += int(num(data[i][executed]))
        print(name, "opcodes", " ".join(f"{k} {v[0]} ({v[1]})" for k, v in sorted(ops.items())) or "none of HGMMA/HMMA/LDL/STL")
    if len(sys.argv) > 3:
        lo, hi = (0, cut) if sys.argv[2] == "c" else (cut, len(src))
        items = sorted(range(lo, hi), key=lambda i: -num(data[i][samples]))[: int(sys.argv[3])]
        for i in sorted(items):
            per = {k: num(data[i][ix[k]]) for k in reasons}
            top = sorted(per.items(), key=lambda x: -x[1])[:2]
            print(i, data[i][samples], src[i][:60], " ".join(f"{k[6:]}={int(v)}" for k, v in top))


if __name__ == "__main__":
    main()
