"""Decode and speculative verify over an indexed state pool: ``decode`` (torch.ops.flash_kda.decode,
with an eager fast path like ``fwd``'s) and FLA's ``fused_recurrent_kda`` on top of it.

The op writes ``out`` and the pool in place on the current stream, with no workspace and no
allocation: one kernel launch, CUDA-graph capturable (docs/design.md section 5).
"""
from __future__ import annotations

import os

import torch

from . import _ops
from ._ops import _expect_tensor, _is_compiling, _param, _register_fake, _rows, _rows_ok

# Opt-in device-side check of state_indices / num_accepted_tokens / cu_seqlens (synchronises).
_CHECK_INDICES = os.environ.get("FLASH_KDA_CHECK_INDICES", "0") not in ("", "0")

# Eager fast path: _C._decode_eager(20 arguments in the op's schema order) -> out, or NotImplemented.
_decode_eager = getattr(_ops._C, "_decode_eager", None)
if os.environ.get("FLASH_KDA_EAGER_FAST_PATH", "1") in ("", "0"):
    _decode_eager = None


@_register_fake("flash_kda::decode")
def _decode_fake(*args, **kwargs):
    return None


def decode(q, k, v, g, beta, state_pool, state_indices=None, out=None, scale=None, A_log=None,
           dt_bias=None, lower_bound=None, num_accepted_tokens=None, cu_seqlens=None, *,
           gate_in_kernel=True, beta_sigmoid=True, qk_l2norm=True, allow_neg_eigval=False,
           check_indices=None, kernel_config=0):
    """One decode or verify step over a state pool, in place; returns ``out``.

    q, k [B, T, H, K] bf16; v [B, T, HV, V] bf16; g [B, T, HV, K] and beta [B, T, HV] bf16 or fp32
    (or a packed [1, T_total, ...] batch with ``cu_seqlens`` [N+1] int32/int64); ``state_pool``
    [slots, HV, V, K] fp32 or bf16, read and written in place (inner three dimensions contiguous;
    the state stays fp32 inside). ``state_indices`` int32/int64: [N] (sequence n reads and writes
    slot idx[n]), [N, T_idx] (the state after token t goes to slot idx[n, t]; the start state is
    read from idx[n, 0], or idx[n, a - 1] with a = ``num_accepted_tokens[n]`` clamped to
    [1, T_idx]), or None (sequence n uses slot n). A negative start slot (padding, -1) gives zeros
    in the sequence's output rows and no state access; no two sequences may name the same slot.
    Gate, beta and L2-norm options as ``fwd`` (lower_bound None: the softplus gate; A_log None:
    exp(A_log) = 1). ``out`` [B, T, HV, V] bf16 is allocated when None. ``check_indices=True`` (or
    env FLASH_KDA_CHECK_INDICES=1) validates the index contents on the device first (synchronises;
    not capturable). ``kernel_config`` forces a kernel configuration (benchmarking; same results).
    """
    if check_indices is None:
        check_indices = _CHECK_INDICES
    if not _is_compiling() and _decode_eager is not None:
        result = _decode_eager(q, k, v, g, beta, state_pool, state_indices, out, scale, A_log, dt_bias,
                               lower_bound, num_accepted_tokens, cu_seqlens, beta_sigmoid, qk_l2norm,
                               gate_in_kernel, allow_neg_eigval, check_indices, kernel_config)
        if result is not NotImplemented:
            return result
    return _decode_general(q, k, v, g, beta, state_pool, state_indices, out, scale, A_log, dt_bias,
                           lower_bound, num_accepted_tokens, cu_seqlens, gate_in_kernel=gate_in_kernel,
                           beta_sigmoid=beta_sigmoid, qk_l2norm=qk_l2norm,
                           allow_neg_eigval=allow_neg_eigval, check_indices=check_indices,
                           kernel_config=kernel_config)


