#!/usr/bin/env python3
"""Host overhead of one eager flash_kda.fwd call, on a small case where it matters.

Case (default): B=1, T=512, H=32, K=V=128, bf16 q/k/v/g/beta, fp32 A_log [H] and dt_bias [H, K],
fp32 initial and final state, bounded gate (lower_bound -5), scale 1/sqrt(128), workspace
allocated inside (as users call it); run under torch.inference_mode() (as FLA calls it) unless
--mode says otherwise. Paths timed, interleaved over --rounds rounds:

  fwd              flash_kda.fwd as users call it (the eager fast path when it takes the call)
  fwd_general      flash_kda._ops._fwd_general: the implementation before the fast path (Python
                   checks and copies + torch.ops.flash_kda.fwd)
  torch_ops        torch.ops.flash_kda.fwd.default alone (the dispatcher, no Python checks)
  fast_path_only   flash_kda._C._fwd_eager alone (the fast path's C++ entry, no Python wrapper)

Numbers per path (medians):
  host us/call     wall time of --calls back-to-back calls / --calls, torch.cuda.synchronize()
                   only before the calls and after the timing: the host time of one call while the
                   GPU works behind it (the launch queue never fills at these counts)
  +sync us/call    the same batch timed up to the end of the synchronize: max(host, GPU) per call
  event ms         CUDA events around each call (benchmarks/bench_python.py's protocol, its
                   "ours ms" column): host time before the first launch + kernel time
and the kernel time alone: --graph-calls calls captured in one CUDA graph (caller workspace),
replay time / calls. Also checks that every path writes the same out and final state.

  python3 benchmarks/bench_overhead.py [--B 1 --T 512 --H 32] [--mode inference|no_grad|grad]
                                       [--rounds 3 --batches 200 --calls 20 --iters 300] [--json out.json]
Needs only torch and flash_kda (pip install --no-build-isolation --no-deps . first).
"""
import argparse
import gc
import json
import math
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--B", type=int, default=1)
    p.add_argument("--T", type=int, default=512)
    p.add_argument("--H", type=int, default=32)
    p.add_argument("--mode", choices=("inference", "no_grad", "grad"), default="inference",
                   help="autograd mode around the calls (default: torch.inference_mode(), as FLA)")
    p.add_argument("--warmup", type=int, default=50, help="calls of each path before timing")
    p.add_argument("--rounds", type=int, default=3, help="rounds over all paths (medians are taken over rounds)")
    p.add_argument("--batches", type=int, default=200, help="batches of back-to-back calls per path and round")
    p.add_argument("--calls", type=int, default=20, help="back-to-back calls per batch")
    p.add_argument("--iters", type=int, default=300, help="calls timed with CUDA events per path and round")
    p.add_argument("--graph-calls", type=int, default=20, help="calls per captured CUDA graph (0: skip)")
    p.add_argument("--json", help="write the results as JSON to this path")
    return p.parse_args()


def make_inputs(torch, B, T, H, K=128):
    dev, bf = "cuda", torch.bfloat16
    d = {n: torch.randn(B, T, H, K, dtype=bf, device=dev) for n in ("q", "k", "v", "g")}
    d.update(beta=torch.randn(B, T, H, dtype=bf, device=dev),
             A_log=torch.rand(H, dtype=torch.float32, device=dev),
             dt_bias=torch.rand(H, K, dtype=torch.float32, device=dev),
             h0=torch.randn(B, H, K, K, dtype=torch.float32, device=dev),
             ht=torch.empty(B, H, K, K, dtype=torch.float32, device=dev),
             scale=1.0 / math.sqrt(K))
    d["out"] = torch.empty_like(d["v"])
    return d


def paths(torch, flash_kda, d):
    """name -> zero-argument callable doing the same forward pass (out and ht written)."""
    from flash_kda import _ops
    q, k, v, g, beta, out, A_log, dt_bias, h0, ht, scale = (d[n] for n in (
        "q", "k", "v", "g", "beta", "out", "A_log", "dt_bias", "h0", "ht", "scale"))
    fwd, general, op = flash_kda.fwd, _ops._fwd_general, torch.ops.flash_kda.fwd.default
    result = {
        "fwd": lambda: fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, -5.0, initial_state=h0, final_state=ht),
        "fwd_general": lambda: general(q, k, v, g, beta, scale, out, A_log, dt_bias, -5.0, initial_state=h0,
                                       final_state=ht),
        "torch_ops": lambda: op(q, k, v, g, beta, scale, out, A_log, dt_bias, -5.0, h0, ht, None, None,
                                True, True, True, False, False),
    }
    eager = getattr(_ops._C, "_fwd_eager", None)
    if eager is not None:
        result["fast_path_only"] = lambda: eager(q, k, v, g, beta, scale, out, A_log, dt_bias, -5.0, h0, ht, None,
                                                 None, True, True, True, False, False)
    return result


