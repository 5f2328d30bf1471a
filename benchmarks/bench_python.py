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

Group `decode` (benchmarks/bench_decode.cu has the same cases): one token per sequence over an fp32
state pool ([N] slot indices, in place), a bf16-pool twin of each, and verify steps of 4 tokens
([N, 4] indices with num_accepted_tokens). Ours: flash_kda.decode(..., out=...) as users call it;
FLA: fla.ops.kda.fused_recurrent.fused_recurrent_kda_fwd with ssm_state_indices and
inplace_final_state=True (what serving stacks call), measured in this run whenever FLA imports.
Both: eager (CUDA events around the Python call) and graph (--graph-calls calls per CUDA graph,
replay time / calls); the pool holds several slot sets rotated call by call when one call's states
would fit in L2.

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
GROUPS = ("prefill", "prefill_small_heads", "decode")


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


def import_fla_decode():
    """FLA's fused_recurrent_kda_fwd (the function serving stacks call), or None."""
    try:
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd
        return fused_recurrent_kda_fwd
    except Exception as exc:  # noqa: BLE001
        print(f"# FLA fused_recurrent_kda not available ({type(exc).__name__}: {exc})")
        return None


def decode_cases(cases):
    """The decode group of cases.json, a bf16-pool twin of each, verify steps of 4 tokens and the
    decode case each verify case is compared with per token (as benchmarks/bench_decode.cu)."""
    out = [dict(c, T=1, pool="f32") for c in cases.get("decode", [])]
    out += [dict(c, name=c["name"] + "_bf16", T=1, pool="bf16", fla_us=None, fla_graph_us=None)
            for c in cases.get("decode", [])]
    out += [dict(name=f"verify4_B{B}_H{H}", B=B, H=H, T=4, pool="f32") for B in (32, 256) for H in (8, 32)]
    out.append(dict(name="decode_B32_H32", B=32, H=32, T=1, pool="f32"))
    return out


