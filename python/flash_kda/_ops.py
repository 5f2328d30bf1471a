"""torch.ops glue: loads flash_kda._C, registers the fake kernel, and the upstream-compatible wrappers.

`fwd` is plain Python around `torch.ops.flash_kda.fwd` so that dynamo traces it (torch.compile with
fullgraph=True keeps the op in the graph; the fake kernel below describes it: it returns nothing and
mutates out / final_state / workspace, as the schema says). The wrapper only makes inputs acceptable
to the C API (which wants the last dimension contiguous, other strides multiple of 16 bytes, and
dense states / parameters) by copying where that is not already the case; every validation with
the argument's name is done in C++ before any kernel runs.

Eager fast path: outside torch.compile tracing, `fwd` first offers the call to `_C._fwd_eager`,
which runs the op's C++ implementation directly (no Python-side checks, no dispatcher) when the call
is the plain case: plain CUDA tensors the wrapper would not copy, no torch function / dispatch mode,
no input requiring grad under grad mode, Python numbers and bools. It then does exactly what
`torch.ops.flash_kda.fwd` would do with the same tensors (same kernel launches, same errors, same
"flash_kda::fwd" profiler event); anything else returns NotImplemented untouched and goes through
`_fwd_general`, the torch.ops path. FLASH_KDA_EAGER_FAST_PATH=0 turns the fast path off.
"""
from __future__ import annotations

import os

import torch

from ._version import __version__

try:
    from . import _C  # loading it runs the TORCH_LIBRARY registrations of torch.ops.flash_kda
except ImportError as exc:  # pragma: no cover - depends on the build
    _C = None
    # Built without Python's headers, the ops live in a plain library (same code, no PyInit__C).
    _ops_lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_C_ops.so")
    if not os.path.isfile(_ops_lib):
        raise ImportError(
            f"flash_kda: the compiled extension flash_kda._C could not be loaded: {exc}. "
            f"Build it against the torch in use (torch {torch.__version__}) with "
            "`pip install --no-build-isolation .` in the FlashKDA source tree (torch must be "
            "importable while building). 'undefined symbol' means it was built against another "
            "torch: rebuild it.") from exc
    torch.ops.load_library(_ops_lib)

_register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)

# Opt-in device-side check of cu_seqlens contents (synchronises; not under CUDA-graph capture).
_CHECK_CU_SEQLENS = os.environ.get("FLASH_KDA_CHECK_CU_SEQLENS", "0") not in ("", "0")

# Eager fast path of fwd: _C._fwd_eager(22 arguments in the op's schema order) -> None when it ran the
# op, NotImplemented when the call needs the general path. None when the extension was built without
# it (no Python headers or no libtorch_python) or with FLASH_KDA_EAGER_FAST_PATH=0.
_fwd_eager = getattr(_C, "_fwd_eager", None)
if os.environ.get("FLASH_KDA_EAGER_FAST_PATH", "1") in ("", "0"):
    _fwd_eager = None


@_register_fake("flash_kda::fwd")
def _fwd_fake(*args, **kwargs):
    return None


def _expect_tensor(fn, name, t, optional=False):
    if t is None and optional:
        return
    if not isinstance(t, torch.Tensor):
        kind = "a torch.Tensor or None" if optional else "a torch.Tensor"
        raise TypeError(f"{fn}: {name}: expected {kind}, got {type(t).__name__}")


def _aligned_offset(t):
    if _is_compiling():  # the C API re-checks the data pointer at run time
        return True
    return (t.storage_offset() * t.element_size()) % 16 == 0


def _rows_ok(t):
    """Last dimension contiguous, other strides multiples of 16 bytes, 16-byte aligned start."""
    if t.dim() == 0 or t.numel() == 0:
        return True
    if t.size(-1) > 1 and t.stride(-1) != 1:
        return False
    esz = t.element_size()
    for d in range(t.dim() - 1):
        if t.size(d) > 1 and (t.stride(d) * esz) % 16 != 0:
            return False
    return _aligned_offset(t)


