"""``flash_kda.cp.fwd_cp``: upstream FlashKDA's entry point for intra-card context parallelism.

Upstream (MoonshotAI FlashKDA) added ``flash_kda.fwd_cp(..., auto_cp=True)``, a Python wrapper that
splits long sequences into segments and runs ``fwd`` twice (a warm-up without transition matrices,
with host synchronisations for cu_seqlens and the gates). Here ``flash_kda.fwd`` already splits long
sequences with few heads over the GPU when that is faster, inside one call (exact combine or the
bounded warm-up: docs/design.md §3.1-§3.2; README, "Layout and design"), so ``fwd_cp`` is ``fwd`` with that
split allowed (``auto_cp=True``, upstream's default: the same call as ``fwd``, the same results bit
for bit) or turned off (``auto_cp=False``: ``context_split=1``, one segment per sequence; results
differ from the automatic plan's by rounding only). Like ``fwd``, it does not synchronise the host
(unless FLASH_KDA_CHECK_CU_SEQLENS=1 asks for the device check of cu_seqlens) and is CUDA-graph
capturable.
"""
from __future__ import annotations

from ._ops import fwd


def _auto_cp(value):
    # Upstream tests `not auto_cp`; a bool or the ints 0 / 1 keep that meaning, anything else (None, a
    # string, a tensor) is more likely a misplaced argument than a choice.
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError(f"flash_kda.fwd_cp: auto_cp: expected a bool (or 0 / 1), got "
                    f"{type(value).__name__} {value!r}")


def fwd_cp(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state=None,
           final_state=None, cu_seqlens=None, auto_cp=True):
    """KDA forward with intra-card context parallelism; upstream FlashKDA's ``flash_kda.fwd_cp``.

    The arguments of ``flash_kda.fwd`` (same names and order), plus ``auto_cp``: True (default)
    lets ``fwd`` split long sequences over the GPU when its plan finds that faster, False keeps
    every sequence in one segment. Writes ``out`` and ``final_state`` in place; returns None.
    """
    split = None if _auto_cp(auto_cp) else 1
    return fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state, final_state,
               cu_seqlens, context_split=split)