def time_batches(torch, fn, batches, calls):
    """(host us/call, host+sync us/call): medians over batches of back-to-back calls."""
    host, synced = [], []
    clock = time.perf_counter
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = clock()
        for _ in range(calls):
            fn()
        t1 = clock()
        torch.cuda.synchronize()
        t2 = clock()
        host.append((t1 - t0) / calls * 1e6)
        synced.append((t2 - t0) / calls * 1e6)
    return statistics.median(host), statistics.median(synced)


def time_events(torch, fn, iters):
    """Median ms between CUDA events recorded just before and after each call."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    torch.cuda.synchronize()
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def time_graph(torch, flash_kda, d, calls, replays=20):
    """Kernel-only ms per call: `calls` calls (caller workspace) captured in one CUDA graph."""
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias")
    size = flash_kda.get_workspace_size(*[d[n] for n in names], -5.0, d["h0"], d["ht"])
    ws = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")

    def run():
        flash_kda.fwd(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], d["out"], d["A_log"], d["dt_bias"],
                      -5.0, initial_state=d["h0"], final_state=d["ht"], workspace=ws)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            run()
    graph.replay()
    return time_events(torch, graph.replay, replays) / calls


def main():
    args = parse_args()
    import torch
    import flash_kda
    from flash_kda import _ops

    mode = {"inference": torch.inference_mode, "no_grad": torch.no_grad, "grad": torch.enable_grad}[args.mode]
    info = flash_kda.build_info()
    print(f"# flash_kda {info.get('version')}  torch {torch.__version__}  {torch.cuda.get_device_name()}")
    print(f"# case B={args.B} T={args.T} H={args.H} K=V=128, fp32 states, bounded gate; mode {args.mode}; "
          f"{args.batches} batches x {args.calls} calls, {args.iters} event-timed calls, {args.rounds} rounds")
    results = {"meta": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "flash_kda": info,
                        "args": vars(args)}, "paths": {}}
    with mode():
        d = make_inputs(torch, args.B, args.T, args.H)
        fns = paths(torch, flash_kda, d)
        eager = getattr(_ops._C, "_fwd_eager", None)
        if eager is None:
            print("# flash_kda._C has no _fwd_eager (built without the fast path): fwd is the general path")
        elif _ops._fwd_eager is None:
            print("# FLASH_KDA_EAGER_FAST_PATH=0: fwd is the general path")
        else:
            taken = fns["fast_path_only"]() is None
            print(f"# eager fast path {'taken' if taken else 'DECLINED (fwd runs the general path)'} for this call")
            results["meta"]["fast_path_taken"] = taken

        # Same results from every path.
        ref = None
        for name, fn in fns.items():
            d["out"].fill_(float("nan"))
            d["ht"].fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            got = (d["out"].clone(), d["ht"].clone())
            if ref is None:
                ref = got
            elif not (torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])):
                print(f"# WARNING: {name} writes other values than {next(iter(fns))}")
                results["meta"].setdefault("mismatch", []).append(name)

        for fn in fns.values():
            for _ in range(args.warmup):
                fn()
        torch.cuda.synchronize()

        rows = {name: {"host_us": [], "sync_us": [], "event_ms": []} for name in fns}
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    host, synced = time_batches(torch, fn, args.batches, args.calls)
                    rows[name]["host_us"].append(host)
                    rows[name]["sync_us"].append(synced)
                    rows[name]["event_ms"].append(time_events(torch, fn, args.iters))
        finally:
            if gc_was_enabled:
                gc.enable()
        graph_ms = None
        if args.graph_calls > 0:
            try:
                graph_ms = time_graph(torch, flash_kda, d, args.graph_calls)
            except Exception as exc:  # noqa: BLE001  (the eager numbers are the point)
                print(f"# CUDA-graph timing failed: {type(exc).__name__}: {exc}")

    print(f"\n{'path':16s} {'host us/call':>13s} {'+sync us/call':>14s} {'event ms':>9s}")
    for name, r in rows.items():
        summary = {key: statistics.median(vals) for key, vals in r.items()}
        results["paths"][name] = dict(summary, rounds=r)
        print(f"{name:16s} {summary['host_us']:13.1f} {summary['sync_us']:14.1f} {summary['event_ms']:9.4f}")
    if graph_ms is not None:
        results["kernel_ms_graph"] = graph_ms
        print(f"kernels alone (CUDA graph of {args.graph_calls} calls): {graph_ms:.4f} ms/call")
    p = results["paths"]
    if "fwd" in p and "fwd_general" in p:
        saved = p["fwd_general"]["host_us"] - p["fwd"]["host_us"]
        print(f"\nfwd vs the previous implementation (fwd_general): host {p['fwd_general']['host_us']:.1f} -> "
              f"{p['fwd']['host_us']:.1f} us/call ({saved:.1f} us saved), event {p['fwd_general']['event_ms']:.4f} "
              f"-> {p['fwd']['event_ms']:.4f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if results["meta"].get("mismatch") else 0


if __name__ == "__main__":
    sys.exit(main())
