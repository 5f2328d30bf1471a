#!/usr/bin/env python3
"""Writes BENCHMARK_H200.md from the benchmark's JSON lines (never edit that file by hand).

Inputs: bench.json from flash_kda_bench (one JSON object per line: group, name, ms, graph_ms,
floor_ms, flashkda_ms, fla_ms from cases.json), and optionally bench_python.json from
benchmarks/bench_python.py (FLA Triton measured in the same session on some cases).

Optionally --baseline bench_base.json: the same benchmark of an earlier commit measured in the same
session (a "before" column and the ratio). The long-memory group is also compared with the same
shape on random gates (its name without the _LM suffix) of the same run and of the baseline.

Decode (optional): bench_decode.json from flash_kda_bench_decode (one JSON object per line: name, B, H,
T, pool, config, us, graph_us, floor_us, fla_us, fla_graph_us) and the decode rows of
bench_python.json (FLA's fused_recurrent_kda and flash_kda.decode measured in the same session):
a decode table with the targets of the decode issue checked.

Usage: scripts/make_benchmark_md.py --bench bench.json [--python bench_python.json]
           [--baseline bench_base.json --baseline-label COMMIT] [--decode bench_decode.json]
           --date YYYY-MM-DD --commit SHA --device "NVIDIA H200" --command "..." [--out BENCHMARK_H200.md]
           [--plot benchmarks/results/benchmark_h200.svg]

Also writes --plot: an SVG bar chart of every prefill case (ours, upstream FlashKDA, FLA, the floor),
linked from the Markdown. The Markdown's first line records these arguments (an HTML comment);
scripts/make_benchmark_md.py --check BENCHMARK_H200.md regenerates both files from them and fails
when either differs from the committed one (CI runs it).
"""
import argparse
import json
import math
import os
import sys

from benchmark_md_chart import plot_svg  # scripts/: the chart, and the decode tables, by role
from benchmark_md_decode import decode_tables, read_python_decode


