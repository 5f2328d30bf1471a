#!/usr/bin/env python3
"""Times flash_kda (this package) and FLA's Triton chunk_kda on the cases of bench/cases.json.

Protocol (shared/docs/spec.md section 7): random normal bf16 q/k/v/g/beta, U[0,1) fp32 A_log [H]
and dt_bias [H, K], fp32 initial and final state [N, H, V, K], lower_bound -5, scale 1/sqrt(128);
CUDA events around each eager call, median of --iters calls after --warmup calls. Per case:
  ours        flash_kda.fwd(..., out, ..., final_state=...) as users call it (workspace allocated
              inside from PyTorch's caching allocator)
  ours+ws     the same with a preallocated caller workspace
  graph       kernel-only time: --graph-calls calls captured in one CUDA graph, replay time / calls
  FLA         fla.ops.kda.chunk_kda with FLA_FLASH_KDA=0 (its Triton kernels), measured in this
              run for --fla-cases (FLA autotunes on first use of each shape: minutes on a fresh
              machine); otherwise the anchor from cases.json, marked '*'
FlashKDA (upstream) times come from cases.json (same GPU model). Prints a markdown table; --json and
--md write the results (the .md is the BENCHMARK_H200.md body: date, commit, command, table).

  python benchmarks/bench_python.py [--cases cases.json] [--fla-cases prefill|all|none|NAME ...]
                                    [--fla-dir DIR] [--only NAME ...] [--json out.json] [--md out.md]
JSON: {"meta": {...}, "cases": [{name, group, ours_ms, ours_ws_ms, graph_ms, fla_ms_measured, ...}]}
"""
import argparse
import datetime
import json
import math
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUPS = ("prefill", "prefill_small_heads")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases_pos", nargs="?", metavar="cases.json", help="same as --cases")
    p.add_argument("--cases", help="cases.json (default: .gpu_data/cases.json, copied there by "
                                   "scripts/prepare_gpu_data.sh --shared DIR)")
    p.add_argument("--groups", default=",".join(GROUPS), help="case groups to run (comma-separated)")
    p.add_argument("--only", nargs="+", default=[], help="only these case names (space or comma separated)")
    p.add_argument("--fla-cases", nargs="+", default=["prefill"],
                   help="cases to time FLA on: group names ('prefill'), 'all', 'none' or case names "
                        "(space or comma separated); FLA autotunes each new shape for a while")
    p.add_argument("--fla-dir", help="folder holding FLA's fla/ package (default: FLASH_KDA_FLA_DIR, .gpu_data)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--graph-calls", type=int, default=20, help="calls per captured graph (0: no graph timing)")
    p.add_argument("--json", help="write results as JSON to this path")
    p.add_argument("--md", help="write the markdown report to this path")
    return p.parse_args()


def find_cases_file(arg):
    for path in (arg, os.path.join(_REPO, ".gpu_data", "cases.json")):
        if path and os.path.isfile(path):
            return os.path.abspath(path)
    sys.exit("cases.json not found: pass its path (or run scripts/prepare_gpu_data.sh --shared DIR)")


def import_fla(fla_dir):
    """fla.ops.kda.chunk_kda or None, with the FLA source folder from --fla-dir, FLASH_KDA_FLA_DIR, .gpu_data."""
    os.environ["FLA_FLASH_KDA"] = "0"  # FLA's own Triton kernels, never our backend
    for d in (fla_dir, os.environ.get("FLASH_KDA_FLA_DIR"), os.path.join(_REPO, ".gpu_data")):
        if d and os.path.isdir(os.path.join(d, "fla")) and d not in sys.path:
            sys.path.insert(0, d)
            break
    try:
        import fla
        from fla.ops.kda import chunk_kda
        return chunk_kda, getattr(fla, "__version__", "?")
    except Exception as exc:  # noqa: BLE001
        print(f"# FLA not available ({type(exc).__name__}: {exc}); FLA columns use the cases.json anchors")
        return None, None


