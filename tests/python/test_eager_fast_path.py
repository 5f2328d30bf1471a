"""flash_kda.fwd's eager fast path (_C._fwd_eager) against the general path (_ops._fwd_general,
Python checks and copies + torch.ops.flash_kda.fwd).

The fast path must take the plain calls and give bit-identical results (the kernels are
deterministic), raise the same errors, record the same profiler event, and decline every other call
(NotImplemented, nothing written), which flash_kda.fwd then runs through the general path.
"""
import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import flash_kda  # noqa: E402
from flash_kda import _ops  # noqa: E402

if _ops._C is None:
    pytest.skip("flash_kda was built without Python's headers (flash_kda/_C_ops.so): no eager fast path",
                allow_module_level=True)

EAGER = getattr(_ops._C, "_fwd_eager", None)
NAN = float("nan")


def test_fast_path_is_built():
    assert EAGER is not None, "flash_kda._C has no _fwd_eager: libtorch_python was not found at build time"


needs_eager = pytest.mark.skipif(EAGER is None, reason="built without the eager fast path")


def _case(name):
    """(inputs dict, fwd keyword arguments) of a call the fast path takes."""
    f32, bf16 = torch.float32, torch.bfloat16
    kw = dict(lower_bound=-5.0, final_dtype=f32)
    if name == "dense":
        d = U.make_inputs(B=2, T=70, H=2, state_dtype=f32)
    elif name == "varlen_int32":
        d = U.make_inputs(seqlens=[17, 0, 64, 3], H=2, state_dtype=f32)
        d["cu_seqlens"] = d["cu_seqlens"].to(torch.int32)
    elif name == "gva_bf16_states":
        d = U.make_inputs(B=1, T=100, H=2, HV=4, state_dtype=bf16)
        kw["final_dtype"] = bf16
    elif name == "softplus_no_params":
        d = U.make_inputs(B=1, T=60, H=2, state_dtype=f32)
        d["A_log"] = d["dt_bias"] = None
        kw["lower_bound"] = None
    elif name == "scale_none_int_lower_bound":
        d = U.make_inputs(B=1, T=60, H=2, state_dtype=f32)
        d["scale"] = None
        kw["lower_bound"] = -5  # an int, turned into -5.0 as float() would
    elif name == "no_states":
        d = U.make_inputs(B=1, T=60, H=2)
        kw["final_dtype"] = None
    elif name == "fp32_g_beta_flat_dt_bias":
        d = U.make_inputs(B=1, T=60, H=2, state_dtype=f32, g_dtype=f32, beta_dtype=f32)
        d["dt_bias"] = d["dt_bias"].reshape(-1)
    elif name == "strided_rows":  # slices of a fused projection: no copy needed
        d = U.make_inputs(B=2, T=50, H=2, state_dtype=f32)
        B, T, H, K = d["q"].shape
        qkv = torch.randn(B, T, H, 3 * K, dtype=bf16, device="cuda")
        d.update(q=qkv[..., :K], k=qkv[..., K:2 * K], v=qkv[..., 2 * K:])
    elif name == "preactivated":
        d = U.make_inputs(B=1, T=60, H=2, state_dtype=f32)
        d["g"] = -F.softplus(d["g"].float())  # already the log-decay
        d["beta"] = torch.sigmoid(d["beta"].float())
        d["q"] = F.normalize(d["q"].float(), dim=-1).to(bf16)
        d["k"] = F.normalize(d["k"].float(), dim=-1).to(bf16)
        kw.update(gate_in_kernel=False, beta_sigmoid=False, qk_l2norm=False)
    elif name == "neg_eigval_check_cu":
        d = U.make_inputs(seqlens=[40, 90], H=2, state_dtype=f32)
        kw.update(allow_neg_eigval=True, check_cu_seqlens=True)
    elif name == "empty_batch":
        d = U.make_inputs(B=2, T=0, H=2, state_dtype=f32)
    elif name == "caller_workspace":
        d = U.make_inputs(seqlens=[300, 77], H=2, state_dtype=f32)
        size = flash_kda.get_workspace_size(*[d[n] for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias")],
                                            -5.0, d["initial_state"], d["initial_state"], d["cu_seqlens"])
        kw["workspace"] = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")
    elif name == "parameters_under_no_grad":  # nn.Parameter A_log / dt_bias, as in a model
        d = U.make_inputs(B=1, T=60, H=2, state_dtype=f32)
        d["A_log"] = torch.nn.Parameter(d["A_log"])
        d["dt_bias"] = torch.nn.Parameter(d["dt_bias"])
    elif name in ("many_pairs_never", "many_pairs_always"):  # 96 pairs: the single pass by default
        d = U.make_inputs(B=1, T=64, H=96, state_dtype=f32)
        kw["single_pass"] = 1 if name == "many_pairs_never" else 2
    else:
        raise AssertionError(name)
    return d, kw


TAKEN = ["dense", "varlen_int32", "gva_bf16_states", "softplus_no_params", "scale_none_int_lower_bound",
         "no_states", "fp32_g_beta_flat_dt_bias", "strided_rows", "preactivated", "neg_eigval_check_cu",
         "empty_batch", "caller_workspace", "parameters_under_no_grad", "many_pairs_never", "many_pairs_always"]


def _buffers(d, final_dtype):
    out = torch.full(d["v"].shape, NAN, dtype=torch.bfloat16, device="cuda")
    fs = None
    if final_dtype is not None:
        N = d["cu_seqlens"].numel() - 1 if d["cu_seqlens"] is not None else d["q"].shape[0]
        fs = torch.full((N, d["v"].shape[2], 128, 128), NAN, dtype=final_dtype, device="cuda")
    return out, fs


def _eager_args(d, out, fs, lower_bound=-5.0, workspace=None, gate_in_kernel=True, beta_sigmoid=True,
                qk_l2norm=True, allow_neg_eigval=False, check_cu_seqlens=False, context_split=0, context_method=0,
                single_pass=0):
    """_C._fwd_eager's positional arguments (the op's schema order)."""
    return (d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"], lower_bound,
            d["initial_state"], fs, d["cu_seqlens"], workspace, beta_sigmoid, qk_l2norm, gate_in_kernel,
            allow_neg_eigval, check_cu_seqlens, context_split, context_method, single_pass)


def _run(fn, d, final_dtype=torch.float32, **kw):
    """fn (flash_kda.fwd or _ops._fwd_general) on fresh NaN-filled buffers -> (out, final_state)."""
    out, fs = _buffers(d, final_dtype)
    fn(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"],
       kw.pop("lower_bound", -5.0), initial_state=d["initial_state"], final_state=fs, cu_seqlens=d["cu_seqlens"],
       **kw)
    return out, fs


def _same(a, b):
    return torch.equal(a[0], b[0]) and (a[1] is None and b[1] is None or torch.equal(a[1], b[1]))


def _check_taken(name, d, kw):
    final_dtype = kw.pop("final_dtype")
    out, fs = _buffers(d, final_dtype)
    assert EAGER(*_eager_args(d, out, fs, **kw)) is None, f"{name}: the fast path declined a plain call"
    general = _run(_ops._fwd_general, d, final_dtype, **dict(kw))
    public = _run(flash_kda.fwd, d, final_dtype, **dict(kw))
    torch.cuda.synchronize()
    assert _same((out, fs), general), f"{name}: fast path and torch.ops path differ"
    assert _same(public, general), f"{name}: flash_kda.fwd and the torch.ops path differ"
    if d["q"].numel() > 0:
        assert not torch.isnan(out.float()).any()


@needs_eager
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
@pytest.mark.parametrize("name", TAKEN)
def test_fast_path_taken_and_identical(name, mode):
    d, kw = _case(name)
    with torch.inference_mode() if mode == "inference_mode" else torch.no_grad():
        _check_taken(name, d, kw)


@needs_eager
@pytest.mark.parametrize("name", ["dense", "varlen_int32", "strided_rows", "empty_batch"])
def test_fast_path_takes_inference_tensors(name):
    with torch.inference_mode():  # tensors made here have no autograd keys (FLA's case)
        d, kw = _case(name)
        assert d["q"].is_inference()
        _check_taken(name, d, kw)


@needs_eager
def test_fast_path_with_grad_mode_on_and_nothing_requiring_grad():
    d, kw = _case("dense")
    kw.pop("final_dtype")
    out, fs = _buffers(d, torch.float32)
    assert torch.is_grad_enabled()
    assert EAGER(*_eager_args(d, out, fs, **kw)) is None
    assert _same((out, fs), _run(_ops._fwd_general, d, **kw))


# ---- calls the fast path declines: untouched buffers, then the general path gives the result ----

class _Sub(torch.Tensor):
    pass


class _FunctionMode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _DispatchMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _Float(float):
    pass


def _declined_case(name):
    """(inputs, fwd keyword arguments, context manager) of a call the fast path must decline."""
    import contextlib
    f32 = torch.float32
    d = U.make_inputs(B=2, T=50, H=2, state_dtype=f32)
    kw, ctx = {}, contextlib.nullcontext()
    if name == "q_last_dim_strided":
        d["q"] = d["q"].transpose(-1, -2).contiguous().transpose(-1, -2)
    elif name == "k_misaligned":
        flat = torch.empty(d["k"].numel() + 1, dtype=d["k"].dtype, device="cuda")
        k = flat[1:].view(d["k"].shape)
        k.copy_(d["k"])
        d["k"] = k
    elif name == "beta_last_dim_strided":
        d["beta"] = d["beta"].transpose(0, 2).contiguous().transpose(0, 2)
    elif name == "A_log_bf16":
        d["A_log"] = d["A_log"].to(torch.bfloat16)
    elif name == "dt_bias_not_dense":
        d["dt_bias"] = d["dt_bias"].t().contiguous().t()
    elif name == "initial_state_not_dense":
        d["initial_state"] = d["initial_state"].transpose(-1, -2).contiguous().transpose(-1, -2)
    elif name == "cu_seqlens_strided":
        d = U.make_inputs(seqlens=[30, 70], H=2, state_dtype=f32)
        d["cu_seqlens"] = torch.stack([d["cu_seqlens"], d["cu_seqlens"]], dim=1)[:, 0]
    elif name == "tensor_subclass":
        d["v"] = d["v"].as_subclass(_Sub)
    elif name == "requires_grad_with_grad_mode":
        d["A_log"] = torch.nn.Parameter(d["A_log"])
    elif name == "float_subclass_scale":
        d["scale"] = _Float(d["scale"])
    elif name == "int_flag":
        kw["beta_sigmoid"] = 1
    elif name == "torch_function_mode":
        ctx = _FunctionMode()
    elif name == "torch_dispatch_mode":
        ctx = _DispatchMode()
    else:
        raise AssertionError(name)
    return d, kw, ctx


DECLINED = ["q_last_dim_strided", "k_misaligned", "beta_last_dim_strided", "A_log_bf16", "dt_bias_not_dense",
            "initial_state_not_dense", "cu_seqlens_strided", "tensor_subclass", "requires_grad_with_grad_mode",
            "float_subclass_scale", "int_flag", "torch_function_mode", "torch_dispatch_mode"]


@needs_eager
@pytest.mark.parametrize("name", DECLINED)
def test_fast_path_declines_and_general_path_runs(name):
    d, kw, ctx = _declined_case(name)
    out, fs = _buffers(d, torch.float32)
    with ctx:
        assert EAGER(*_eager_args(d, out, fs, **kw)) is NotImplemented, f"{name}: the fast path took the call"
    torch.cuda.synchronize()
    assert torch.isnan(out.float()).all() and torch.isnan(fs).all(), f"{name}: a declined call wrote its outputs"
    with ctx:
        public = _run(flash_kda.fwd, d, **dict(kw))
        general = _run(_ops._fwd_general, d, **dict(kw))
    torch.cuda.synchronize()
    assert _same(public, general)
    # Same values as plain inputs through the fast path (layouts, wrappers and modes change nothing).
    plain = {n: (t.as_subclass(torch.Tensor).detach().contiguous() if isinstance(t, torch.Tensor) else t)
             for n, t in d.items()}
    if name == "A_log_bf16":
        plain["A_log"] = plain["A_log"].float()
    if name == "float_subclass_scale":
        plain["scale"] = float(plain["scale"])
    with torch.no_grad():
        ref = _run(flash_kda.fwd, plain, **{k: bool(v) for k, v in kw.items()})
    assert _same(public, ref)


def test_default_device_context_same_result():
    """Under `with torch.device("cuda")` (a torch function mode) fwd gives the plain result, whichever
    path it takes."""
    d = U.make_inputs(B=1, T=40, H=2, state_dtype=torch.float32)
    plain = _run(flash_kda.fwd, d)
    with torch.device("cuda"):
        inside = _run(flash_kda.fwd, d)
    assert _same(plain, inside)


@needs_eager
def test_fwd_routes_plain_calls_to_the_fast_path(monkeypatch):
    calls = []
    general = _ops._fwd_general

    def counting(*args, **kwargs):
        calls.append(1)
        return general(*args, **kwargs)

    monkeypatch.setattr(_ops, "_fwd_general", counting)
    d = U.make_inputs(B=1, T=40, H=2, state_dtype=torch.float32)
    fast = _run(flash_kda.fwd, d)
    assert not calls, "a plain call went through the general path"
    d2 = {**d, "q": d["q"].transpose(-1, -2).contiguous().transpose(-1, -2)}
    slow = _run(flash_kda.fwd, d2)
    assert len(calls) == 1, "a call needing a copy did not go through the general path"
    monkeypatch.setattr(_ops, "_fwd_eager", None)  # as with FLASH_KDA_EAGER_FAST_PATH=0
    off = _run(flash_kda.fwd, d)
    assert len(calls) == 2
    assert _same(fast, slow) and _same(fast, off)


# ---- errors: the fast path takes these calls and raises what the torch.ops path raises ----

def _error_overrides(name):
    c, f32 = (lambda *s, dtype=torch.bfloat16: torch.randn(*s, device="cuda").to(dtype)), torch.float32
    return {
        "k_shape": dict(k=c(1, 39, 2, 128)),
        "v_headdim": dict(v=c(1, 40, 2, 64)),
        "q_dtype": dict(q=c(1, 40, 2, 128, dtype=torch.float16)),
        "out_dtype": dict(out=c(1, 40, 2, 128, dtype=f32)),
        "A_log_shape": dict(A_log=c(3, dtype=f32)),
        "lb_high": dict(lower_bound=0.5),
        "init_dtype": dict(initial_state=c(1, 2, 128, 128, dtype=torch.float16)),
        "final_shape": dict(final_state=c(1, 2, 128, 64, dtype=f32)),
        "cu_batch": dict(q=c(2, 20, 2, 128), k=c(2, 20, 2, 128), v=c(2, 20, 2, 128), g=c(2, 20, 2, 128),
                         beta=c(2, 20, 2), out=c(2, 20, 2, 128),
                         cu_seqlens=torch.tensor([0, 40], device="cuda")),
        "ws_dtype": dict(workspace=torch.empty(1 << 20, dtype=f32, device="cuda")),
        "ws_small": dict(workspace=torch.empty(0, dtype=torch.uint8, device="cuda")),
    }[name]


@needs_eager
@pytest.mark.parametrize("name", ["k_shape", "v_headdim", "q_dtype", "out_dtype", "A_log_shape", "lb_high",
                                  "init_dtype", "final_shape", "cu_batch", "ws_dtype", "ws_small"])
def test_fast_path_errors_match_general_path(name):
    d = U.make_inputs(B=1, T=40, H=2, state_dtype=torch.float32)
    kw = dict(q=d["q"], k=d["k"], v=d["v"], g=d["g"], beta=d["beta"], scale=d["scale"],
              out=torch.empty_like(d["v"]), A_log=d["A_log"], dt_bias=d["dt_bias"], lower_bound=-5.0,
              initial_state=d["initial_state"], final_state=torch.empty(1, 2, 128, 128, device="cuda"),
              cu_seqlens=None, workspace=None)
    kw.update(_error_overrides(name))
    if name == "ws_small" and flash_kda.get_workspace_size(
            d["q"], d["k"], d["v"], d["g"], d["beta"], d["A_log"], d["dt_bias"], -5.0, d["initial_state"],
            kw["final_state"]) == 0:
        pytest.skip("this build needs no workspace for the case")
    args = tuple(kw.values()) + (True, True, True, False, False, 0, 0, 0)  # flags, context_*, single_pass
    errors = []
    for call in (lambda: EAGER(*args), lambda: _ops._fwd_general(**kw), lambda: flash_kda.fwd(**kw)):
        with pytest.raises(Exception) as info:
            result = call()
            print(f"\n[{name}] returned {result!r} instead of raising")
        errors.append((type(info.value), str(info.value)))
    torch.cuda.synchronize()
    print(f"\n[{name}] {errors[0][0].__name__}: {errors[0][1].splitlines()[0]}")
    assert errors[0] == errors[1] == errors[2]


@needs_eager
def test_fast_path_records_the_op_for_the_profiler():
    d = U.make_inputs(B=1, T=40, H=2, state_dtype=torch.float32)
    out, fs = _buffers(d, torch.float32)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        assert EAGER(*_eager_args(d, out, fs)) is None
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}
    assert "flash_kda::fwd" in names, sorted(names)[:40]