def read_lines(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def read_python(path):
    """FLA times measured in the same session: {case name: ms}."""
    if not path:
        return {}
    with open(path) as f:
        data = json.load(f)
    out = {}
    for row in data.get("cases", data if isinstance(data, list) else []):
        if row.get("fla_ms_measured"):
            out[row["name"]] = row["fla_ms_measured"]
    return out


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def ms(x):
    return f"{x:.3f}" if x and x > 0 else "–"


def ratio(num, den):
    return f"{num / den:.2f}×" if num and den and num > 0 and den > 0 else "–"


def table(rows, fla_now, base, base_label):
    head = ("| case | ms | graph ms | floor ms | × floor | FlashKDA ms | vs FlashKDA | FLA ms (file) | vs FLA |"
            " FLA ms (this run) | vs FLA (this run) |")
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    if base:
        head += f" {base_label} ms | speedup over {base_label} |"
        rule += "---:|---:|"
    clocks = any("sm_mhz_after" in r for r in rows)  # benchmarks since 2026-12-01 16:00 UTC probe the SM clock
    if clocks:
        head += " SM MHz |"
        rule += "---:|"
    lines = [head, rule]
    for r in rows:
        now = fla_now.get(r["name"])
        line = (f"| {r['name']} | {r['ms']:.4f} | {r['graph_ms']:.4f} | {r['floor_ms']:.4f} |"
                f" {r['ms'] / r['floor_ms']:.1f} | {ms(r['flashkda_ms'])} | {ratio(r['flashkda_ms'], r['ms'])} |"
                f" {ms(r['fla_ms'])} | {ratio(r['fla_ms'], r['ms'])} | {ms(now)} | {ratio(now, r['ms'])} |")
        if base:
            b = base.get(r["name"])
            line += f" {ms(b['ms'] if b else None)} | {ratio(b['ms'] if b else None, r['ms'])} |"
        if clocks:
            mhz = [r[k] for k in ("sm_mhz_before", "sm_mhz_after") if r.get(k, -1) > 0]
            line += f" {'–' if not mhz else '-'.join(f'{x:.0f}' for x in sorted(set(round(m) for m in mhz)))} |"
        lines.append(line)
    sp = [r["flashkda_ms"] / r["ms"] for r in rows]
    lines.append("")
    lines.append(f"Geometric mean speedup over FlashKDA: **{geomean(sp):.2f}×** over {len(rows)} cases; "
                 f"slowest case {min(sp):.2f}×; geometric mean time {geomean([r['ms'] for r in rows]) * 1e3:.1f} µs; "
                 f"geometric mean × floor {geomean([r['ms'] / r['floor_ms'] for r in rows]):.1f}.")
    if base:
        pairs = [(base[r["name"]]["ms"], r["ms"]) for r in rows if r["name"] in base]
        if pairs:
            lines.append(f"Against {base_label} (same session): geometric mean time "
                         f"{geomean([b for b, _ in pairs]) * 1e3:.1f} µs → {geomean([n for _, n in pairs]) * 1e3:.1f} µs, "
                         f"speedup {geomean([b / n for b, n in pairs]):.2f}× over {len(pairs)} cases; "
                         f"slowest {min(b / n for b, n in pairs):.2f}×.")
    return "\n".join(lines)


def sequence_parallel_targets(rows, by_name, base, base_label):
    """The sequence-parallelism targets (bounded warm-up) checked on this run, where the cases exist; the
    comparisons with "today" are against the baseline (`base_label`) measured in the same session."""
    lines = ["## Targets of the bounded warm-up (sequence parallelism)", ""]

    def check(ok):
        return "met" if ok else "**not met**"

    small = [r for r in rows if r["group"] == "prefill_small_heads"]
    if small:
        g = geomean([r["ms"] for r in small]) * 1e3
        lines.append(f"- `prefill_small_heads` geometric mean {g:.1f} µs (target ≤ 110 µs): {check(g <= 110)}")
        if base:
            slower = [r["name"] for r in small if r["name"] in base and r["ms"] > base[r["name"]]["ms"] * 1.02]
            lines.append(f"- every small-head case at least as fast as the baseline {base_label} (2% noise allowed): "
                         f"{check(not slower)}" + (f" ({', '.join(slower)})" if slower else ""))
    for name, target in (("T8192_H8", 0.10), ("T65536_H8", 0.65), ("T1024_H4_N1", 0.025)):
        r = by_name.get(name)
        if r:
            lines.append(f"- {name} {r['ms']:.4f} ms (target ≤ {target} ms): {check(r['ms'] <= target)}")
    lm = [r for r in rows if r["group"] == "prefill_long_memory"]
    if lm and base:
        worst = max((r["ms"] / base[r["name"][:-3]]["ms"], r["name"]) for r in lm if r["name"][:-3] in base)
        lines.append(f"- `prefill_long_memory` no slower than the same shape with random gates at the baseline {base_label}: worst "
                     f"{worst[1]} at {worst[0]:.3f}× (≤ 1.02× counted as noise): {check(worst[0] <= 1.02)}")
    pre = [r for r in rows if r["group"] == "prefill"]
    if pre and base:
        worst = max((r["ms"] / base[r["name"]]["ms"], r["name"]) for r in pre if r["name"] in base)
        lines.append(f"- no `prefill` case slower than the baseline {base_label}: worst {worst[1]} at {worst[0]:.3f}× "
                     f"(≤ 1.02× counted as noise): {check(worst[0] <= 1.02)}")
    lines.append("")
    return lines


def long_memory_table(rows, by_name, base, base_label):
    """Long-memory cases against the same shape on random gates (this run, and the baseline)."""
    lines = ["| case | ms | same shape, random gates (this run) | ratio |"
             + (f" same shape, random gates ({base_label}) | ratio |" if base else ""),
             "|---|---:|---:|---:|" + ("---:|---:|" if base else "")]
    for r in rows:
        twin = r["name"][:-3] if r["name"].endswith("_LM") else None
        t = by_name.get(twin)
        line = f"| {r['name']} | {r['ms']:.4f} | {ms(t['ms'] if t else None)} | {ratio(r['ms'], t['ms'] if t else None)} |"
        if base:
            b = base.get(twin)
            line += f" {ms(b['ms'] if b else None)} | {ratio(r['ms'], b['ms'] if b else None)} |"
        lines.append(line)
    lines.append("")
    lines.append("ratio = long-memory time / random-gate time (≤ 1.00× means no slower).")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench")
    ap.add_argument("--python")
    ap.add_argument("--date")
    ap.add_argument("--commit")
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--command")
    ap.add_argument("--python-note", default="", help="where and when the --python JSON was measured")
    ap.add_argument("--baseline", help="bench.json of an earlier commit measured in the same session")
    ap.add_argument("--baseline-label", default="before")
    ap.add_argument("--decode", help="bench_decode.json from flash_kda_bench_decode")
    ap.add_argument("--out", default="BENCHMARK_H200.md")
    ap.add_argument("--plot", default="benchmarks/results/benchmark_h200.svg",
                    help="the SVG chart written beside the tables (path relative to the working directory "
                         "and, in the Markdown link, to --out's directory)")
    ap.add_argument("--check", metavar="MD",
                    help="instead of writing: regenerate MD and its chart from the inputs recorded in MD (run from "
                         "the repository root) and fail if either differs from the committed file")
    a = ap.parse_args()
    if a.check:
        sys.exit(check(a.check))
    missing = [f"--{k}" for k in ("bench", "date", "commit", "command") if not getattr(a, k)]
    if missing:
        ap.error("required: " + ", ".join(missing))
    text, svg = generate(a)
    with open(a.plot, "w") as f:
        f.write(svg)
    with open(a.out, "w") as f:
        f.write(text)
    print(f"wrote {a.out} and {a.plot}")


# The generator's arguments, recorded in the Markdown (first line) so that --check can regenerate it.
RECORDED = ("bench", "python", "date", "commit", "device", "command", "python_note", "baseline", "baseline_label",
            "decode", "out", "plot")
MARK = "<!-- make_benchmark_md.py inputs: "


def check(md_path):
    with open(md_path) as f:
        committed = f.read()
    first = committed.split("\n", 1)[0]
    if not first.startswith(MARK) or not first.endswith(" -->"):
        print(f"{md_path}: no recorded inputs on its first line (regenerate it with this script)")
        return 1
    a = argparse.Namespace(**json.loads(first[len(MARK):-4]))
    text, svg = generate(a)
    bad = 0
    if text != committed:
        bad = 1
        for i, (x, y) in enumerate(zip(text.split("\n"), committed.split("\n"))):
            if x != y:
                print(f"{md_path}: line {i + 1} differs from what its inputs give:\n  committed: {y[:160]}\n  generated: {x[:160]}")
                break
        else:
            print(f"{md_path}: differs in length from what its inputs give")
    with open(a.plot) as f:
        if f.read() != svg:
            bad = 1
            print(f"{a.plot}: differs from the chart its inputs give")
    if not bad:
        print(f"{md_path} and {a.plot}: identical to what their recorded inputs give")
    return bad


def idle_note(rows):
    """What the protocol line says about the GPU's idle time before each case (bench JSON field idle_ms)."""
    idle = {r.get("idle_ms") for r in rows}
    if idle == {None} or idle == {0}:
        return ""
    return (f"\n  Each case starts after the GPU has idled {'/'.join(str(x) for x in sorted(i for i in idle if i))} ms, so"
            " that none runs at the clock the previous case's power"
            "\n  draw left (the H200's power management moves the SM clock between ~1,740 and 1,980 MHz);"
            "\n  `SM MHz` = the clock probed before and after the eager calls (benchmarks/bench_common.cuh).")


def generate(a):
    """The Markdown text and the SVG chart for parsed arguments `a`."""
    rows = read_lines(a.bench)
    fla_now = read_python(a.python)
    base = {r["name"]: r for r in read_lines(a.baseline)} if a.baseline else {}
    by_name = {r["name"]: r for r in rows}
    groups = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    recorded = {k: getattr(a, k) for k in RECORDED}
    text = [
        MARK + json.dumps(recorded, ensure_ascii=False) + " -->",
        "# FlashKDA on the H200",
        "",
        "Generated by `scripts/make_benchmark_md.py` from the output of `flash_kda_bench`; do not edit by hand.",
        "",
        f"- date: {a.date}",
        f"- commit: {a.commit}",
        f"- device: {a.device}",
        f"- command: `{a.command}`",
        "- protocol (spec §7): random normal bf16 q/k/v/g/beta, A_log and dt_bias U[0,1), fp32 initial and final",
        "  state, lower_bound -5, scale 1/sqrt(128); `ms` = median of 50 eager calls timed with CUDA events around",
        "  the C API call after 10 warm-ups (inputs rotated over several sets when one set fits in L2); `graph ms` =",
        "  median of 50 CUDA-graph replays of the same call (kernel time without host overhead)."
        + idle_note(rows),
        "- floor = bytes that must move / 4.27 TB/s; FlashKDA and FLA (file) times are the anchors of",
        "  `bench/cases.json` (same GPU model, measured 2026-11-29); FLA (this run) is flash-linear-attention's",
        "  Triton `chunk_kda` measured in the same session by `benchmarks/bench_python.py`, where run"
        + (f" ({a.python_note})." if a.python_note else "."),
        "",
    ]
    titles = {"prefill": "Prefill cases", "prefill_small_heads": "Prefill, small head counts (cudnn-frontend shapes)",
              "prefill_long_memory": "Prefill, long memory (every 8th key channel with dt_bias = -8)"}
    for g, rs in groups.items():
        text += [f"## {titles.get(g, g)}", "", table(rs, fla_now, base, a.baseline_label), ""]
        if g == "prefill_long_memory":
            text += [long_memory_table(rs, by_name, base, a.baseline_label), ""]
    svg = plot_svg(groups, fla_now, titles)
    rel = os.path.relpath(a.plot, os.path.dirname(os.path.abspath(a.out)))
    text += ["## Chart", "",
             "Per case, on a log time axis: ours (eager ms, above), upstream FlashKDA and FLA's `chunk_kda` "
             "(this run where measured, else the anchor of cases.json), and the memory floor.", "",
             f"![time per case against the anchors and the floor]({rel})", ""]
    text += sequence_parallel_targets(rows, by_name, base, a.baseline_label)
    sp = [r["flashkda_ms"] / r["ms"] for r in rows]
    text += ["## All cases", "",
             f"Geometric mean speedup over FlashKDA over all {len(rows)} cases: **{geomean(sp):.2f}×**; "
             f"slowest case {min(sp):.2f}×; every case at or below FlashKDA's time: {'yes' if min(sp) >= 1 else 'no'}.", ""]
    if a.decode:
        main_table, cfg_table, checks = decode_tables(read_lines(a.decode), read_python_decode(a.python))
        text += ["## Decode and speculative verify over a state pool (kda_decode)", "",
                 "`flash_kda_bench_decode`: one token per sequence (`decode_*`, [N] slot indices), the same with a",
                 "bf16 pool (`*_bf16`), and verify steps of 4 tokens (`verify4_*`, [N, 4] slot indices with",
                 "num_accepted_tokens, a state written per token). `graph µs` = kernel time per call from CUDA-graph",
                 "replay (20 calls per graph, slot sets rotated when one call's states fit in L2), automatic",
                 "configuration; `eager µs` = CUDA events around the C API call. floor = state bytes read + written",
                 "/ 4.27 TB/s; device copy = the same state bytes (T = 1) moved by a plain streaming copy kernel",
                 "(bench_decode.cu, copy_kernel) into a separate buffer, timed the same way: what a copy achieves at that size.",
                 "FLA (file) = `fla_graph_us` of cases.json; FLA (this run) = FLA's",
                 "`fused_recurrent_kda` timed by `benchmarks/bench_python.py` in the same session (same protocol).",
                 "", main_table, "",
                 "Graph µs of every kernel configuration (src/launch/decode_plan.h; best in bold):",
                 "", cfg_table, "", "Targets:", "", checks, ""]
    return "\n".join(text), svg


if __name__ == "__main__":
    main()
