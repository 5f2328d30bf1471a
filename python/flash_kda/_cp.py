"""Building blocks of context parallelism across GPUs (docs/design.md section 3.4).

A shard of a sequence (a range of its tokens) maps its start state to its end state affinely:

    S_end = S_start @ M.mT + D        S, D: [V, K] (V-first, as the states), M: [K, K], float32

D is the end state from a zero start; M is the product of the per-token maps (latest on the left).
``segment_transition`` computes (D, M) for a shard, ``combine_transitions`` chains shards from a
true start state, ``fwd_prepared`` runs the shard's forward from its start state reusing the
preparation that ``segment_transition`` left in the workspace. No communication happens here;
``flash_kda.distributed`` drives them over a ``torch.distributed`` process group. Each is a
``torch.library`` op (``torch.ops.flash_kda.*``, fake kernels below) on the current stream.
"""
from __future__ import annotations

import torch

from . import _ops
from ._ops import _context_method, _context_split, _dense, _expect_tensor, _param, _rows

_register_fake = _ops._register_fake


@_register_fake("flash_kda::segment_transition")
def _segment_transition_fake(*args, **kwargs):
    return None


@_register_fake("flash_kda::fwd_prepared")
def _fwd_prepared_fake(*args, **kwargs):
    return None


@_register_fake("flash_kda::combine_transitions")
def _combine_transitions_fake(*args, **kwargs):
    return None


def _inputs(fn, q, k, v, g, beta, A_log, dt_bias, cu_seqlens, gate_in_kernel):
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        _expect_tensor(fn, name, t)
    for name, t in (("A_log", A_log), ("dt_bias", dt_bias), ("cu_seqlens", cu_seqlens)):
        _expect_tensor(fn, name, t, optional=True)
    if not gate_in_kernel:
        A_log = dt_bias = None
    q, k, v, g = _rows(q), _rows(k), _rows(v), _rows(g)
    if beta.dim() > 0 and beta.size(-1) > 1 and beta.stride(-1) != 1:
        beta = beta.contiguous()
    if cu_seqlens is not None:
        cu_seqlens = cu_seqlens.contiguous()
    return q, k, v, g, beta, _param(A_log), _param(dt_bias), cu_seqlens


def _num_sequences(q, cu_seqlens):
    return cu_seqlens.numel() - 1 if cu_seqlens is not None else q.shape[0]


def get_transition_workspace_size(q, k, v, g, beta, A_log=None, dt_bias=None, lower_bound=-5.0,
                                  cu_seqlens=None, *, D=None, M=None, gate_in_kernel=True,
                                  beta_sigmoid=True, qk_l2norm=True, allow_neg_eigval=False,
                                  context_split=None, context_method=None):
    """Bytes of workspace for ``segment_transition`` followed by ``fwd_prepared`` on these inputs
    (shapes and options only; D and M as passed to ``segment_transition``, None for the
    preparation only). Note the default bounded gate (lower_bound=-5.0), as get_workspace_size."""
    fn = "flash_kda.get_transition_workspace_size"
    if not gate_in_kernel:
        A_log = dt_bias = None
    return int(torch.ops.flash_kda.transition_workspace_size(
        q, k, v, g, beta, D, M, A_log, dt_bias, None if lower_bound is None else float(lower_bound),
        cu_seqlens, bool(beta_sigmoid), bool(qk_l2norm), bool(gate_in_kernel), bool(allow_neg_eigval),
        _context_split(fn, context_split), _context_method(fn, context_method)))


def segment_transition(q, k, v, g, beta, scale, A_log, dt_bias, lower_bound, cu_seqlens=None, *,
                       D=None, M=None, num_transitions=None, workspace=None, gate_in_kernel=True,
                       beta_sigmoid=True, qk_l2norm=True, allow_neg_eigval=False, context_split=None,
                       context_method=None):
    """(D, M) of the last N_t sequences of a shard, float32; returns ``(D, M)``.

    Inputs as ``flash_kda.fwd`` (same names and options; no out, no states). D [N_t, HV, V, K]
    and M [N_t, HV, K, K] are written when given (views of a larger buffer are fine when every
    [128, 128] matrix is dense, e.g. the two halves of a [N_t, HV, V + K, K] buffer), else
    allocated with N_t = ``num_transitions`` (default: every sequence, N). Row i is sequence
    N - N_t + i. ``num_transitions=0`` (and no D, M) runs only the preparation and returns
    (None, None). ``workspace``: a uint8 tensor of ``get_transition_workspace_size`` bytes; pass
    the same one to ``fwd_prepared`` to reuse the preparation. ``context_method``: 'exact' computes
    every chunk; otherwise (default) a (sequence, head) whose gates prove that its start state
    survives below 2^-24 after its last w <= 4 chunks uses only those (docs/design.md 3.4).
    """
    fn = "flash_kda.segment_transition"
    q, k, v, g, beta, A_log, dt_bias, cu_seqlens = _inputs(fn, q, k, v, g, beta, A_log, dt_bias,
                                                           cu_seqlens, gate_in_kernel)
    for name, t in (("D", D), ("M", M), ("workspace", workspace)):
        _expect_tensor(fn, name, t, optional=True)
    if D is None and M is None:
        n_t = _num_sequences(q, cu_seqlens) if num_transitions is None else int(num_transitions)
        if n_t > 0:
            HV, V, K = v.shape[2], v.shape[3], q.shape[3]
            D = torch.empty(n_t, HV, V, K, dtype=torch.float32, device=q.device)
            M = torch.empty(n_t, HV, K, K, dtype=torch.float32, device=q.device)
    scale = float(q.shape[-1]) ** -0.5 if scale is None else float(scale)
    torch.ops.flash_kda.segment_transition(
        q, k, v, g, beta, scale, D, M, A_log, dt_bias, None if lower_bound is None else float(lower_bound),
        cu_seqlens, workspace, bool(beta_sigmoid), bool(qk_l2norm), bool(gate_in_kernel),
        bool(allow_neg_eigval), _context_split(fn, context_split), _context_method(fn, context_method))
    return D, M


