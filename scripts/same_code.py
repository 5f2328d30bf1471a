#!/usr/bin/env python3
"""same_code.py: whether a change of the CUDA sources changed the machine code, kernel by kernel.

For refactors that should move code without changing it (a file split, a lambda made a function):
compiles every CUDA translation unit of the library (src/launch/*.cu, or the files given) for sm_90a
with the library's code-generation flags, once for the working tree and once for a git revision
(checked out into a temporary worktree), and compares the cubins' machine code function by function:
each `.text.<function>` section's bytes, and beside it the function's `.nv.info.<function>` attributes
(registers, shared memory, parameters). Needs no GPU and no cuobjdump: the cubin is an ELF file.
Functions in unnamed namespaces are paired across the two trees with their path's hash left out of
their names (UNNAMED_NS).

A function whose code differs is then compared by its PTX, with virtual register numbers and block
labels normalised and -lineinfo's source positions left out: "renamed" means the same PTX instructions
in the same order, only numbered differently, which ptxas may still allocate to other physical
registers (the machine code then differs in registers and scheduling, not in what it computes);
"reordered" means the same instructions in every basic block, up to register names, but not all in the
same order (e.g. the copies at a block's end that feed a join in another order): the GPU tests have to
say the rest; anything else is "changed".

nvcc is not deterministic everywhere (docs/performance_notes.md, "nvcc's PTX for fwd_sm90.cu is not
the same from run to run": the unbounded-gate preparation instances). So both sides are compiled --runs
times (a function whose code differs between one side's own runs is "unstable" and goes to the PTX
comparison whatever its code), the PTX up to MORE_PTX times more while a function still differs, and
a function counts as renamed or reordered when any pair of the two sides' compilations says so.

Exit status: 0 when every function of both sides is identical, renamed or reordered and both have the
same functions, 1 otherwise, 2 on a usage or compile error.

  scripts/same_code.py --base HEAD [--runs 2] [src/launch/fwd_sm90.cu ...]
  scripts/same_code.py --self-test      (ctest same_code_selftest: a refactor of a small kernel is not
                                         "changed", a change of its arithmetic is)
"""
import argparse
import difflib
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

NVCC = ["nvcc"]  # --nvcc
MORE_PTX = 4  # extra PTX compilations per side while a function's PTX still differs
# The library's device-code flags (CMakeLists.txt; scripts/kernel_sizes.sh compiles with the same), -lineinfo
# included: it moves ptxas' allocation.
FLAGS = ["-cubin", "-O3", "-DNDEBUG", "-gencode", "arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr", "-lineinfo",
         "-std=c++17"]


