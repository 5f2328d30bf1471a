"""FLA-style entry point: ``chunk_kda`` with flash-linear-attention's keyword names (forward only)."""
from __future__ import annotations

import torch

from ._ops import fwd

# FLA keywords that change nothing here (chunking, recompute and CPU copies are FLA internals).
_IGNORED_KWARGS = ("safe_gate", "disable_recompute", "cu_seqlens_cpu", "chunk_size")


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              cu_seqlens=None, A_log=None, dt_bias=None, lower_bound=None,
              use_gate_in_kernel=True, use_qk_l2norm_in_kernel=True,
              use_beta_sigmoid_in_kernel=True, allow_neg_eigval=False, state_v_first=True,
              final_state_dtype=torch.float32, workspace=None, **kwargs):
    """KDA forward with FLA's ``fla.ops.kda.chunk_kda`` keywords; returns ``(out, final_state)``.

    q, k [B, T, H, K]; v [B, T, HV, V] (GVA: HV a multiple of H); g [B, T, HV, K]; beta [B, T, HV];
    initial_state [N, HV, V, K] (V-first, fp32 or bf16). ``final_state`` is [N, HV, V, K] in
    ``final_state_dtype`` (fp32 by default) when ``output_final_state``, else None. The gate is
    ``lower_bound * sigmoid(exp(A_log) * (g + dt_bias))`` when lower_bound is set, else
    ``-exp(A_log) * softplus(g + dt_bias)`` (A_log None: exp(A_log) = 1); with
    ``use_gate_in_kernel=False`` g is the log-decay itself. Differences from FLA: forward only
    (raises if gradients are required), only the V-first state layout (``state_v_first=True``),
    defaults are the fused options FlashKDA is built for (all ``*_in_kernel`` True). K = V = 128.
    FLA's ``use_graph`` / ``max_num_seqs``: the call is CUDA-graph capturable as it is, and replays
    follow new cu_seqlens contents; ``max_num_seqs`` is checked against cu_seqlens' length.
    """
    fn = "flash_kda.chunk_kda"
    if "transpose_state_layout" in kwargs:  # FLA 0.5.0 name of state_v_first
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    # FLA's use_graph builds its chunk list at a fixed shape for graph capture; this call is capturable as it
    # is (no host synchronisation; its allocations come from PyTorch's caching allocator, which graphs
    # support). max_num_seqs: FLA's check that cu_seqlens is padded to exactly max_num_seqs sequences
    # (zero-length tails are valid here too).
    kwargs.pop("use_graph", None)
    max_num_seqs = kwargs.pop("max_num_seqs", None)
    if max_num_seqs is not None and cu_seqlens is not None:
        if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int):
            raise TypeError(f"{fn}: max_num_seqs: expected an int or None, got {type(max_num_seqs).__name__}")
        if cu_seqlens.numel() - 1 != max_num_seqs:
            raise ValueError(f"{fn}: max_num_seqs: expected cu_seqlens of max_num_seqs + 1 = {max_num_seqs + 1} "
                             f"entries (zero-length tail sequences as padding), got {cu_seqlens.numel()}")
    if kwargs.pop("cp_context", None) is not None:
        raise NotImplementedError(f"{fn}: context parallelism (cp_context) is not supported")
    if kwargs.pop("return_intermediate_states", False):
        raise NotImplementedError(f"{fn}: return_intermediate_states=True is not supported")
    for name in _IGNORED_KWARGS:
        kwargs.pop(name, None)
    if kwargs:
        raise TypeError(f"{fn}: unexpected keyword arguments {sorted(kwargs)}")
    if not state_v_first:
        raise ValueError(
            f"{fn}: state_v_first=False (state layout [N, HV, K, V]) is not supported; pass "
            "state_v_first=True and states laid out [N, HV, V, K] (transpose the last two dims)")
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError(f"{fn}: allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True")
    tensors = [t for t in (q, k, v, g, beta, A_log, dt_bias, initial_state)
               if isinstance(t, torch.Tensor)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise NotImplementedError(
            f"{fn}: forward only; call it under torch.no_grad() / torch.inference_mode(), or with "
            "inputs that do not require grad")
    for name, t in (("q", q), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            got = f"{t.dim()}-D" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{fn}: {name}: expected a 4-D tensor, got {got}")

    N = cu_seqlens.numel() - 1 if cu_seqlens is not None else q.shape[0]
    HV, V, K = v.shape[2], v.shape[3], q.shape[3]
    out = torch.empty(v.shape, dtype=torch.bfloat16, device=v.device)
    final_state = None
    if output_final_state:
        final_state = torch.empty(N, HV, V, K, dtype=final_state_dtype, device=q.device)
    fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state=initial_state,
        final_state=final_state, cu_seqlens=cu_seqlens, workspace=workspace,
        gate_in_kernel=use_gate_in_kernel, beta_sigmoid=use_beta_sigmoid_in_kernel,
        qk_l2norm=use_qk_l2norm_in_kernel, allow_neg_eigval=allow_neg_eigval)
    return out, final_state
