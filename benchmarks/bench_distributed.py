#!/usr/bin/env python3
"""Scaling of flash_kda.distributed: one GPU against R GPUs on the same call shape, in one run.

    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node=2 benchmarks/bench_distributed.py \\
        [--T 262144 1048576] [--H 8] [--iters 10] [--json bench_distributed.json]
(scripts/run_distributed.sh sets the environment.) Protocol (spec section 7): B = 1, random normal
bf16 q/k/v/g/beta (the same on every rank: a CUDA generator with a fixed seed), A_log and dt_bias
U[0,1), fp32 initial and final state, lower_bound -5, scale 1/sqrt(128). Per T:

  1 GPU   flash_kda.fwd on the whole sequence, as users call it (eager; every rank runs it on its
          own GPU at once; rank 0's median is reported)
  R GPUs  flash_kda.distributed.fwd, each rank on its T/R tokens (method "auto", then "exact"):
          ranks meet at a barrier, each times its call with CUDA events; the call's time is the
          slowest rank's; median over iterations. Stages from the driver's events: transition
          (preparation + (D, M)), exchange (the all-gather, including any wait for the other ranks),
          combine, forward, final states (broadcast)
  NCCL    all_gather_into_tensor of the same [HV, V + K, K] fp32 blocks alone (median of 50)

Also the relative L2 difference of the R-GPU output and final state from the 1-GPU ones. Rank 0
prints a table and writes JSON: {"meta": {...}, "rows": [{T, H, ranks, method, ms, ...}]}
(scripts/make_distributed_md.py turns it into BENCHMARK_CP_H200.md).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (read at NCCL init)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

K = 128


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", type=int, nargs="+", default=[262144, 1048576])
    p.add_argument("--H", type=int, default=8)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--methods", nargs="+", default=["auto", "exact"])
    p.add_argument("--json", help="write the results here (rank 0)")
    p.add_argument("--commit", help="commit to record (default: git rev-parse in this checkout)")
    return p.parse_args()


def make_inputs(T, H, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    bf = torch.bfloat16

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    d = {name: randn(1, T, H, K).to(bf) for name in ("q", "k", "v", "g")}
    d["beta"] = randn(1, T, H).to(bf)
    d["A_log"] = torch.rand(H, generator=gen, device=device)
    d["dt_bias"] = torch.rand(H, K, generator=gen, device=device)
    d["h0"] = randn(1, H, K, K)
    return d


def timed(fn, iters, warmup, sync_ranks):
    """Median ms of fn() over iters (after warmup), each call between CUDA events; with sync_ranks
    the ranks meet first and the slowest rank's time counts."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        if sync_ranks:
            dist.barrier()
            torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        extra = fn()
        b.record()
        torch.cuda.synchronize()
        row = [a.elapsed_time(b)] + (extra or [])
        if sync_ranks:
            t = torch.tensor(row, device="cuda", dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            row = t.tolist()
        times.append(row)
    return [statistics.median(col) for col in zip(*times)]


def stage_times(timing):
    """ms between consecutive stage events of flash_kda.distributed.fwd's _timing list."""
    return [timing[i][1].elapsed_time(timing[i + 1][1]) for i in range(len(timing) - 1)]


def rel_l2(x, ref):
    s = torch.stack([((x.double() - ref.double()) ** 2).sum(), (ref.double() ** 2).sum()])
    dist.all_reduce(s)
    return (s[0] / s[1]).sqrt().item()


def main():
    a = parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)  # before NCCL starts: its communicator uses the current device
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", local)
    import flash_kda
    rows = []
    H = a.H
    for T in a.T:
        iters = a.iters
        d = make_inputs(T, H, dev, seed=T)
        out1 = torch.empty_like(d["v"])
        fs1 = torch.empty(1, H, K, K, device=dev)

        def single():
            flash_kda.fwd(d["q"], d["k"], d["v"], d["g"], d["beta"], K ** -0.5, out1, d["A_log"], d["dt_bias"], -5.0,
                          initial_state=d["h0"], final_state=fs1)

        ms1 = timed(single, iters, a.warmup, sync_ranks=False)[0]
        ms1_all = torch.tensor([ms1], device=dev, dtype=torch.float64)
        gathered = [torch.zeros_like(ms1_all) for _ in range(world)]
        dist.all_gather(gathered, ms1_all)
        rows.append(dict(T=T, H=H, ranks=1, method="-", ms=ms1, ms_per_rank=[g.item() for g in gathered]))

        # This rank's shard (contiguous copies), as a training or serving stack would hold it.
        Tr = T // world
        lo, hi = rank * Tr, (rank + 1) * Tr if rank + 1 < world else T
        s = {n: d[n][:, lo:hi].contiguous() for n in ("q", "k", "v", "g", "beta")}
        sizes = None if T % world == 0 else [Tr] * (world - 1) + [T - Tr * (world - 1)]
        for method in a.methods:
            stages = []

            def sharded():
                stages.clear()
                out, fs = flash_kda.distributed.fwd(s["q"], s["k"], s["v"], s["g"], s["beta"], K ** -0.5, d["A_log"],
                                                    d["dt_bias"], -5.0, initial_state=d["h0"],
                                                    output_final_state=True, shard_sizes=sizes, method=method,
                                                    _timing=stages)
                sharded.result = (out, fs)
                return None

            ms = timed(sharded, iters, a.warmup, sync_ranks=True)[0]
            # Stage times of the last call, per rank (max over ranks and min: the exchange on the rank
            # that arrives last is the transfer itself; on the others it includes the wait).
            torch.cuda.synchronize()
            st = torch.tensor(stage_times(stages), device=dev, dtype=torch.float64)
            st_max, st_min = st.clone(), st.clone()
            dist.all_reduce(st_max, op=dist.ReduceOp.MAX)
            dist.all_reduce(st_min, op=dist.ReduceOp.MIN)
            names = [n for n, _ in stages[1:]]
            out, fs = sharded.result
            out_err = rel_l2(out, out1[:, lo:hi])
            state_err = (fs.double() - fs1.double()).norm().item() / fs1.double().norm().item()
            rows.append(dict(T=T, H=H, ranks=world, method=method, ms=ms, speedup=ms1 / ms,
                             stages_max={n: v for n, v in zip(names, st_max.tolist())},
                             stages_min={n: v for n, v in zip(names, st_min.tolist())},
                             out_err_vs_1gpu=out_err, state_err_vs_1gpu=state_err))
            del out, fs
            sharded.result = None

        # The exchange alone: the same blocks through NCCL.
        send = torch.empty(1, H, 2 * K, K, device=dev)
        recv = torch.empty(world, H, 2 * K, K, device=dev)
        ex = timed(lambda: dist.all_gather_into_tensor(recv, send), 50, 5, sync_ranks=True)[0]
        for r in rows:
            if r["T"] == T and r["ranks"] == world:
                r["exchange_alone_ms"] = ex
                r["exchange_alone_frac"] = ex / r["ms"]
                r["exchange_in_call_ms"] = r["stages_min"].get("exchange")
        del d, s, out1
        torch.cuda.empty_cache()

    if rank == 0:
        print(f"# flash_kda.distributed, {world} ranks, {torch.cuda.get_device_name()}")
        print("| T | H | ranks | method | ms | speedup | exchange alone ms (% of call) | out vs 1 GPU | state vs 1 GPU |")
        print("|---:|---:|---:|---|---:|---:|---:|---:|---:|")
        for r in rows:
            if r["ranks"] == 1:
                print(f"| {r['T']} | {r['H']} | 1 | – | {r['ms']:.3f} | 1.00× | – | – | – |")
            else:
                print(f"| {r['T']} | {r['H']} | {r['ranks']} | {r['method']} | {r['ms']:.3f} | {r['speedup']:.2f}× | "
                      f"{r['exchange_alone_ms']:.3f} ({100 * r['exchange_alone_frac']:.1f}%) | "
                      f"{r['out_err_vs_1gpu']:.2e} | {r['state_err_vs_1gpu']:.2e} |")
                print(f"#   stages (max over ranks, ms): {json.dumps({k: round(v, 3) for k, v in r['stages_max'].items()})}")
        if a.json:
            commit = a.commit
            if not commit:
                try:
                    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
                except OSError:
                    commit = "?"
            nccl = torch.cuda.nccl.version()
            meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                        commit=commit or "?", device=torch.cuda.get_device_name(), world_size=world,
                        torch=torch.__version__, nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
                        flash_kda=flash_kda.build_info().get("version"), command=" ".join(sys.argv),
                        nccl_nvls_enable=os.environ.get("NCCL_NVLS_ENABLE"), iters=a.iters)
            with open(a.json, "w") as f:
                json.dump(dict(meta=meta, rows=rows), f, indent=1)
            print(f"wrote {a.json}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