def make_inputs(torch, case, K=128):
    dev, bf = "cuda", torch.bfloat16
    lens, H = case["seq_lens"], case["H"]
    if len(lens) > 1:
        B, T = 1, sum(lens)
        cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int64, device=dev)
        N = len(lens)
    else:
        B, T, cu = case.get("B", 1), lens[0], None
        N = B
    d = {n: torch.randn(B, T, H, K, dtype=bf, device=dev) for n in ("q", "k", "v", "g")}
    d.update(beta=torch.randn(B, T, H, dtype=bf, device=dev),
             A_log=torch.rand(H, dtype=torch.float32, device=dev),
             dt_bias=torch.rand(H, K, dtype=torch.float32, device=dev),
             h0=torch.randn(N, H, K, K, dtype=torch.float32, device=dev),
             ht=torch.empty(N, H, K, K, dtype=torch.float32, device=dev),
             cu=cu, scale=1.0 / math.sqrt(K))
    d["out"] = torch.empty_like(d["v"])
    return d


def time_eager(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def time_graph(torch, fn, calls, replays=10):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return time_eager(torch, graph.replay, 2, replays) / calls


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def fmt(x, digits=3):
    return "—" if x is None else f"{x:.{digits}f}"


def run_case(torch, flash_kda, fla_chunk, group, case, args, measure_fla):
    d = make_inputs(torch, case)
    q, k, v, g, beta = d["q"], d["k"], d["v"], d["g"], d["beta"]

    def ours(ws=None):
        flash_kda.fwd(q, k, v, g, beta, d["scale"], d["out"], d["A_log"], d["dt_bias"], -5.0,
                      initial_state=d["h0"], final_state=d["ht"], cu_seqlens=d["cu"], workspace=ws)

    size = flash_kda.get_workspace_size(q, k, v, g, beta, d["A_log"], d["dt_bias"], -5.0, d["h0"], d["ht"], d["cu"])
    ws = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")
    r = {"group": group, "name": case["name"], "seq_lens": case["seq_lens"], "B": case.get("B", 1),
         "H": case["H"], "floor_ms": case.get("floor_ms"), "flashkda_ms": case.get("flashkda_ms"),
         "fla_anchor_ms": case.get("fla_ms"), "workspace_bytes": size}
    r["ours_ms"] = time_eager(torch, ours, args.warmup, args.iters)
    r["ours_ws_ms"] = time_eager(torch, lambda: ours(ws), args.warmup, args.iters)
    r["graph_ms"] = time_graph(torch, lambda: ours(ws), args.graph_calls) if args.graph_calls > 0 else None
    r["fla_ms"] = r["fla_rel_diff_out"] = None
    if measure_fla and fla_chunk is not None:
        try:
            measure_fla_case(torch, fla_chunk, d, r, ours, args)
        except Exception as exc:  # noqa: BLE001  (FLA failing must not lose our numbers)
            r["fla_error"] = f"{type(exc).__name__}: {exc}"
            print(f"# FLA failed on {case['name']}: {r['fla_error']}")
    fla_ref = r["fla_ms"] if r["fla_ms"] is not None else r["fla_anchor_ms"]

    best = r["ours_ms"]
    r["x_floor"] = best / r["floor_ms"] if r["floor_ms"] else None
    r["speedup_vs_flashkda"] = r["flashkda_ms"] / best if r["flashkda_ms"] else None
    r["speedup_vs_fla"] = fla_ref / best if fla_ref else None
    r["fla_measured"] = r["fla_ms"] is not None
    r["fla_ms_measured"] = r["fla_ms"]
    return r


def measure_fla_case(torch, fla_chunk, d, r, ours, args):
    def fla():
        return fla_chunk(d["q"], d["k"], d["v"], d["g"], d["beta"], scale=d["scale"], initial_state=d["h0"],
                         output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                         use_beta_sigmoid_in_kernel=True, safe_gate=True, lower_bound=-5.0, state_v_first=True,
                         cu_seqlens=d["cu"], A_log=d["A_log"], dt_bias=d["dt_bias"])
    r["fla_ms"] = time_eager(torch, fla, args.warmup, args.iters)
    o_fla, _ = fla()
    ours()
    r["fla_rel_diff_out"] = rel_l2(d["out"], o_fla)


def times(x):
    return "—" if x is None else f"{x:.2f}x"


def markdown(results):
    cols = ["case", "floor ms", "ours ms", "ours+ws ms", "graph ms", "x floor", "FlashKDA ms", "vs FlashKDA",
            "FLA ms", "vs FLA", "out diff vs FLA"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    group = None
    for r in results:
        if r["group"] != group:
            group = r["group"]
            lines.append(f"| **{group}** |" + " |" * (len(cols) - 1))
        fla = r["fla_ms"] if r["fla_measured"] else r["fla_anchor_ms"]
        fla_s = fmt(fla) + ("" if r["fla_measured"] or fla is None else "*")
        diff = r["fla_rel_diff_out"]
        cells = [r["name"], fmt(r["floor_ms"], 4), fmt(r["ours_ms"]), fmt(r["ours_ws_ms"]), fmt(r["graph_ms"]),
                 fmt(r["x_floor"], 1), fmt(r["flashkda_ms"]), times(r["speedup_vs_flashkda"]), fla_s,
                 times(r["speedup_vs_fla"]), "—" if diff is None else f"{diff:.1e}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    args = parse_args()
    import torch
    import flash_kda
    cases_path = find_cases_file(args.cases or args.cases_pos)
    with open(cases_path) as f:
        cases = json.load(f)
    only = {n for arg in args.only for n in arg.split(",") if n}
    fla_names = {n for arg in args.fla_cases for n in arg.split(",") if n}
    fla_chunk, fla_version = import_fla(args.fla_dir) if fla_names - {"none"} else (None, None)
    info = flash_kda.build_info()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "flash_kda": info,
            "fla_version": fla_version, "cases_file": cases_path,
            "protocol": f"median of {args.iters} eager calls after {args.warmup} warm-up, CUDA events"}
    print(f"# {meta['date']}  commit {info.get('commit')}  {meta['gpu']}  torch {meta['torch']}  FLA {fla_version}")
    results, failed = [], []
    with torch.inference_mode():
        for group in [g for g in args.groups.split(",") if g]:
            for case in cases.get(group, []):
                if only and case["name"] not in only:
                    continue
                measure_fla = ("all" in fla_names or group in fla_names or case["name"] in fla_names)
                try:
                    r = run_case(torch, flash_kda, fla_chunk, group, case, args, measure_fla)
                except Exception as exc:  # noqa: BLE001  (report the case, go on with the others)
                    failed.append({"group": group, "name": case["name"], "error": f"{type(exc).__name__}: {exc}"})
                    print(f"{group:20s} {case['name']:22s} FAILED {failed[-1]['error']}", flush=True)
                    torch.cuda.empty_cache()
                    continue
                print(f"{group:20s} {r['name']:22s} ours {r['ours_ms']:.3f} ms  +ws {r['ours_ws_ms']:.3f}  "
                      f"graph {fmt(r['graph_ms'])}  FLA {fmt(r['fla_ms'])}", flush=True)
                results.append(r)
                torch.cuda.empty_cache()
    table = markdown(results)
    print("\n" + table + "\n\n* FLA anchor from cases.json (not measured in this run)")
    for f_ in failed:
        print(f"FAILED {f_['group']}/{f_['name']}: {f_['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "cases": results, "failed": failed}, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(f"# FlashKDA on {meta['gpu']}\n\nGenerated by `benchmarks/bench_python.py` on {meta['date']}, "
                    f"commit `{info.get('commit')}`, torch {meta['torch']}, CUDA {info.get('cuda_version')}, "
                    f"archs {info.get('architectures')}, FLA {fla_version}.\n\nCommand: `{meta['command']}`\n\n"
                    f"Protocol: {meta['protocol']}; inputs as shared/docs/spec.md section 7. FlashKDA times are "
                    f"the anchors of {os.path.basename(cases_path)}; FLA marked * likewise.\n\n{table}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
