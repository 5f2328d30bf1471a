"""FlashKDA: Kimi Delta Attention forward (prefill) for NVIDIA Hopper (compute capability 9.0).

Drop-in replacement for MoonshotAI's ``flash_kda`` package (same import name and ``fwd``
signature, so flash-linear-attention dispatches ``chunk_kda`` here); uninstall the other one.

    flash_kda.fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound,
                  initial_state=None, final_state=None, cu_seqlens=None, workspace=None)
    flash_kda.fwd_cp(..., auto_cp=True)                     # upstream's CP entry point: fwd, split allowed
    flash_kda.get_workspace_size(q, k, v, g, beta, ...)     # bytes, for a caller workspace
    flash_kda.chunk_kda(q, k, v, g, beta, ...)              # FLA keywords -> (out, final_state)
    flash_kda.build_info()                                  # versions, CUDA, archs, commit
    flash_kda.decode(q, k, v, g, beta, state_pool, state_indices, ...)   # decode / verify, pool in place
    flash_kda.fused_recurrent_kda(q, k, v, g, beta, ...)    # FLA keywords -> (out, final_state)
    flash_kda.distributed.fwd(q, k, v, g, beta, ..., group=g)  # tokens sharded over ranks (NCCL)
    flash_kda.segment_transition / combine_transitions / fwd_prepared   # its building blocks

The op is also reachable as ``torch.ops.flash_kda.fwd`` (schema with mutation annotations, a fake
kernel for torch.compile). In eager mode ``fwd`` runs plain calls through a direct C++ entry point
(same implementation, no dispatcher; see _ops.py). Install: ``pip install --no-build-isolation .``
(torch must be importable at build time).
"""
from ._version import __version__
from ._ops import build_info, fwd, get_workspace_size
from ._chunk import chunk_kda
from ._decode import decode, fused_recurrent_kda
from ._cp import combine_transitions, fwd_prepared, get_transition_workspace_size, segment_transition
from .cp import fwd_cp
from . import distributed

__all__ = ["__version__", "build_info", "chunk_kda", "combine_transitions", "decode", "distributed",
           "fused_recurrent_kda", "fwd", "fwd_cp", "fwd_prepared", "get_transition_workspace_size", "get_workspace_size",
           "segment_transition"]
