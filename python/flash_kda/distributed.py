"""KDA forward with the sequence sharded along tokens over a torch.distributed process group.

    out_local, final_state = flash_kda.distributed.fwd(q, k, v, g, beta, scale, A_log, dt_bias,
                                                      lower_bound, initial_state=h0,
                                                      output_final_state=True, group=group)

Each rank holds its contiguous shard of the tokens: for a fixed batch, q [B, T_r, H, K] is tokens
[offset_r, offset_r + T_r) of every row; for a packed batch (``cu_seqlens``: the GLOBAL [N + 1]
offsets, the same on every rank), q [1, T_r, H, K] is tokens [offset_r, offset_r + T_r) of the
packed stream, and sequences may cross rank boundaries. Shards are equal (T_r the same on every
rank) unless ``shard_sizes`` lists every rank's T_r. The result equals ``flash_kda.fwd`` on the
gathered inputs up to rounding (docs/design.md section 3.4).

Per call, on the current stream: ``segment_transition`` of the sequences that continue on a later
rank (all B of a fixed batch; the last local one of a packed shard), written straight into a send
buffer [N_x, HV, V + K, K] float32 (D's V rows, then M's K rows); one ``all_gather_into_tensor``
of those buffers; on each rank, the exact float32 combine of the blocks of the earlier ranks that
hold its first sequence, from that sequence's initial state; ``fwd_prepared`` of its shard from
those start states, reusing the preparation of the transition call. The backend must support
``all_gather_into_tensor`` on CUDA tensors (NCCL).

Final states: the rank holding a sequence's last token computes it. ``final_state_on="all"``
(default) returns every sequence's final state [N, HV, V, K] float32 on every rank (one broadcast
from the last rank for a fixed batch, one all-reduce of zero-filled rows for a packed batch: exact,
a single non-zero addend per row); ``"owner"`` skips that collective and returns the rows of the
sequences whose last token is on this rank (``ShardPlan.owned()``), the others zero. Sequences
without tokens keep their initial state (or zeros) on every rank, in both modes.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from . import _ops
from ._cp import combine_transitions, fwd_prepared, get_transition_workspace_size, segment_transition
from ._cp_plan import ShardPlan, plan_fixed, plan_varlen

__all__ = ["fwd", "shard_plan", "ShardPlan"]

_METHODS = {"auto": 0, "exact": 1}


def shard_plan(num_tokens, cu_seqlens=None, *, group=None, shard_sizes=None, batch_size=1):
    """The ShardPlan of this rank (see flash_kda._cp_plan): its local sequences and chains.

    num_tokens: this rank's T_r; cu_seqlens: the global offsets (tensor or list; a CUDA tensor is
    copied to the host, which synchronises) or None for a fixed batch of ``batch_size`` rows.
    """
    R = dist.get_world_size(group)
    r = dist.get_rank(group)
    sizes = _shard_sizes(num_tokens, shard_sizes, R, r)
    if cu_seqlens is None:
        return plan_fixed(int(batch_size), sizes, r)
    if isinstance(cu_seqlens, torch.Tensor):
        cu_seqlens = cu_seqlens.tolist()
    return plan_varlen(tuple(int(c) for c in cu_seqlens), sizes, r)


def _shard_sizes(num_tokens, shard_sizes, R, r):
    if shard_sizes is None:
        return tuple([int(num_tokens)] * R)
    sizes = tuple(int(s) for s in shard_sizes)
    if len(sizes) != R:
        raise ValueError(f"flash_kda.distributed.fwd: shard_sizes: expected {R} entries (one per rank), got {len(sizes)}")
    if sizes[r] != num_tokens:
        raise ValueError(f"flash_kda.distributed.fwd: shard_sizes[{r}] = {sizes[r]} but this rank holds "
                         f"{num_tokens} tokens (q.shape[1])")
    return sizes


_LOCAL_CU = {}


def _local_cu(plan, dev):
    """The plan's local cu_seqlens on `dev` (kept: serving loops repeat their batches)."""
    key = (plan.local_cu, dev)
    t = _LOCAL_CU.get(key)
    if t is None:
        if len(_LOCAL_CU) > 256:
            _LOCAL_CU.clear()
        t = _LOCAL_CU[key] = torch.tensor(plan.local_cu, dtype=torch.int64, device=dev)
    return t


