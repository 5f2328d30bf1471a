"""The decode part of BENCHMARK_H200.md (scripts/make_benchmark_md.py): reads the decode rows of
bench_python.json and writes the decode tables with the decode issue's targets checked."""
import json


def read_python_decode(path):
    """Decode rows of bench_python.json (group "decode"): {case name: row}."""
    if not path:
        return {}
    with open(path) as f:
        data = json.load(f)
    rows = data.get("cases", []) if isinstance(data, dict) else []
    return {r["name"]: r for r in rows if r.get("group") == "decode"}


def decode_tables(rows, py):
    """Markdown for the decode cases: the automatic configuration against FLA and the floor, every
    configuration's graph time, and the issue's targets."""
    cases = {}
    for r in rows:
        cases.setdefault(r["name"], {})[int(r["config"])] = r

    def us(x, d=2):
        return f"{x:.{d}f}" if x is not None and x > 0 else "–"

    def ratio(num, den):
        return f"{num / den:.2f}×" if num and den and num > 0 and den > 0 else "–"

    lines = ["| case | pool | tokens | floor µs | device copy µs | graph µs | × floor | × copy | eager µs |"
             " FLA graph µs (file) | FLA graph µs (this run) | vs FLA (this run) |"
             " Python eager µs: ours / FLA (this run) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    auto = {}
    for name, by_cfg in cases.items():
        r = by_cfg.get(0) or next(iter(by_cfg.values()))
        auto[name] = r
        p = py.get(name, {})
        fla_now = p.get("fla_graph_us")
        copy = r.get("copy_graph_us")
        lines.append(
            f"| {name} | {r['pool']} | {r['T']} | {us(r['floor_us'])} | {us(copy)} | {us(r['graph_us'])} |"
            f" {r['graph_us'] / r['floor_us']:.2f} | {ratio(r['graph_us'], copy)} | {us(r['us'])} |"
            f" {us(r['fla_graph_us'], 1)} | {us(fla_now)} |"
            f" {ratio(fla_now, r['graph_us'])} | {us(p.get('ours_us'), 1)} / {us(p.get('fla_us'), 1)} |")
    configs = sorted({c for by_cfg in cases.values() for c in by_cfg})
    cfg_lines = ["| case | " + " | ".join(f"config {c}" + (" (auto)" if c == 0 else "") for c in configs) + " |",
                 "|---|" + "---:|" * len(configs)]
    for name, by_cfg in cases.items():
        best = min((r["graph_us"] for r in by_cfg.values() if r["graph_us"] > 0), default=0)
        cells = []
        for c in configs:
            r = by_cfg.get(c)
            cell = us(r["graph_us"]) if r else "–"
            cells.append(f"**{cell}**" if r and r["graph_us"] == best else cell)
        cfg_lines.append(f"| {name} | " + " | ".join(cells) + " |")

    def get(name):
        return auto.get(name)

    checks = []
    for n, r in auto.items():  # every case with an FLA time: this run's, else the file's
        fla = (py.get(n) or {}).get("fla_graph_us") or r["fla_graph_us"]
        if fla and fla > 0:
            checks.append(f"{n}: {r['graph_us']:.2f} µs vs FLA {fla:.2f} µs: "
                          f"{'faster' if r['graph_us'] < fla else 'NOT faster'}")
    # Every fp32 decode case with B·H >= 256 (the decode issue's target), met or not.
    for n, r in auto.items():
        if n.startswith("decode_") and r.get("pool") == "f32" and r["B"] * r["H"] >= 256:
            x = r['graph_us'] / r['floor_us']
            copy = r.get("copy_graph_us") or 0
            note = (f"; a device copy of the same bytes takes {copy:.2f} µs = {copy / r['floor_us']:.2f}× floor"
                    if copy > 0 else "")
            checks.append(f"{n}: {x:.2f}× floor (target ≤ 1.15×): {'met' if x <= 1.15 else '**not met**'}{note}")
    r = get("decode_B1_H8")
    if r:
        checks.append(f"decode_B1_H8: {r['graph_us']:.2f} µs (target ≤ 3 µs)")
    a, b = get("decode_B256_H32"), get("decode_B256_H32_bf16")
    if a and b:
        checks.append(f"bf16 pool at B256 H32: {a['graph_us'] / b['graph_us']:.2f}× faster than fp32 "
                      "(target ≥ 1.7×)")
    for v in [n for n in auto if n.startswith("verify4_")]:
        d = get(v.replace("verify4_", "decode_"))
        if d:
            per_token = auto[v]["graph_us"] / auto[v]["T"]
            checks.append(f"{v}: {per_token:.2f} µs per token vs decode {d['graph_us']:.2f} µs "
                          f"(target: not slower per token)")
    p = py.get("decode_B1_H8")
    if p and p.get("ours_us"):
        checks.append(f"eager Python call at B1 H8: {p['ours_us']:.1f} µs (target ≤ 15 µs): "
                      f"{'met' if p['ours_us'] <= 15 else '**not met**'}")
    return "\n".join(lines), "\n".join(cfg_lines), "\n".join(f"- {c}" for c in checks)
