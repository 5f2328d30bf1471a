#!/usr/bin/env python3
"""Example: a packed batch of long sequences sharded along tokens over the GPUs of one host.

    scripts/run_distributed.sh 2 benchmarks/example_distributed.py      (torchrun, NCCL_NVLS_ENABLE=0)

Every rank holds its contiguous quarter/half/... of the packed tokens (sequences cross the rank
boundaries), calls flash_kda.distributed.fwd, and gets its part of the output and every
sequence's final state. Rank 0 then checks the result against flash_kda.fwd on the whole batch.
"""
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off (read when NCCL starts)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import flash_kda  # noqa: E402

K = 128


def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # before NCCL starts
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda")

    # The whole batch (the same on every rank here; in a real stack each rank only has its shard):
    # 3 sequences, 96K tokens, 8 heads.
    seqlens = [40000, 50000, 8304]
    T, H = sum(seqlens), 8
    cu = torch.tensor([0, 40000, 90000, 98304], dtype=torch.int64)
    gen = torch.Generator(device=dev).manual_seed(0)
    q, k, v, g = (torch.randn(1, T, H, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(4))
    beta = torch.randn(1, T, H, generator=gen, device=dev).to(torch.bfloat16)
    A_log = torch.rand(H, generator=gen, device=dev)
    dt_bias = torch.rand(H, K, generator=gen, device=dev)
    h0 = torch.randn(len(seqlens), H, K, K, generator=gen, device=dev)

    # This rank's shard: tokens [rank * T / world, (rank + 1) * T / world) of the packed stream.
    lo, hi = rank * T // world, (rank + 1) * T // world
    shard = [x[:, lo:hi].contiguous() for x in (q, k, v, g, beta)]
    sizes = [(r + 1) * T // world - r * T // world for r in range(world)]
    out, final_state = flash_kda.distributed.fwd(
        *shard, K ** -0.5, A_log, dt_bias, -5.0, initial_state=h0, output_final_state=True,
        cu_seqlens=cu.to(dev), cu_seqlens_cpu=cu, shard_sizes=sizes)
    plan = flash_kda.distributed.shard_plan(hi - lo, cu, shard_sizes=sizes)
    print(f"rank {rank}: tokens [{lo}, {hi}), sequences [{plan.seq_lo}, {plan.seq_hi}), first one continued: "
          f"{plan.continued}, last one continues: {plan.continues}, out {tuple(out.shape)}", flush=True)

    # Check against one GPU (every rank compares its part; rank 0 prints).
    ref = torch.empty_like(v)
    ref_fs = torch.empty_like(h0)
    flash_kda.fwd(q, k, v, g, beta, K ** -0.5, ref, A_log, dt_bias, -5.0, initial_state=h0, final_state=ref_fs,
                  cu_seqlens=cu.to(dev))
    err = torch.stack([((out.double() - ref[:, lo:hi].double()) ** 2).sum(), (ref[:, lo:hi].double() ** 2).sum()])
    dist.all_reduce(err)
    if rank == 0:
        print(f"relative L2 difference from one GPU: out {(err[0] / err[1]).sqrt().item():.2e}, final state "
              f"{((final_state - ref_fs).norm() / ref_fs.norm()).item():.2e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
