"""Worker of tests/python/test_distributed.py: one process per GPU, NCCL, every case in one run.

Each rank builds the same full inputs (CPU generator, then its GPU), runs flash_kda.fwd on them
(the single-GPU result) and flash_kda.distributed.fwd on its token shard, and measures its shard's
share of the errors (sums of squares, all-reduced into relative L2 norms over the whole output)
against the single-GPU result and against the float64 reference (the golden file's, or
_kda_utils.reference_kda). Rank 0 writes {case: {...}} as JSON.
"""
import datetime
import json
import os

import torch
import torch.distributed as dist

import _kda_utils as U

K = 128


def cases():
    """Golden-like inputs (spec section 7's protocol, golden cases): fixed and packed batches, with
    and without initial state, the softplus gate, GVA, long memory, uneven shards, the exact method."""
    c = [
        dict(name="fixed_T4096_H4", B=1, T=4096, H=4, init=True, seed=1),
        dict(name="fixed_B2_no_initial_state", B=2, T=2048, H=2, init=False, seed=2),
        dict(name="fixed_softplus", B=1, T=2048, H=2, init=True, lower_bound=None, seed=3),
        dict(name="fixed_gva_H1_HV4", B=1, T=1536, H=1, HV=4, init=True, seed=4),
        dict(name="fixed_bf16_initial_state", B=1, T=1024, H=2, init="bf16", seed=5),
        dict(name="fixed_long_memory", B=1, T=2048, H=2, init=True, slow=True, seed=6),
        dict(name="fixed_exact_method", B=1, T=2048, H=2, init=True, method="exact", seed=7),
        dict(name="fixed_uneven_shards", B=1, T=3000, H=2, init=True, shard_sizes=[1000, 2000], seed=8),
        dict(name="varlen_crossing", seqlens=[300, 1700, 50, 0, 1998], H=2, init=True, seed=9),
        dict(name="varlen_no_initial_state", seqlens=[1000, 1000, 48], H=2, init=False, seed=10),
        dict(name="varlen_softplus_gva", seqlens=[17, 2000, 31], H=1, HV=2, init=True, lower_bound=None, seed=11),
        dict(name="varlen_one_long_sequence", seqlens=[4096], H=2, init=True, seed=12),
        dict(name="varlen_boundary_on_sequence_end", seqlens=[500, 500], H=2, init=True, seed=13),
        dict(name="varlen_owner_final_states", seqlens=[100, 900, 1000], H=2, init=True, seed=14,
             final_state_on="owner"),
    ]
    for g in ("medium", "softplus_gate", "gva", "long_memory", "varlen_edges", "batched_state"):
        c.append(dict(name=f"golden_{g}", golden=g))
    return c


def _inputs(case, device):
    """Full inputs on `device` (identical on every rank) and the call's options."""
    if "golden" in case:
        meta, a = U.load_golden(case["golden"], device)
        cu = a.get("cu_seqlens")
        if cu is None and meta.get("cu_seqlens") is not None:
            cu = torch.tensor(meta["cu_seqlens"], dtype=torch.int64, device=device)
        d = dict(q=a["q"], k=a["k"], v=a["v"], g=a["g"], beta=a["beta"], A_log=a.get("A_log"),
                 dt_bias=a.get("dt_bias"), initial_state=a.get("initial_state"), cu_seqlens=cu,
                 scale=meta["scale"], lower_bound=meta["lower_bound"])
        opts = dict(gate_in_kernel=meta["gate_in_kernel"], beta_sigmoid=meta["beta_sigmoid_in_kernel"],
                    qk_l2norm=meta["qk_l2norm_in_kernel"])
        ref = (a["expected_o"], a["expected_final_state"])
        return d, opts, ref
    gen = torch.Generator().manual_seed(case["seed"])
    H = case["H"]
    HV = case.get("HV", H)
    if "seqlens" in case:
        B, T = 1, sum(case["seqlens"])
        cu = [0]
        for x in case["seqlens"]:
            cu.append(cu[-1] + x)
        cu = torch.tensor(cu, dtype=torch.int64)
        N = len(case["seqlens"])
    else:
        B, T, cu, N = case["B"], case["T"], None, case["B"]

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    bf = torch.bfloat16
    d = dict(q=randn(B, T, H, K).to(bf), k=randn(B, T, H, K).to(bf), v=randn(B, T, HV, K).to(bf),
             g=randn(B, T, HV, K).to(bf), beta=randn(B, T, HV).to(bf),
             A_log=torch.rand(HV, generator=gen), dt_bias=torch.rand(HV, K, generator=gen), cu_seqlens=cu,
             scale=K ** -0.5, lower_bound=case.get("lower_bound", -5.0))
    if case.get("slow"):
        d["dt_bias"][:, ::8] = -8.0  # spec section 7's long-memory channels
    init = case.get("init")
    d["initial_state"] = None
    if init:
        d["initial_state"] = randn(N, HV, K, K).to(bf if init == "bf16" else torch.float32)
    d = {key: (x.to(device) if isinstance(x, torch.Tensor) else x) for key, x in d.items()}
    return d, {}, None