def fwd_prepared(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state=None,
                 final_state=None, cu_seqlens=None, *, workspace, gate_in_kernel=True,
                 beta_sigmoid=True, qk_l2norm=True, allow_neg_eigval=False, context_split=None,
                 context_method=None):
    """``flash_kda.fwd`` reusing the preparation that ``segment_transition`` left in ``workspace``.

    q, k, g, beta, A_log, dt_bias, lower_bound, scale, cu_seqlens and the options must be those of
    that call (same tensors, unchanged), and nothing else may have used the workspace in between;
    v, out, initial_state and final_state are free. Writes out and final_state; returns None.
    """
    fn = "flash_kda.fwd_prepared"
    q, k, v, g, beta, A_log, dt_bias, cu_seqlens = _inputs(fn, q, k, v, g, beta, A_log, dt_bias,
                                                           cu_seqlens, gate_in_kernel)
    _expect_tensor(fn, "out", out)
    _expect_tensor(fn, "workspace", workspace)
    for name, t in (("initial_state", initial_state), ("final_state", final_state)):
        _expect_tensor(fn, name, t, optional=True)
    scale = float(q.shape[-1]) ** -0.5 if scale is None else float(scale)
    initial_state = _dense(initial_state)
    out_buf = out if _ops._rows_ok(out) else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    fs_buf = final_state
    if final_state is not None and not _ops._dense_ok(final_state):
        fs_buf = torch.empty(final_state.shape, dtype=final_state.dtype, device=final_state.device)
    torch.ops.flash_kda.fwd_prepared(
        q, k, v, g, beta, scale, out_buf, workspace, A_log, dt_bias,
        None if lower_bound is None else float(lower_bound), initial_state, fs_buf, cu_seqlens,
        bool(beta_sigmoid), bool(qk_l2norm), bool(gate_in_kernel), bool(allow_neg_eigval),
        _context_split(fn, context_split), _context_method(fn, context_method))
    if out_buf is not out:
        out.copy_(out_buf)
    if fs_buf is not final_state:
        final_state.copy_(fs_buf)


def _flat(fn, name, t):
    """[R, N, HV, V, K] -> [R*N, HV, V, K] (a view when the strides allow, else a copy)."""
    _expect_tensor(fn, name, t)
    if t.dim() != 5:
        raise ValueError(f"{fn}: {name}: expected a 5-D tensor [R, N, HV, 128, 128], got {t.dim()}-D "
                         f"{tuple(t.shape)}")
    return t.reshape(t.shape[0] * t.shape[1], *t.shape[2:])


def combine_transitions(D, M, initial_state=None, *, return_start_states=False, end_state=None):
    """Chains R shards' transitions from a true start state, in float32 on the GPU.

    D [R, N, HV, V, K] and M [R, N, HV, K, K] float32 (shard r of sequence n at [r, n]; views such
    as ``buf[..., :V, :]`` of a packed [R, N, HV, V + K, K] buffer are fine), initial_state
    [N, HV, V, K] float32 or bfloat16 or None (zeros). S(0) = initial_state,
    S(r+1) = S(r) @ M[r].mT + D[r]. Returns end_state = S(R) [N, HV, V, K] float32 (written into
    ``end_state`` when given), or ``(start_states, end_state)`` with ``return_start_states`` where
    start_states[r] = S(r) [R, N, HV, V, K].
    """
    fn = "flash_kda.combine_transitions"
    R = D.shape[0] if isinstance(D, torch.Tensor) and D.dim() == 5 else 0
    Df, Mf = _flat(fn, "D", D), _flat(fn, "M", M)
    _expect_tensor(fn, "initial_state", initial_state, optional=True)
    _expect_tensor(fn, "end_state", end_state, optional=True)
    initial_state = _dense(initial_state)
    N, HV, V, K = D.shape[1], D.shape[2], D.shape[3], D.shape[4]
    end_buf = end_state
    if end_state is None or not _ops._dense_ok(end_state):
        end_buf = torch.empty(N, HV, V, K, dtype=torch.float32, device=D.device)
    starts = None
    if return_start_states:
        starts = torch.empty(R, N, HV, V, K, dtype=torch.float32, device=D.device)
    torch.ops.flash_kda.combine_transitions(
        R, Df, Mf, initial_state, None if starts is None else starts.view(R * N, HV, V, K), end_buf)
    if end_state is not None and end_buf is not end_state:
        end_state.copy_(end_buf)
        end_buf = end_state
    return (starts, end_buf) if return_start_states else end_buf