def _record(timing, name):
    if timing is not None:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        timing.append((name, ev))


def fwd(q, k, v, g, beta, scale=None, A_log=None, dt_bias=None, lower_bound=-5.0, initial_state=None,
        output_final_state=False, cu_seqlens=None, *, group=None, shard_sizes=None, cu_seqlens_cpu=None,
        final_state_on="all", out=None, gate_in_kernel=True, beta_sigmoid=True, qk_l2norm=True,
        allow_neg_eigval=False, method="auto", context_split=None, _timing=None):
    """KDA forward of this rank's token shard; returns ``(out, final_state)``.

    Arguments as ``flash_kda.fwd`` (gate, options, states [N, HV, V, K] of the whole batch, the same
    on every rank) plus: ``group`` (default: the world), ``shard_sizes`` (every rank's token count
    when shards differ), ``cu_seqlens_cpu`` (a host copy of the global cu_seqlens: avoids a device
    to host copy), ``final_state_on`` ("all" or "owner", see the module), ``out`` (this rank's
    [B, T_r, HV, V] bf16 output, allocated when None), ``method`` ("auto": bounded transitions with
    an exact fallback, the rule kda_fwd applies inside a GPU; "exact": every chunk) and
    ``context_split`` (segments of the exact transition and of the forward; None automatic).
    ``_timing``: a list that receives (stage, CUDA event) pairs (benchmarks).
    """
    fn = "flash_kda.distributed.fwd"
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        _ops._expect_tensor(fn, name, t)
    if method not in _METHODS:
        raise ValueError(f"{fn}: method: expected 'auto' or 'exact', got {method!r}")
    if final_state_on not in ("all", "owner"):
        raise ValueError(f"{fn}: final_state_on: expected 'all' or 'owner', got {final_state_on!r}")
    if q.dim() != 4 or v.dim() != 4:
        raise ValueError(f"{fn}: q and v: expected 4-D tensors, got {q.dim()}-D and {v.dim()}-D")
    R = dist.get_world_size(group)
    r = dist.get_rank(group)
    B, T_r, _, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    dev = q.device
    opts = dict(gate_in_kernel=gate_in_kernel, beta_sigmoid=beta_sigmoid, qk_l2norm=qk_l2norm,
                allow_neg_eigval=allow_neg_eigval, context_split=context_split,
                context_method=_METHODS[method])
    if out is None:
        out = torch.empty(B, T_r, HV, V, dtype=torch.bfloat16, device=dev)
    _record(_timing, "start")

    # Who holds what.
    sizes = _shard_sizes(T_r, shard_sizes, R, r)
    if cu_seqlens is None:
        plan = plan_fixed(B, sizes, r)
        local_cu = None
    else:
        if B != 1:
            raise ValueError(f"{fn}: q: expected batch size 1 with cu_seqlens (a packed batch), got {B}")
        host_cu = cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens
        host_cu = host_cu.tolist() if isinstance(host_cu, torch.Tensor) else list(host_cu)
        plan = plan_varlen(tuple(int(c) for c in host_cu), sizes, r)
        local_cu = _local_cu(plan, dev)
    N = plan.num_sequences
    Nx = N if cu_seqlens is None else 1  # blocks exchanged per rank
    has_tokens = T_r > 0 and plan.num_local > 0

    # Transitions of the sequences that continue, straight into the send buffer; the preparation
    # stays in the workspace for the forward.
    send = torch.empty(Nx, HV, V + K, K, dtype=torch.float32, device=dev)
    D = M = None
    if has_tokens and plan.continues:
        D, M = send[:, :, :V], send[:, :, V:]
    ws = None
    if has_tokens:
        ws = torch.empty(get_transition_workspace_size(q, k, v, g, beta, A_log, dt_bias, lower_bound, local_cu,
                                                       D=D, M=M, **opts), dtype=torch.uint8, device=dev)
        segment_transition(q, k, v, g, beta, scale, A_log, dt_bias, lower_bound, local_cu, D=D, M=M,
                           num_transitions=0, workspace=ws, **opts)
    _record(_timing, "transition")

    recv = torch.empty(R * Nx, HV, V + K, K, dtype=torch.float32, device=dev)
    dist.all_gather_into_tensor(recv, send, group=group)
    _record(_timing, "exchange")

    # Start states: the initial state of every local sequence, the first one from the chain when it
    # started on an earlier rank.
    init_local = None
    if has_tokens:
        if plan.continued:
            blocks = recv.view(R, Nx, HV, V + K, K)
            chain = list(plan.chain)
            if chain == list(range(chain[0], chain[-1] + 1)):
                sel = blocks[chain[0]:chain[-1] + 1]
            else:
                sel = blocks[torch.tensor(chain, device=dev)]
            first_init = None
            if initial_state is not None:
                first_init = initial_state if cu_seqlens is None else initial_state[plan.seq_lo:plan.seq_lo + 1]
            start = combine_transitions(sel[:, :, :, :V], sel[:, :, :, V:], first_init)
            if cu_seqlens is None or plan.num_local == 1:
                init_local = start
            else:
                init_local = torch.zeros(plan.num_local, HV, V, K, dtype=torch.float32, device=dev)
                if initial_state is not None:
                    init_local[1:] = initial_state[plan.seq_lo + 1:plan.seq_hi]
                init_local[0] = start[0]
        elif initial_state is not None:
            init_local = initial_state if cu_seqlens is None else initial_state[plan.seq_lo:plan.seq_hi]
    _record(_timing, "combine")

    # The shard's forward from its start states.
    final_local = None
    if output_final_state and has_tokens:
        final_local = torch.empty(plan.num_local, HV, V, K, dtype=torch.float32, device=dev)
    if has_tokens:
        fwd_prepared(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, init_local, final_local,
                     local_cu, workspace=ws, **opts)
    _record(_timing, "forward")

    final_state = None
    if output_final_state:
        final_state = _final_states(plan, final_local, initial_state, HV, V, K, dev, group, final_state_on,
                                    fixed=cu_seqlens is None)
    _record(_timing, "final")
    return out, final_state