def _decode_general(q, k, v, g, beta, state_pool, state_indices, out, scale, A_log, dt_bias,
                    lower_bound, num_accepted_tokens, cu_seqlens, *, gate_in_kernel, beta_sigmoid,
                    qk_l2norm, allow_neg_eigval, check_indices, kernel_config):
    """decode through torch.ops.flash_kda.decode (every input; the path dynamo traces)."""
    fn = "flash_kda.decode"
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("state_pool", state_pool)):
        _expect_tensor(fn, name, t)
    for name, t in (("state_indices", state_indices), ("out", out), ("A_log", A_log), ("dt_bias", dt_bias),
                    ("num_accepted_tokens", num_accepted_tokens), ("cu_seqlens", cu_seqlens)):
        _expect_tensor(fn, name, t, optional=True)
    if isinstance(scale, torch.Tensor) or isinstance(lower_bound, torch.Tensor):
        raise TypeError(f"{fn}: scale and lower_bound must be Python numbers, not tensors")
    scale = float(q.shape[-1]) ** -0.5 if scale is None else float(scale)
    lower_bound = None if lower_bound is None else float(lower_bound)
    if not gate_in_kernel:
        A_log = dt_bias = None
    q, k, v, g = _rows(q), _rows(k), _rows(v), _rows(g)
    if beta.dim() > 0 and beta.size(-1) > 1 and beta.stride(-1) != 1:
        beta = beta.contiguous()
    A_log, dt_bias = _param(A_log), _param(dt_bias)
    if state_indices is not None:
        state_indices = state_indices.contiguous()
    if num_accepted_tokens is not None:
        num_accepted_tokens = num_accepted_tokens.contiguous()
    if cu_seqlens is not None:
        cu_seqlens = cu_seqlens.contiguous()
    if out is None:
        out = torch.empty(v.shape, dtype=torch.bfloat16, device=v.device)
    out_buf = out if _rows_ok(out) else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    # The pool is updated in place: passed as it is (the C API names what it does not accept).
    torch.ops.flash_kda.decode(q, k, v, g, beta, state_pool, state_indices, out_buf, scale, A_log, dt_bias,
                               lower_bound, num_accepted_tokens, cu_seqlens, bool(beta_sigmoid),
                               bool(qk_l2norm), bool(gate_in_kernel), bool(allow_neg_eigval),
                               bool(check_indices), int(kernel_config))
    if out_buf is not out:
        out.copy_(out_buf)
    return out


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None, initial_state=None,
                        output_final_state=False, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                        state_v_first=True, cu_seqlens=None, inplace_final_state=True,
                        ssm_state_indices=None, num_accepted_tokens=None, out=None, **kwargs):
    """FLA's ``fla.ops.kda.fused_recurrent_kda`` (argument names, defaults and semantics) on flash_kda's
    decode kernel; returns ``(o, final_state)``. V-first states only (``state_v_first=True``, the
    default here; [N, HV, V, K]).

    With ``initial_state`` and ``inplace_final_state`` (the serving form): initial_state is the pool,
    updated in place through ``ssm_state_indices`` ([N] or [N, T_idx] with ``num_accepted_tokens``;
    None: sequence n uses state n), and returned as final_state. Otherwise a new fp32 final state
    [N, HV, V, K] is computed from initial_state (gathered through 1-D ssm_state_indices, zeros for
    negative ones) or zeros, and returned when ``output_final_state``. As FLA's kernels do, the
    softplus gate without A_log uses exp(A_log) = e (A_log = 1). Differences from FLA: negative slot
    indices are padding (zero output, no state access) instead of out-of-bounds reads;
    num_accepted_tokens = 0 reads idx[n, 0] instead of idx[n, -1]; forward only; q/k/v bf16,
    K = V = 128; beta per head ([B, T, HV]).
    """
    fn = "flash_kda.fused_recurrent_kda"
    if "transpose_state_layout" in kwargs:  # FLA's deprecated name
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    for name in ("safe_gate", "num_warps", "num_stages"):
        kwargs.pop(name, None)
    if kwargs:
        raise TypeError(f"{fn}: unexpected keyword arguments {sorted(kwargs)}")
    if not state_v_first:
        raise ValueError(f"{fn}: state_v_first=False (states [N, HV, K, V]) is not supported; pass "
                         "state_v_first=True and states laid out [N, HV, V, K]")
    if cu_seqlens is not None and q.shape[0] != 1:
        raise ValueError(f"{fn}: the batch size is expected to be 1 rather than {q.shape[0]} when using "
                         "cu_seqlens; flatten variable-length inputs first")
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError(f"{fn}: allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True")
    tensors = [t for t in (q, k, v, g, beta, A_log, dt_bias, initial_state) if isinstance(t, torch.Tensor)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise NotImplementedError(f"{fn}: forward only; call it under torch.no_grad() / torch.inference_mode()")
    HV = v.shape[2]
    if use_gate_in_kernel and lower_bound is None and A_log is None:
        A_log = torch.ones(HV, dtype=torch.float32, device=q.device)  # FLA: -exp(1) * softplus(g + dt_bias)
    if out is None:
        out = (torch.zeros if cu_seqlens is not None else torch.empty)(v.shape, dtype=torch.bfloat16,
                                                                        device=v.device)
    opts = dict(scale=scale, A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound,
                num_accepted_tokens=num_accepted_tokens, cu_seqlens=cu_seqlens,
                gate_in_kernel=use_gate_in_kernel, beta_sigmoid=use_beta_sigmoid_in_kernel,
                qk_l2norm=use_qk_l2norm_in_kernel, allow_neg_eigval=allow_neg_eigval)
    if initial_state is not None and inplace_final_state:
        decode(q, k, v, g, beta, initial_state, ssm_state_indices, out, **opts)
        return out, initial_state

    N = q.shape[0] if cu_seqlens is None else cu_seqlens.numel() - 1
    K, V = q.shape[-1], v.shape[-1]
    if ssm_state_indices is not None and ssm_state_indices.dim() != 1:
        raise NotImplementedError(f"{fn}: 2-D ssm_state_indices need inplace_final_state=True and an initial_state")
    if initial_state is None:
        ht = torch.zeros(N, HV, V, K, dtype=torch.float32, device=q.device)
    elif ssm_state_indices is None:
        ht = initial_state.to(torch.float32, copy=True)
    else:
        idx = ssm_state_indices.long()
        valid = (idx >= 0) & (idx < initial_state.shape[0])
        ht = torch.where(valid.view(-1, 1, 1, 1), initial_state[idx.clamp(0, initial_state.shape[0] - 1)].float(),
                         torch.zeros((), dtype=torch.float32, device=q.device))
    opts["num_accepted_tokens"] = None  # meaningful only with 2-D indices (the in-place form above)
    local = None
    if ssm_state_indices is not None:  # padding stays padding: -1 where the pool slot is invalid
        idx = ssm_state_indices.long()
        n = torch.arange(N, dtype=torch.int64, device=q.device)
        valid = (idx >= 0) if initial_state is None else (idx >= 0) & (idx < initial_state.shape[0])
        local = torch.where(valid, n, torch.full_like(n, -1))
    decode(q, k, v, g, beta, ht, local, out, **opts)
    return out, (ht if output_final_state else None)