def _rows(t):
    return t if _rows_ok(t) else t.clone(memory_format=torch.contiguous_format)


def _dense_ok(t):
    return t.is_contiguous() and (t.numel() == 0 or _aligned_offset(t))


def _dense(t):
    if t is None or _dense_ok(t):
        return t
    return t.clone(memory_format=torch.contiguous_format)


_CONTEXT_METHODS = {"auto": 0, "exact": 1, "warmup": 2}
_SINGLE_PASS = {"auto": 0, "never": 1, "always": 2}


def _choice(fn, name, value, choices):
    """An option as the C API's integer: None 0, one of the names in `choices`, or the int itself
    (which the C API checks and names)."""
    if value is None:
        return 0
    if isinstance(value, str):
        if value not in choices:
            raise ValueError(f"{fn}: {name}: expected one of {sorted(choices)} or None, got {value!r}")
        return choices[value]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{fn}: {name}: expected a str, an int or None, got {type(value).__name__}")
    return value


def _context_method(fn, method):
    """context_method: None / 'auto' 0, 'exact' 1, 'warmup' 2 (or the int)."""
    return _choice(fn, "context_method", method, _CONTEXT_METHODS)


def _single_pass(fn, choice):
    """single_pass: None / 'auto' 0, 'never' 1, 'always' 2 (or the int)."""
    return _choice(fn, "single_pass", choice, _SINGLE_PASS)


def _context_split(fn, split):
    if split is None:
        return 0
    if isinstance(split, bool) or not isinstance(split, int):
        raise TypeError(f"{fn}: context_split: expected an int or None, got {type(split).__name__}")
    return split


def _param(t):
    """A_log / dt_bias: float32, dense (other float dtypes are cast, as FLA's kernels do)."""
    if t is not None and t.is_floating_point() and t.dtype != torch.float32:
        t = t.to(torch.float32)
    return _dense(t)


def fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state=None,
        final_state=None, cu_seqlens=None, workspace=None, *, gate_in_kernel=True,
        beta_sigmoid=True, qk_l2norm=True, allow_neg_eigval=False, check_cu_seqlens=None,
        context_split=None, context_method=None, single_pass=None):
    """KDA forward, drop-in for MoonshotAI FlashKDA's ``flash_kda.fwd`` (same names and order).

    Writes ``out`` [B, T, HV, V] (bf16) and, if given, ``final_state`` [N, HV, V, K] (bf16 or
    fp32) in place; returns None. q, k [B, T, H, K] bf16; v [B, T, HV, V] bf16 (HV a multiple of
    H); g [B, T, HV, K] and beta [B, T, HV] bf16 or fp32; A_log [HV] fp32 or None (exp(A_log) = 1);
    dt_bias [HV, K] or [HV*K] fp32 or None; lower_bound in [-5, 0) for the bounded gate
    ``lower_bound * sigmoid(exp(A_log) * (g + dt_bias))``, or None for the unbounded gate
    ``-exp(A_log) * softplus(g + dt_bias)``; initial_state [N, HV, V, K] bf16 or fp32 (dtype may
    differ from final_state's); cu_seqlens [N+1] int32 or int64 on the GPU (then B = 1).
    K = V = 128, compute capability 9.0. Tensors may be strided views; they are copied only when
    the kernels cannot read them as they are.

    Beyond upstream: ``scale=None`` means K**-0.5; ``workspace`` is an optional uint8 CUDA tensor
    of at least ``get_workspace_size(...)`` bytes (for CUDA-graph capture; otherwise the op
    allocates it from PyTorch's caching allocator); keyword-only flags mirror FLA's ``*_in_kernel``
    options: ``gate_in_kernel=False`` means g is already the log-decay (A_log, dt_bias,
    lower_bound ignored), ``beta_sigmoid=False`` means beta is already a probability,
    ``qk_l2norm=False`` uses q and k as given, ``allow_neg_eigval`` doubles beta;
    ``check_cu_seqlens=True`` (or env FLASH_KDA_CHECK_CU_SEQLENS=1) validates cu_seqlens' contents
    on the device (synchronises; not capturable). Runs on the current stream of q's device.
    ``context_split`` (None / 0 automatic, 1 never, n pieces) and ``context_method`` (None /
    'auto', 'exact' combine or bounded 'warmup'; README, docs/design.md §3) steer how long
    sequences with few heads are split over the GPU, for tests and tuning; pass the same values
    to ``get_workspace_size``. ``single_pass`` (None / 'auto', 'never', 'always': the C API's
    kda_single_pass) picks between the one-kernel forward and the preparation plus recurrence;
    'never' is the choice for models whose gates decay slowly (README, "Layout and design": the
    single pass's fallback), 'always'
    raises ValueError where the single pass does not take the call. The workspace size depends on
    it: pass the same value to ``get_workspace_size``.

    In eager mode the common case (plain CUDA tensors that need no copy, Python numbers, no
    torch function / dispatch mode, no input requiring grad while grad mode is on) runs the
    op's C++ implementation directly, skipping the Python checks and the dispatcher; the
    result, the errors and the stream are those of ``torch.ops.flash_kda.fwd``.
    """
    if check_cu_seqlens is None:
        check_cu_seqlens = _CHECK_CU_SEQLENS
    if context_split is not None or context_method is not None:
        context_split = _context_split("flash_kda.fwd", context_split)
        context_method = _context_method("flash_kda.fwd", context_method)
    else:
        context_split = context_method = 0
    single_pass = 0 if single_pass is None else _single_pass("flash_kda.fwd", single_pass)
    # Not while dynamo traces this function (that keeps torch.ops.flash_kda.fwd in the graph).
    if not _is_compiling() and _fwd_eager is not None and _fwd_eager(
            q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state, final_state,
            cu_seqlens, workspace, beta_sigmoid, qk_l2norm, gate_in_kernel, allow_neg_eigval,
            check_cu_seqlens, context_split, context_method, single_pass) is None:
        return None
    return _fwd_general(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state,
                        final_state, cu_seqlens, workspace, gate_in_kernel=gate_in_kernel,
                        beta_sigmoid=beta_sigmoid, qk_l2norm=qk_l2norm,
                        allow_neg_eigval=allow_neg_eigval, check_cu_seqlens=check_cu_seqlens,
                        context_split=context_split, context_method=context_method, single_pass=single_pass)


def _fwd_general(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state=None,
                 final_state=None, cu_seqlens=None, workspace=None, *, gate_in_kernel=True,
                 beta_sigmoid=True, qk_l2norm=True, allow_neg_eigval=False, check_cu_seqlens=None,
                 context_split=None, context_method=None, single_pass=None):
    """fwd through torch.ops.flash_kda.fwd, for every input (the path before the eager fast path,
    and the one dynamo traces): checks the Python types, copies what the C API cannot read as it
    is, calls the op, copies results back into strided out / final_state."""
    fn = "flash_kda.fwd"
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("out", out)):
        _expect_tensor(fn, name, t)
    for name, t in (("A_log", A_log), ("dt_bias", dt_bias), ("initial_state", initial_state),
                    ("final_state", final_state), ("cu_seqlens", cu_seqlens), ("workspace", workspace)):
        _expect_tensor(fn, name, t, optional=True)
    if isinstance(scale, torch.Tensor) or isinstance(lower_bound, torch.Tensor):
        raise TypeError(f"{fn}: scale and lower_bound must be Python numbers, not tensors")

    scale = float(q.shape[-1]) ** -0.5 if scale is None else float(scale)
    lower_bound = None if lower_bound is None else float(lower_bound)
    if not gate_in_kernel:
        A_log = dt_bias = None
    if check_cu_seqlens is None:
        check_cu_seqlens = _CHECK_CU_SEQLENS

    q, k, v, g = _rows(q), _rows(k), _rows(v), _rows(g)
    if beta.dim() > 0 and beta.size(-1) > 1 and beta.stride(-1) != 1:
        beta = beta.contiguous()
    A_log, dt_bias = _param(A_log), _param(dt_bias)
    initial_state = _dense(initial_state)
    if cu_seqlens is not None:
        cu_seqlens = cu_seqlens.contiguous()

    out_buf = out if _rows_ok(out) else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    fs_buf = final_state
    if final_state is not None and not _dense_ok(final_state):
        fs_buf = torch.empty(final_state.shape, dtype=final_state.dtype, device=final_state.device)

    torch.ops.flash_kda.fwd(q, k, v, g, beta, scale, out_buf, A_log, dt_bias, lower_bound,
                            initial_state, fs_buf, cu_seqlens, workspace, bool(beta_sigmoid),
                            bool(qk_l2norm), bool(gate_in_kernel), bool(allow_neg_eigval),
                            bool(check_cu_seqlens), _context_split(fn, context_split),
                            _context_method(fn, context_method), _single_pass(fn, single_pass))
    if out_buf is not out:
        out.copy_(out_buf)
    if fs_buf is not final_state:
        final_state.copy_(fs_buf)