def _final_states(plan, final_local, initial_state, HV, V, K, dev, group, final_state_on, fixed):
    """[N, HV, V, K] float32: rows this rank owns from its forward, then (on "all") the others'."""
    N = plan.num_sequences
    owned = plan.owned()
    if fixed and final_state_on == "all" and N > 0 and plan.owner[0] >= 0:
        final = final_local if plan.rank == plan.owner[0] else torch.empty(N, HV, V, K, dtype=torch.float32,
                                                                           device=dev)
        src = plan.owner[0] if group is None else dist.get_global_rank(group, plan.owner[0])
        dist.broadcast(final, src=src, group=group)
    else:
        final = torch.zeros(N, HV, V, K, dtype=torch.float32, device=dev)
        if owned:
            lo, hi = owned[0], owned[-1] + 1  # owned rows are consecutive: [seq_lo, seq_hi) or one fewer
            final[lo:hi] = final_local[lo - plan.seq_lo:hi - plan.seq_lo]
        if final_state_on == "all":
            dist.all_reduce(final, op=dist.ReduceOp.SUM, group=group)
    # Sequences with no tokens keep their initial state (rows that no rank owns).
    empty = [n for n in range(N) if plan.owner[n] < 0]
    if empty:
        idx = torch.tensor(empty, device=dev)
        if initial_state is not None:
            final[idx] = initial_state[idx].to(torch.float32)
        else:
            final[idx] = 0.0
    return final