def run_decode_case(torch, flash_kda, fla_fwd, case, args):
    dev, bf = "cuda", torch.bfloat16
    B, H, T = case["B"], case["H"], case["T"]
    cols, K = T, 128
    pool_dtype = torch.float32 if case["pool"] == "f32" else bf
    state_bytes = B * H * K * K * (4 if case["pool"] == "f32" else 2) * cols
    sets = min(8, max(1, (256 << 20) // state_bytes + 1))
    slots = B * cols * sets
    d = {n: torch.randn(B, T, H, K, dtype=bf, device=dev) for n in ("q", "k", "v", "g")}
    beta = torch.randn(B, T, H, dtype=bf, device=dev)
    A_log = torch.rand(H, dtype=torch.float32, device=dev)
    dt_bias = torch.rand(H, K, dtype=torch.float32, device=dev)
    pool = torch.randn(slots, H, K, K, device=dev).to(pool_dtype)
    pool_fla = pool.clone()
    perm = torch.randperm(slots, device=dev).to(torch.int32)
    idx = [perm[s * B * cols:(s + 1) * B * cols].view(B, cols) if T > 1 else perm[s * B:(s + 1) * B]
           for s in range(sets)]
    acc = torch.full((B,), T, dtype=torch.int32, device=dev) if T > 1 else None
    out, out_fla = torch.empty_like(d["v"]), torch.empty_like(d["v"])
    scale = 1.0 / math.sqrt(K)
    counter = [0]

    def ours():
        i = counter[0] = counter[0] + 1
        flash_kda.decode(d["q"], d["k"], d["v"], d["g"], beta, pool, idx[i % sets], out=out, scale=scale,
                         A_log=A_log, dt_bias=dt_bias, lower_bound=-5.0, num_accepted_tokens=acc)

    def fla():
        i = counter[0] = counter[0] + 1
        fla_fwd(q=d["q"], k=d["k"], v=d["v"], g=d["g"], beta=beta, A_log=A_log, dt_bias=dt_bias, scale=scale,
                initial_state=pool_fla, inplace_final_state=True, state_v_first=True,
                ssm_state_indices=idx[i % sets], num_accepted_tokens=acc, use_qk_l2norm_in_kernel=True,
                use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=-5.0, out=out_fla)

    floor_us = state_bytes / cols * (2 if T == 1 else 1 + T) / 4.27e12 * 1e6
    r = {"group": "decode", "name": case["name"], "B": B, "H": H, "T": T, "pool": case["pool"], "input_sets": sets,
         "floor_us": floor_us, "fla_anchor_us": case.get("fla_us"), "fla_anchor_graph_us": case.get("fla_graph_us")}
    r["ours_us"] = time_eager(torch, ours, args.warmup, args.iters) * 1e3
    r["ours_graph_us"] = time_graph(torch, ours, args.graph_calls) * 1e3 if args.graph_calls > 0 else None
    r["fla_us"] = r["fla_graph_us"] = r["fla_rel_diff_out"] = None
    if fla_fwd is not None:
        try:
            r["fla_us"] = time_eager(torch, fla, args.warmup, args.iters) * 1e3
            r["fla_graph_us"] = time_graph(torch, fla, args.graph_calls) * 1e3 if args.graph_calls > 0 else None
            pool_fla.copy_(pool)  # the same states, the same call: outputs and states compared
            counter[0] = 0
            ours()
            counter[0] = 0
            fla()
            torch.cuda.synchronize()
            r["fla_rel_diff_out"] = rel_l2(out, out_fla)
            r["fla_rel_diff_pool"] = rel_l2(pool, pool_fla)
        except Exception as exc:  # noqa: BLE001  (FLA failing must not lose our numbers)
            r["fla_error"] = f"{type(exc).__name__}: {exc}"
            print(f"# FLA failed on {case['name']}: {r['fla_error']}")
    return r


def decode_markdown(rows):
    cols = ["case", "pool", "tokens", "floor µs", "ours µs", "ours graph µs", "FLA µs", "FLA graph µs",
            "vs FLA (graph)", "out diff vs FLA", "state diff vs FLA"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        def f(x, d=2):
            return "—" if x is None else f"{x:.{d}f}"
        ratio = (f"{r['fla_graph_us'] / r['ours_graph_us']:.2f}x" if r.get("fla_graph_us") and r.get("ours_graph_us")
                 else "—")
        dd = [r.get("fla_rel_diff_out"), r.get("fla_rel_diff_pool")]
        lines.append("| " + " | ".join([r["name"], r["pool"], str(r["T"]), f(r["floor_us"]), f(r["ours_us"], 1),
                                         f(r["ours_graph_us"]), f(r["fla_us"], 1), f(r["fla_graph_us"]), ratio] +
                                        ["—" if x is None else f"{x:.1e}" for x in dd]) + " |")
    return "\n".join(lines)


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
    fla_decode = import_fla_decode() if "decode" in args.groups.split(",") and fla_names != {"none"} else None
    with torch.inference_mode():
        for group in [g for g in args.groups.split(",") if g]:
            if group == "decode":
                for case in decode_cases(cases):
                    if only and case["name"] not in only:
                        continue
                    try:
                        r = run_decode_case(torch, flash_kda, fla_decode, case, args)
                    except Exception as exc:  # noqa: BLE001
                        failed.append({"group": group, "name": case["name"], "error": f"{type(exc).__name__}: {exc}"})
                        print(f"{group:20s} {case['name']:22s} FAILED {failed[-1]['error']}", flush=True)
                        continue
                    print(f"{group:20s} {r['name']:22s} ours {r['ours_us']:.1f} us  "
                          f"graph {fmt(r['ours_graph_us'], 2)}  FLA {fmt(r['fla_us'], 1)}  "
                          f"graph {fmt(r['fla_graph_us'], 2)}", flush=True)
                    results.append(r)
                    torch.cuda.empty_cache()
                continue
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
    table = markdown([r for r in results if r["group"] != "decode"])
    decode_rows = [r for r in results if r["group"] == "decode"]
    if decode_rows:
        table += "\n\nDecode (µs):\n\n" + decode_markdown(decode_rows)
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