def elf_sections(data):
    """{section name: bytes} of a 64-bit little-endian ELF file (a cubin)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        headers.append((name, _type, offset, size))
    _, _, str_off, str_size = headers[shstrndx]
    strtab = data[str_off:str_off + str_size]
    out = {}
    for name, typ, offset, size in headers:
        end = strtab.index(b"\0", name)
        key = strtab[name:end].decode()
        out[key] = b"" if typ == 8 else data[offset:offset + size]  # SHT_NOBITS: no bytes in the file
    return out


# An unnamed namespace's mangled name carries a hash of the translation unit's path
# (_GLOBAL__N__<8 hex>_<length>_<file>_<8 hex>), which differs between the working tree and the base's
# temporary worktree: the path's hash is dropped so that such functions pair up.
UNNAMED_NS = re.compile(r"_GLOBAL__N__[0-9a-f]{8}_")


def unnamed(text):
    return UNNAMED_NS.sub("_GLOBAL__N__x_", text)


def functions(cubin_path):
    """{function: (code digest, attributes digest, code bytes)} of one cubin."""
    with open(cubin_path, "rb") as f:
        sections = elf_sections(f.read())
    out = {}
    for name, body in sections.items():
        if name.startswith(".text."):
            fn = name[len(".text."):]
            info = sections.get(".nv.info." + fn, b"")
            out[unnamed(fn)] = (hashlib.sha256(body).hexdigest(), hashlib.sha256(info).hexdigest(), len(body))
    return out


PTX_NAMES = re.compile(r"%(rd|rs|r|fd|f|p)[0-9]+")
PTX_LABELS = re.compile(r"\$L__BB[0-9_]+")
PTX_REG_DECL = re.compile(r"^\s*\.reg\s")
PTX_LINE_INFO = re.compile(r"^\s*\.(loc|file)\s")  # -lineinfo's source positions


def ptx_functions(path):
    """{function: normalised PTX body} of one PTX file."""
    out, name, body = {}, None, []
    with open(path) as f:
        for line in f:
            line = unnamed(line)
            m = re.match(r"^(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z0-9_$]+)", line)
            if m:
                if name:
                    out[name] = "".join(body)
                name, body = m.group(1), []
            if name and not PTX_REG_DECL.match(line) and not PTX_LINE_INFO.match(line):
                body.append(PTX_LABELS.sub("L", PTX_NAMES.sub(r"%\1", line)))
            if name and line.rstrip() == "}":  # the function's end (what follows, e.g. debug sections, is not its)
                out[name] = "".join(body)
                name, body = None, []
    if name:
        out[name] = "".join(body)
    return out


def blocks_as_multisets(body):
    """The normalised body as a list of basic blocks (split at labels and after branches, returns and
    exits), each a sorted list of its lines."""
    blocks, cur = [], []
    for line in body.splitlines():
        if line.startswith("L:"):
            blocks.append(sorted(cur))
            cur = []
        cur.append(line)
        if re.match(r"^\s*(@!?%p\s+)?(bra|ret|exit)\b", line):
            blocks.append(sorted(cur))
            cur = []
    blocks.append(sorted(cur))
    return blocks


def first_difference(a, b, lines=6):
    """The first basic block that differs between two normalised PTX bodies, as a few diff lines."""
    for i, (x, y) in enumerate(zip(blocks_as_multisets(a), blocks_as_multisets(b))):
        if x != y:
            d = [l for l in difflib.unified_diff(x, y, lineterm="", n=0) if l[:1] in "+-" and l[:3] not in ("+++", "---")]
            return f"; first in block {i}: " + " | ".join(l.replace("\t", " ").strip()[:80] for l in d[:lines])
    return "; the blocks differ in number"


def ptx_of(tree, src, dest):
    os.makedirs(dest, exist_ok=True)
    ptx = os.path.join(dest, os.path.basename(src) + ".ptx")
    cmd = NVCC + [f if f != "-cubin" else "-ptx" for f in FLAGS] + [
        "-I" + os.path.join(tree, "include"), "-I" + tree, "-o", ptx, os.path.join(tree, src)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc -ptx failed on {src} in {tree}:\n{r.stderr[-4000:]}")
    return ptx_functions(ptx)


def compile_all(tree, sources, dest, jobs):
    os.makedirs(dest, exist_ok=True)

    def one(src):
        cubin = os.path.join(dest, os.path.basename(src) + ".cubin")
        cmd = NVCC + FLAGS + ["-I" + os.path.join(tree, "include"), "-I" + tree, "-o", cubin,
                                  os.path.join(tree, src)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed on {src} in {tree}:\n{r.stderr[-4000:]}")
        return src, functions(cubin)

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return dict(ex.map(one, sources))


def compare_trees(base_tree, new_tree, sources, runs, jobs, tmp):
    """Compares the sources' cubins of two trees. Returns (counts, report lines, problems)."""
    runs = max(1, runs)
    base_sources = [s for s in sources if os.path.exists(os.path.join(base_tree, s))]
    bases = [compile_all(base_tree, base_sources, os.path.join(tmp, f"b{i}"), jobs) for i in range(runs)]
    news = [compile_all(new_tree, sources, os.path.join(tmp, f"n{i}"), jobs) for i in range(runs)]
    counts = dict(identical=0, renamed=0, reordered=0, changed=0, unstable=0)
    report, problems = [], []
    for src in sources:
        if src not in bases[0]:
            problems.append(f"{src}: not in the base")
            continue
        b, n = bases[0][src], news[0][src]
        flaky = {fn for fn in b if any(r[src].get(fn) != b[fn] for r in bases[1:])} | {
            fn for fn in n if any(r[src].get(fn) != n[fn] for r in news[1:])}
        differ = []
        for fn in sorted(set(b) | set(n)):
            if fn not in n or fn not in b:
                problems.append(f"{src}: {fn} only in the {'base' if fn in b else 'working tree'}")
            elif fn in flaky:  # compared by its PTX below
                counts["unstable"] += 1
                differ.append(fn)
            elif b[fn] == n[fn]:
                counts["identical"] += 1
            else:
                differ.append(fn)
        if not differ:
            continue
        # PTX of each side, compiled `runs` times and then up to kMorePtx more while a function still
        # differs (nvcc's front end is not deterministic either, so the variant one side happened to get
        # may not be the other's): a function counts as renamed or reordered when any pair of runs says so.
        bps = [ptx_of(base_tree, src, os.path.join(tmp, f"b{i}")) for i in range(runs)]
        nps = [ptx_of(new_tree, src, os.path.join(tmp, f"n{i}")) for i in range(runs)]

        def verdict(fn):
            pairs = [(x[fn], y[fn]) for x in bps for y in nps if fn in x and fn in y]
            if any(x == y for x, y in pairs):
                return "renamed"
            if any(blocks_as_multisets(x) == blocks_as_multisets(y) for x, y in pairs):
                return "reordered"
            return "changed"

        more = 0
        while more < MORE_PTX and any(verdict(fn) == "changed" for fn in differ):
            more += 1
            bps.append(ptx_of(base_tree, src, os.path.join(tmp, f"b{runs + more}")))
            nps.append(ptx_of(new_tree, src, os.path.join(tmp, f"n{runs + more}")))
        for fn in differ:
            what = f"{'code' if b[fn][0] != n[fn][0] else 'attributes'} differ ({b[fn][2]} -> {n[fn][2]} bytes of code)"
            if fn in flaky:
                what = "unstable (its code differs between one side's own compilations)"
            v = verdict(fn)
            counts[v] += 1
            if v == "renamed":
                report.append(f"renamed   {src}: {fn}: {what}, PTX the same up to register names")
            elif v == "reordered":
                report.append(f"reordered {src}: {fn}: {what}, PTX the same per basic block up to register "
                              "names and order")
            else:
                problems.append(f"{src}: {fn}: {what}, PTX differs in {len(bps)} x {len(nps)} compilations"
                                f"{first_difference(bps[0].get(fn, ''), nps[0].get(fn, ''))}")
    return counts, report, problems


