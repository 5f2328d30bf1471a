#!/usr/bin/env python3
"""Writes BENCHMARK_H200.md from the benchmark's JSON lines (never edit that file by hand).

Inputs: bench.json from flash_kda_bench (one JSON object per line: group, name, ms, graph_ms,
floor_ms, flashkda_ms, fla_ms from cases.json), and optionally bench_python.json from
benchmarks/bench_python.py (FLA Triton measured in the same session on some cases).

Optionally --baseline bench_base.json: the same benchmark of an earlier commit measured in the same
session (a "before" column and the ratio). The long-memory group is also compared with the same
shape on random gates (its name without the _LM suffix) of the same run and of the baseline.

Usage: scripts/make_benchmark_md.py --bench bench.json [--python bench_python.json]
           [--baseline bench_base.json --baseline-label COMMIT]
           --date YYYY-MM-DD --commit SHA --device "NVIDIA H200" --command "..." [--out BENCHMARK_H200.md]
"""
import argparse
import json
import math


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
    lines = [head, rule]
    for r in rows:
        now = fla_now.get(r["name"])
        line = (f"| {r['name']} | {r['ms']:.4f} | {r['graph_ms']:.4f} | {r['floor_ms']:.4f} |"
                f" {r['ms'] / r['floor_ms']:.1f} | {ms(r['flashkda_ms'])} | {ratio(r['flashkda_ms'], r['ms'])} |"
                f" {ms(r['fla_ms'])} | {ratio(r['fla_ms'], r['ms'])} | {ms(now)} | {ratio(now, r['ms'])} |")
        if base:
            b = base.get(r["name"])
            line += f" {ms(b['ms'] if b else None)} | {ratio(b['ms'] if b else None, r['ms'])} |"
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
    ap.add_argument("--bench", required=True)
    ap.add_argument("--python")
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--command", required=True)
    ap.add_argument("--python-note", default="", help="where and when the --python JSON was measured")
    ap.add_argument("--baseline", help="bench.json of an earlier commit measured in the same session")
    ap.add_argument("--baseline-label", default="before")
    ap.add_argument("--out", default="BENCHMARK_H200.md")
    a = ap.parse_args()
    rows = read_lines(a.bench)
    fla_now = read_python(a.python)
    base = {r["name"]: r for r in read_lines(a.baseline)} if a.baseline else {}
    by_name = {r["name"]: r for r in rows}
    groups = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    text = [
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
        "  median of 50 CUDA-graph replays of the same call (kernel time without host overhead).",
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
    sp = [r["flashkda_ms"] / r["ms"] for r in rows]
    text += ["## All cases", "",
             f"Geometric mean speedup over FlashKDA over all {len(rows)} cases: **{geomean(sp):.2f}×**; "
             f"slowest case {min(sp):.2f}×; every case at or below FlashKDA's time: {'yes' if min(sp) >= 1 else 'no'}.", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(text))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