def _shard(d, lo, hi):
    return {key: d[key][:, lo:hi].contiguous() for key in ("q", "k", "v", "g", "beta")}


def _sq(x, ref):
    """(sum (x - ref)^2, sum ref^2) in float64."""
    x, ref = x.double(), ref.double()
    return torch.stack([((x - ref) ** 2).sum(), (ref ** 2).sum()])


def run_case(case, rank, world):
    device = torch.device("cuda", rank)
    d, opts, golden = _inputs(case, device)
    B, T = d["q"].shape[:2]
    HV = d["v"].shape[2]
    N = d["cu_seqlens"].numel() - 1 if d["cu_seqlens"] is not None else B
    sizes = case.get("shard_sizes")
    if sizes is None:
        base = T // world
        sizes = [base] * (world - 1) + [T - base * (world - 1)]
    lo = sum(sizes[:rank])
    hi = lo + sizes[rank]

    # Single GPU: the whole batch on this rank.
    out1 = torch.empty_like(d["v"])
    fs1 = torch.empty(N, HV, K, K, dtype=torch.float32, device=device)
    import flash_kda
    flash_kda.fwd(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out1, d["A_log"], d["dt_bias"],
                  d["lower_bound"], initial_state=d["initial_state"], final_state=fs1,
                  cu_seqlens=d["cu_seqlens"], **opts)

    # Distributed: this rank's shard.
    s = _shard(d, lo, hi)
    final_on = case.get("final_state_on", "all")
    out, fs = flash_kda.distributed.fwd(
        s["q"], s["k"], s["v"], s["g"], s["beta"], d["scale"], d["A_log"], d["dt_bias"], d["lower_bound"],
        initial_state=d["initial_state"], output_final_state=True, cu_seqlens=d["cu_seqlens"],
        shard_sizes=None if len(set(sizes)) == 1 else sizes,
        final_state_on=final_on, method=case.get("method", "auto"), **opts)
    torch.cuda.synchronize()

    # The float64 reference (the golden file's, or computed here).
    if golden is not None:
        out_ref, fs_ref = golden
    else:
        out_ref, fs_ref = U.reference_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], d["A_log"],
                                          d["dt_bias"], d["lower_bound"], d["initial_state"], d["cu_seqlens"], **opts)
    r = {}
    if final_on == "owner":
        # This rank's rows: its sequences' final states (and the empty sequences' initial states);
        # every other row zero. Summed over the ranks (disjoint rows), they are the final states.
        plan = flash_kda.distributed.shard_plan(hi - lo, d["cu_seqlens"], shard_sizes=sizes, batch_size=B)
        foreign = [n for n in range(N) if plan.owner[n] >= 0 and plan.owner[n] != rank]
        ok = torch.tensor([0.0 if any(bool(fs[n].any()) for n in foreign) else 1.0], device=device)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        r["owner_rows_ok"] = bool(ok.item() == 1.0)
        empty = [n for n in range(N) if plan.owner[n] < 0]
        dist.all_reduce(fs)
        if empty:
            fs[empty] = fs1[empty]
    sums = torch.stack([_sq(out, out1[:, lo:hi]), _sq(out, out_ref[:, lo:hi].to(device))])
    dist.all_reduce(sums)
    sums = sums.tolist()
    rel = [(a / b) ** 0.5 if b > 0 else a ** 0.5 for a, b in sums]
    r.update(out_vs_single=rel[0], out_vs_f64=rel[1],
             state_vs_single=U.rel_l2(fs, fs1), state_vs_f64=U.rel_l2(fs, fs_ref.to(device)),
             finite=bool(torch.isfinite(out).all().item() and torch.isfinite(fs).all().item()))
    if golden is not None:
        tol = U.golden_tolerances()
        fla = tol["fla"].get(case["golden"], {})
        r["out_tol"] = max(tol["default"]["out"], fla.get("out", 0.0))
        r["state_tol"] = max(tol["default"]["final_state"], fla.get("final_state", 0.0))
    else:
        r["out_tol"], r["state_tol"] = 4e-3, 3e-3
    finite = torch.tensor([1.0 if r["finite"] else 0.0], device=device)
    dist.all_reduce(finite, op=dist.ReduceOp.MIN)
    r["finite"] = bool(finite.item() == 1.0)
    return r


def main(rank, world, port, names, result_path):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=300))
    results = {}
    for case in cases():
        if names and case["name"] not in names:
            continue
        # An exception ends this process; torch.multiprocessing.spawn then stops the other one and
        # raises it, with the traceback, in the test.
        results[case["name"]] = run_case(case, rank, world)
        if rank == 0:
            print(f"[distributed] {case['name']:34s} " + " ".join(
                f"{k}={v:.3e}" if isinstance(v, float) else f"{k}={v}" for k, v in results[case["name"]].items()),
                flush=True)
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump(results, f, indent=1)
    dist.destroy_process_group()