SELF_TEST = {  # name: (source, whether it computes what "base" does)
    "base": ("__device__ float f(const float* x, int i) { return x[i] * 2.0f + 1.0f; }\n", True),
    # the same arithmetic with its body split differently: at least renamed, never changed
    "moved": ("__device__ __forceinline__ float twice(float v) { return v * 2.0f; }\n"
              "__device__ float f(const float* x, int i) { return twice(x[i]) + 1.0f; }\n", True),
    "other": ("__device__ float f(const float* x, int i) { return x[i] * 3.0f + 1.0f; }\n", False),
}
# k in an unnamed namespace and h outside: each tree's path changes k's mangled name (UNNAMED_NS).
SELF_TEST_KERNEL = ("namespace {\n__global__ void k(const float* x, float* y, int n) {\n"
                    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = f(x, i);\n}\n}\n"
                    "__global__ void h(float* y) { y[0] = 1.0f; }\n"
                    "void launch(const float* x, float* y, int n) { k<<<1, 32>>>(x, y, n); h<<<1, 1>>>(y); }\n")


def self_test(jobs):
    """Checks the comparison on three small trees: a refactor must not count as changed, a change must;
    the kernel in an unnamed namespace must pair up across the trees' paths."""
    tmp = tempfile.mkdtemp(prefix="same_code_selftest.")
    try:
        trees = {}
        for name, (body, _) in SELF_TEST.items():
            trees[name] = os.path.join(tmp, name)
            os.makedirs(os.path.join(trees[name], "src"))
            with open(os.path.join(trees[name], "src", "k.cu"), "w") as f:
                f.write(body + SELF_TEST_KERNEL)
        failures = []
        for name, (_, same) in SELF_TEST.items():
            counts, report, problems = compare_trees(trees["base"], trees[name], ["src/k.cu"], 1, jobs,
                                                     os.path.join(tmp, "out_" + name))
            ok = (not problems and counts["identical"] + counts["renamed"] + counts["reordered"] == 2) if same \
                else (counts["changed"] == 1 and counts["identical"] == 1 and len(problems) == 1)
            print(f"self-test {name}: {counts} -> {'as expected' if ok else 'WRONG'}")
            if not ok:
                failures.append(name)
        if failures:
            print(f"same_code self-test FAILED: {', '.join(failures)}")
            return 1
        print("same_code self-test passed")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD", help="git revision to compare the working tree with")
    ap.add_argument("--runs", type=int, default=2, help="compilations of each side (instability check)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--nvcc", default="nvcc", help="the CUDA compiler (default: nvcc on PATH)")
    ap.add_argument("--self-test", action="store_true", help="check the comparison itself on small trees")
    ap.add_argument("sources", nargs="*", help="translation units (default: src/launch/*.cu)")
    args = ap.parse_args()
    NVCC[0] = args.nvcc
    try:
        if args.self_test:
            return self_test(args.jobs)
        root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip()
        if not root:
            print("same_code.py: run inside the repository", file=sys.stderr)
            return 2
        sources = args.sources or sorted(
            os.path.join("src/launch", f) for f in os.listdir(os.path.join(root, "src/launch")) if f.endswith(".cu"))
        tmp = tempfile.mkdtemp(prefix="same_code.")
        base_tree = os.path.join(tmp, "base")
        try:
            subprocess.run(["git", "-C", root, "worktree", "add", "--detach", "-q", base_tree, args.base], check=True)
            counts, report, problems = compare_trees(base_tree, root, sources, args.runs, args.jobs, tmp)
        finally:
            subprocess.run(["git", "-C", root, "worktree", "remove", "--force", base_tree], capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"same_code.py: {e}", file=sys.stderr)
        return 2
    for line in report:
        print(line)
    for line in problems:
        print("CHANGED   " + line)
    print(f"same_code: {counts['identical']} functions identical, {counts['renamed']} renamed, "
          f"{counts['reordered']} reordered, {counts['changed']} changed; {counts['unstable']} of them unstable, "
          "compared by their PTX; "
          f"{len(problems) - counts['changed']} present on one side only (base {args.base}, {len(sources)} files)")
    return 0 if not problems else 1

if __name__ == "__main__":
    sys.exit(main())
