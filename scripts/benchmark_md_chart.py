"""The chart of BENCHMARK_H200.md (scripts/make_benchmark_md.py): an SVG bar chart of every prefill case
(ours, upstream FlashKDA, FLA, the floor) on a log time axis, as text (no plotting library)."""
import math


PLOT_SERIES = (("ours (eager)", "#1f6fb4"), ("upstream FlashKDA", "#e07b1a"), ("FLA chunk_kda", "#3a9a3a"),
               ("memory floor", "#888888"))


def plot_series(r, fla_now):
    """A case's plotted times in PLOT_SERIES order (FLA: this run where measured, else the file's anchor)."""
    return (r["ms"], r["flashkda_ms"], fla_now.get(r["name"]) or r["fla_ms"], r["floor_ms"])


def plot_svg(groups, fla_now, titles):
    """A horizontal bar chart (SVG text, no plotting library): per case, ours, upstream FlashKDA,
    FLA (this run where measured, else the file's anchor) and the floor, on a log time axis."""
    label_w, plot_w, bar_h, gap, row_pad, head_h = 170, 640, 5, 1, 8, 22
    vals = [x for rs in groups.values() for r in rs for x in plot_series(r, fla_now) if x and x > 0]
    lo = 10 ** math.floor(math.log10(min(vals)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    decades = round(math.log10(hi / lo))

    def x_of(v):
        return label_w + plot_w * math.log10(v / lo) / decades

    row_h = 4 * (bar_h + gap) + row_pad
    y = 48
    body = []
    for g, rs in groups.items():
        body.append(f'<text x="4" y="{y + 14}" font-weight="bold">{titles.get(g, g)}</text>')
        y += head_h
        for r in rs:
            series = plot_series(r, fla_now)
            body.append(f'<text x="{label_w - 6}" y="{y + 2 * (bar_h + gap) + 4}" text-anchor="end">{r["name"]}</text>')
            for i, (v, (_, color)) in enumerate(zip(series, PLOT_SERIES)):
                if v and v > 0:
                    yy = y + i * (bar_h + gap)
                    body.append(f'<rect x="{label_w}" y="{yy}" width="{x_of(v) - label_w:.1f}" height="{bar_h}" '
                                f'fill="{color}"><title>{r["name"]}: {PLOT_SERIES[i][0]} {v:.4g} ms</title></rect>')
            y += row_h
    height = y + 30
    grid = []
    for d in range(decades + 1):
        v = lo * 10 ** d
        x = x_of(v)
        grid.append(f'<line x1="{x:.1f}" y1="40" x2="{x:.1f}" y2="{y}" stroke="#dddddd"/>')
        grid.append(f'<text x="{x:.1f}" y="{y + 16}" text-anchor="middle">{v:g} ms</text>')
    legend = []
    for i, (name, color) in enumerate(PLOT_SERIES):
        legend.append(f'<rect x="{label_w + 160 * i}" y="12" width="12" height="12" fill="{color}"/>'
                      f'<text x="{label_w + 160 * i + 16}" y="22">{name}</text>')
    width = label_w + plot_w + 20
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                      f'font-family="sans-serif" font-size="11">',
                      f'<rect width="{width}" height="{height}" fill="white"/>'] + grid + legend + body + ["</svg>", ""])