def get_workspace_size(q, k=None, v=None, g=None, beta=None, A_log=None, dt_bias=None,
                       lower_bound=-5.0, initial_state=None, final_state=None, cu_seqlens=None, *,
                       gate_in_kernel=True, beta_sigmoid=True, qk_l2norm=True,
                       allow_neg_eigval=False, context_split=None, context_method=None, single_pass=None):
    """Bytes of workspace ``fwd`` needs for these inputs (shapes and options only; any device).

    Pass the tensors (or meta tensors of the same shapes) and options you will pass to ``fwd``;
    note the default here is the bounded gate (lower_bound=-5.0): pass lower_bound=None for the
    unbounded one. Upstream's form ``get_workspace_size(T_total, H, N)`` is also accepted
    (HV = H, bounded gate, N packed sequences, fp32 states).
    """
    fn_short = "flash_kda.get_workspace_size"
    if not isinstance(q, torch.Tensor):
        T_total, H, N = int(q), int(k), int(v)
        meta = {"device": "meta"}
        x = torch.empty(1, T_total, H, 128, dtype=torch.bfloat16, **meta)
        beta = torch.empty(1, T_total, H, dtype=torch.bfloat16, **meta)
        A_log = torch.empty(H, dtype=torch.float32, **meta)
        dt_bias = torch.empty(H, 128, dtype=torch.float32, **meta)
        state = torch.empty(N, H, 128, 128, dtype=torch.float32, **meta)
        cu = torch.empty(N + 1, dtype=torch.int64, **meta)
        return int(torch.ops.flash_kda.get_workspace_size(
            x, x, x, x, beta, A_log, dt_bias, -5.0, state, state, cu, True, True, True, False,
            _context_split(fn_short, context_split), _context_method(fn_short, context_method),
            _single_pass(fn_short, single_pass)))
    fn = "flash_kda.get_workspace_size"
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        _expect_tensor(fn, name, t)
    if not gate_in_kernel:
        A_log = dt_bias = None
    return int(torch.ops.flash_kda.get_workspace_size(
        q, k, v, g, beta, A_log, dt_bias, None if lower_bound is None else float(lower_bound),
        initial_state, final_state, cu_seqlens, bool(beta_sigmoid), bool(qk_l2norm),
        bool(gate_in_kernel), bool(allow_neg_eigval), _context_split(fn, context_split),
        _context_method(fn, context_method), _single_pass(fn, single_pass)))


def build_info():
    """Facts about this build: version, git commit (followed by "-dirty" when tracked files differed
    from it, "unknown" where the source was not the top of a git checkout), CUDA version and SM
    architectures of the kernels, the torch version the extension was built against and the one
    running now."""
    info = dict(item.split("=", 1) for item in torch.ops.flash_kda.build_info().split(";") if "=" in item)
    if info.get("cuda_version", "").isdigit():
        info["cuda_version"] = int(info["cuda_version"])
    version = info.get("version", "")
    info["commit"] = version.split("+", 1)[1] if "+" in version else "unknown"
    info["package_version"] = __version__
    info["torch_runtime_version"] = torch.__version__
    return info
