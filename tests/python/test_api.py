"""flash_kda.fwd / chunk_kda API: bad inputs name the argument; accepted variants give the same result.

Accuracy bounds here are loose sanity bounds against the float64 reference on random inputs
(structural bugs give errors near 1); the precise accuracy rule is test_golden.py's.
"""
import re

import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402

import flash_kda  # noqa: E402

SANITY = 1e-2  # relative L2 vs float64 on random data


def _args(d, out=None, lower_bound=-5.0, final_state=None):
    out = torch.empty_like(d["v"]) if out is None else out
    return dict(q=d["q"], k=d["k"], v=d["v"], g=d["g"], beta=d["beta"], scale=d["scale"], out=out,
                A_log=d["A_log"], dt_bias=d["dt_bias"], lower_bound=lower_bound,
                initial_state=d["initial_state"], final_state=final_state, cu_seqlens=d["cu_seqlens"])


def _expect_error(name, exc=ValueError, **overrides):
    d = U.make_inputs(B=1, T=40, H=2, state_dtype=torch.float32)
    kw = _args(d, final_state=torch.empty(1, 2, 128, 128, device="cuda"))
    kw.update(overrides)
    with pytest.raises(exc) as info:
        flash_kda.fwd(**kw)
    torch.cuda.synchronize()
    msg = str(info.value)
    print(f"\n[{name}] {type(info.value).__name__}: {msg.splitlines()[0]}")
    assert re.search(rf"(^|[\s:(]){re.escape(name)}\b", msg), f"error does not name {name!r}: {msg}"


def _cuda(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="cuda").to(dtype)


@pytest.mark.parametrize("case", [
    "q_dtype", "q_rank", "k_shape", "v_headdim", "v_heads", "g_dtype", "beta_shape", "out_dtype",
    "out_shape", "A_log_shape", "dt_bias_shape", "lb_high", "lb_low", "init_shape", "init_dtype",
    "final_shape", "cu_dtype", "cu_batch", "ws_small", "ws_dtype", "q_cpu", "k_cpu", "A_log_cpu",
    "cu_cpu", "all_cpu",
])
def test_bad_input_names_argument(case):
    c, f32 = _cuda, torch.float32
    table = {
        "q_dtype": ("q", dict(q=c(1, 40, 2, 128, dtype=torch.float16))),
        "q_rank": ("q", dict(q=c(40, 2, 128))),
        "k_shape": ("k", dict(k=c(1, 39, 2, 128))),
        "v_headdim": ("v", dict(v=c(1, 40, 2, 64))),
        "v_heads": ("v", dict(v=c(1, 40, 3, 128))),
        "g_dtype": ("g", dict(g=c(1, 40, 2, 128, dtype=torch.float16))),
        "beta_shape": ("beta", dict(beta=c(1, 40, 3))),
        "out_dtype": ("out", dict(out=c(1, 40, 2, 128, dtype=f32))),
        "out_shape": ("out", dict(out=c(1, 41, 2, 128))),
        "A_log_shape": ("A_log", dict(A_log=c(3, dtype=f32))),
        "dt_bias_shape": ("dt_bias", dict(dt_bias=c(2, 64, dtype=f32))),
        "lb_high": ("lower_bound", dict(lower_bound=0.5)),
        "lb_low": ("lower_bound", dict(lower_bound=-6.0)),
        "init_shape": ("initial_state", dict(initial_state=c(2, 2, 128, 128, dtype=f32))),
        "init_dtype": ("initial_state", dict(initial_state=c(1, 2, 128, 128, dtype=torch.float16))),
        "final_shape": ("final_state", dict(final_state=c(1, 2, 128, 64, dtype=f32))),
        "cu_dtype": ("cu_seqlens", dict(cu_seqlens=torch.tensor([0.0, 40.0], device="cuda"))),
        "cu_batch": ("cu_seqlens", dict(q=c(2, 20, 2, 128), k=c(2, 20, 2, 128), v=c(2, 20, 2, 128),
                                         g=c(2, 20, 2, 128), beta=c(2, 20, 2), out=c(2, 20, 2, 128),
                                         cu_seqlens=torch.tensor([0, 40], device="cuda"))),
        "ws_small": ("workspace", dict(workspace=torch.empty(0, dtype=torch.uint8, device="cuda"))),
        "ws_dtype": ("workspace", dict(workspace=torch.empty(1 << 20, dtype=f32, device="cuda"))),
        "q_cpu": ("q", dict(q=c(1, 40, 2, 128).cpu())),
        "k_cpu": ("k", dict(k=c(1, 40, 2, 128).cpu())),
        "A_log_cpu": ("A_log", dict(A_log=torch.rand(2))),
        "cu_cpu": ("cu_seqlens", dict(cu_seqlens=torch.tensor([0, 40]))),
    }
    if case == "ws_small":
        d = U.make_inputs(B=1, T=40, H=2, state_dtype=torch.float32)
        need = flash_kda.get_workspace_size(*[d[n] for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias")],
                                            -5.0, d["initial_state"], d["initial_state"])
        if need == 0:
            pytest.skip("this build needs no workspace for the case")
    if case == "all_cpu":
        d = U.make_inputs(B=1, T=8, H=2, device="cpu")
        with pytest.raises(ValueError, match=r"q: expected a CUDA tensor"):
            flash_kda.fwd(**_args(d))
        return
    name, overrides = table[case]
    _expect_error(name, **overrides)


def test_wrong_python_types():
    d = U.make_inputs(T=16)
    with pytest.raises(TypeError, match="q: expected a torch.Tensor"):
        flash_kda.fwd(**{**_args(d), "q": [1, 2, 3]})
    with pytest.raises(ValueError, match="state_v_first"):
        flash_kda.chunk_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], state_v_first=False)


def _noncontig(x, how):
    """Same values, other layout: 'slice' (strided rows, no copy needed), 'transpose' (last dim
    strided: copy needed), 'offset' (start misaligned by one element: copy needed)."""
    if how == "slice":
        big = torch.empty(*x.shape[:-1], x.shape[-1] * 2 + 8, dtype=x.dtype, device=x.device)
        big[..., 8:8 + x.shape[-1]] = x
        return big[..., 8:8 + x.shape[-1]]
    if how == "transpose":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    flat = torch.empty(x.numel() + 1, dtype=x.dtype, device=x.device)
    y = flat[1:].view(x.shape)
    y.copy_(x)
    return y


@pytest.mark.parametrize("how", ["slice", "transpose", "offset"])
def test_noncontiguous_inputs_match_contiguous(how):
    d = U.make_inputs(B=2, T=50, H=2, state_dtype=torch.float32, g_dtype=torch.float32)
    ref_out, ref_fs = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    nd = dict(d)
    for n in ("q", "k", "v", "g"):
        nd[n] = _noncontig(d[n], how)
    nd["beta"] = _noncontig(d["beta"], "slice" if how == "slice" else "transpose")
    out = _noncontig(torch.zeros_like(d["v"]), how)
    fs = torch.empty(2, 2, 128, 128, device="cuda").transpose(-1, -2)  # written through a copy
    flash_kda.fwd(**{**_args(nd, out=out), "final_state": fs})
    assert torch.equal(out, ref_out) and torch.equal(fs, ref_fs)


def test_bf16_initial_fp32_final_and_reference():
    d = U.make_inputs(B=1, T=100, H=2, state_dtype=torch.bfloat16)
    out, fs = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    ro, rs = U.reference_kda(**{k: d[k] for k in ("q", "k", "v", "g", "beta", "scale", "A_log",
                                                  "dt_bias", "initial_state", "cu_seqlens")})
    e_o, e_s = U.rel_l2(out, ro), U.rel_l2(fs, rs)
    print(f"\n[bf16 h0 -> fp32 ht] out_err={e_o:.3e} state_err={e_s:.3e}")
    assert e_o < SANITY and e_s < SANITY
    d32 = {**d, "initial_state": d["initial_state"].float()}
    out32, fs32 = U.run_fwd(flash_kda, d32, final_dtype=torch.float32)
    assert U.rel_l2(out, out32) < 1e-6 and U.rel_l2(fs, fs32) < 1e-6


def test_dt_bias_flat_and_cu_seqlens_int32_identical():
    d = U.make_inputs(seqlens=[17, 0, 64, 3], H=2, state_dtype=torch.float32)
    base = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    flat = U.run_fwd(flash_kda, {**d, "dt_bias": d["dt_bias"].reshape(-1)}, final_dtype=torch.float32)
    i32 = U.run_fwd(flash_kda, {**d, "cu_seqlens": d["cu_seqlens"].to(torch.int32)}, final_dtype=torch.float32)
    for other in (flat, i32):
        assert torch.equal(base[0], other[0]) and torch.equal(base[1], other[1])
    assert torch.equal(base[1][1], d["initial_state"][1]), "empty sequence must keep its initial state"


@pytest.mark.parametrize("variant", ["no_A_log", "no_dt_bias", "softplus", "neg_eigval", "gva", "fp32_g_beta"])
def test_variants_against_reference(variant):
    kw = dict(B=2, T=70, H=2, state_dtype=torch.float32)
    if variant == "gva":
        kw["HV"] = 4
    if variant == "fp32_g_beta":
        kw.update(g_dtype=torch.float32, beta_dtype=torch.float32)
    d = U.make_inputs(**kw)
    lb = None if variant == "softplus" else -5.0
    if variant == "no_A_log":
        d["A_log"] = None
    if variant == "no_dt_bias":
        d["dt_bias"] = None
    neg = variant == "neg_eigval"
    out, fs = U.run_fwd(flash_kda, d, lower_bound=lb, final_dtype=torch.float32, allow_neg_eigval=neg)
    ro, rs = U.reference_kda(**{k: d[k] for k in ("q", "k", "v", "g", "beta", "scale", "A_log", "dt_bias",
                                                  "initial_state", "cu_seqlens")},
                             lower_bound=lb, allow_neg_eigval=neg)
    e_o, e_s = U.rel_l2(out, ro), U.rel_l2(fs, rs)
    print(f"\n[{variant}] out_err={e_o:.3e} state_err={e_s:.3e}")
    assert U.finite(out) and U.finite(fs)
    assert e_o < SANITY and e_s < SANITY


def test_a_log_none_equals_zero_a_log():
    d = U.make_inputs(T=33, state_dtype=torch.float32)
    a = U.run_fwd(flash_kda, {**d, "A_log": None}, final_dtype=torch.float32)
    b = U.run_fwd(flash_kda, {**d, "A_log": torch.zeros_like(d["A_log"])}, final_dtype=torch.float32)
    assert U.rel_l2(a[0], b[0]) < 1e-6 and U.rel_l2(a[1], b[1]) < 1e-6


def test_deterministic_and_workspace_equivalent():
    d = U.make_inputs(seqlens=[300, 77, 129], H=4, state_dtype=torch.float32)
    first = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    for _ in range(4):
        again = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias")
    size = flash_kda.get_workspace_size(*[d[n] for n in names], -5.0, d["initial_state"],
                                        d["initial_state"], d["cu_seqlens"])
    ws = torch.full((max(size, 1),), 0xAB, dtype=torch.uint8, device="cuda")
    with_ws = U.run_fwd(flash_kda, d, final_dtype=torch.float32, workspace=ws)
    assert torch.equal(first[0], with_ws[0]) and torch.equal(first[1], with_ws[1])


def test_empty_batch_keeps_state():
    d = U.make_inputs(B=2, T=0, H=2, state_dtype=torch.float32)
    out, fs = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    assert out.numel() == 0 and torch.equal(fs, d["initial_state"])


def test_chunk_kda_matches_fwd_and_build_info():
    d = U.make_inputs(seqlens=[40, 90], H=2, HV=4, state_dtype=torch.float32)
    with torch.inference_mode():
        o, ht = flash_kda.chunk_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], initial_state=d["initial_state"],
                                    output_final_state=True, cu_seqlens=d["cu_seqlens"], A_log=d["A_log"],
                                    dt_bias=d["dt_bias"].reshape(-1), lower_bound=-5.0, safe_gate=True)
    out, fs = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    assert torch.equal(o, out) and torch.equal(ht, fs) and ht.dtype == torch.float32
    info = flash_kda.build_info()
    print("\n[build_info]", info)
    for key in ("version", "commit", "cuda_version", "architectures", "torch_version"):
        assert key in info
    assert flash_kda.get_workspace_size(1024, 4, 2) >= 0  # upstream's (T_total, H, N) form


@pytest.mark.parametrize("method", ["auto", "exact", "warmup", 2])
@pytest.mark.parametrize("split", [None, 1, 4])
def test_context_split_and_method(method, split):
    # Long sequences with few heads: every method and forced piece count stays close to float64, is
    # deterministic, and runs with a caller workspace of get_workspace_size(same options) bytes.
    d = U.make_inputs(seqlens=[1500, 700], H=2, state_dtype=torch.float32)
    kw = dict(context_split=split, context_method=method)
    out, fs = U.run_fwd(flash_kda, d, final_dtype=torch.float32, **kw)
    ro, rs = U.reference_kda(**{k: d[k] for k in ("q", "k", "v", "g", "beta", "scale", "A_log", "dt_bias",
                                                  "initial_state", "cu_seqlens")}, lower_bound=-5.0)
    e_o, e_s = U.rel_l2(out, ro), U.rel_l2(fs, rs)
    print(f"\n[context {method} {split}] out_err={e_o:.3e} state_err={e_s:.3e}")
    assert U.finite(out) and U.finite(fs) and e_o < 4e-3 and e_s < 3e-3
    again = U.run_fwd(flash_kda, d, final_dtype=torch.float32, **kw)
    assert torch.equal(out, again[0]) and torch.equal(fs, again[1])
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias")
    size = flash_kda.get_workspace_size(*[d[n] for n in names], -5.0, d["initial_state"], d["initial_state"],
                                        d["cu_seqlens"], **kw)
    ws = torch.full((max(size, 1),), 0xAB, dtype=torch.uint8, device="cuda")
    with_ws = U.run_fwd(flash_kda, d, final_dtype=torch.float32, workspace=ws, **kw)
    assert torch.equal(out, with_ws[0]) and torch.equal(fs, with_ws[1])


class _Fwd:
    """U.run_fwd's `flash_kda` argument for one path of fwd (the eager fast path or the general one)."""

    def __init__(self, fwd):
        self.fwd = fwd


def test_single_pass_choice_reaches_the_c_api():
    # 96 (sequence, head) pairs: the automatic choice is the single pass on an H200 (>= 70% of 132 SMs).
    # Every choice stays close to float64 and runs with a caller workspace of get_workspace_size(same
    # choice) bytes; the choice reaches the C API on both paths of fwd and in the size query.
    d = U.make_inputs(B=1, T=128, H=96, state_dtype=torch.float32)
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias")
    final_like = torch.empty_like(d["initial_state"])  # the calls below write a float32 final state

    def size(choice):
        return flash_kda.get_workspace_size(*[d[n] for n in names], -5.0, d["initial_state"], final_like,
                                            d["cu_seqlens"], single_pass=choice)

    sizes = {c: size(c) for c in (None, "auto", "never", "always", 0, 1, 2)}
    print(f"\n[single_pass] workspace bytes {sizes}")
    assert sizes[None] == sizes["auto"] == sizes[0] == sizes["always"] == sizes[2]
    assert sizes["never"] == sizes[1] > 8 * max(sizes["auto"], 1)  # the two kernels' chunk records
    ro, rs = U.reference_kda(**{k: d[k] for k in ("q", "k", "v", "g", "beta", "scale", "A_log", "dt_bias",
                                                  "initial_state", "cu_seqlens")}, lower_bound=-5.0)
    results = {}
    for choice in ("auto", "never", "always"):
        ws = torch.full((max(sizes[choice], 1),), 0xAB, dtype=torch.uint8, device="cuda")
        for path in (flash_kda.fwd, flash_kda._ops._fwd_general):
            out, fs = U.run_fwd(_Fwd(path), d, final_dtype=torch.float32,
                                workspace=ws, single_pass=choice)
            e_o, e_s = U.rel_l2(out, ro), U.rel_l2(fs, rs)
            print(f"[single_pass {choice} {path.__name__}] out_err={e_o:.3e} state_err={e_s:.3e}")
            assert U.finite(out) and U.finite(fs) and e_o < 4e-3 and e_s < 3e-3
            if choice in results:
                assert torch.equal(out, results[choice][0]) and torch.equal(fs, results[choice][1])
            results[choice] = (out, fs)
    assert torch.equal(results["auto"][0], results["always"][0])  # auto is the single pass here
    # 'never' needs the two kernels' records: the single pass's workspace is refused by name.
    small = torch.empty(max(sizes["auto"], 1), dtype=torch.uint8, device="cuda")
    for path in (flash_kda.fwd, flash_kda._ops._fwd_general):
        with pytest.raises(ValueError, match="workspace"):
            U.run_fwd(_Fwd(path), d, final_dtype=torch.float32, workspace=small,
                      single_pass="never")
    # 'always' where the single pass does not take the call (the unbounded gate) fails by name.
    for path in (flash_kda.fwd, flash_kda._ops._fwd_general):
        with pytest.raises(ValueError, match="single_pass"):
            U.run_fwd(_Fwd(path), d, lower_bound=None, final_dtype=torch.float32,
                      single_pass="always")


@pytest.mark.parametrize("kw, exc", [
    (dict(context_method="fast"), ValueError), (dict(context_method=7), ValueError),
    (dict(context_method=1.5), TypeError), (dict(context_split=-1), ValueError),
    (dict(context_split=65), ValueError), (dict(context_split="4"), TypeError),
    (dict(single_pass="fast"), ValueError), (dict(single_pass=3), ValueError),
    (dict(single_pass=True), TypeError), (dict(single_pass=1.0), TypeError),
])
def test_bad_context_arguments_are_named(kw, exc):
    d = U.make_inputs(T=40, H=2, state_dtype=torch.float32)
    name = next(iter(kw))
    with pytest.raises(exc, match=name):
        U.run_fwd(flash_kda, d, final_dtype=torch.float32, **kw)


def test_fwd_cp_is_fwd_with_the_split_allowed_or_not():
    # Upstream's flash_kda.fwd_cp, called as upstream's tests do (all positional, auto_cp last). One
    # long sequence of two heads: the automatic plan splits it over the GPU, so auto_cp=True must give
    # fwd's automatic results bit for bit, auto_cp=False those of context_split=1 (one segment), and the
    # two plans' final states differ (by rounding: both close to float64).
    d = U.make_inputs(B=1, T=4096, H=2, state_dtype=torch.float32)
    auto = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    whole = U.run_fwd(flash_kda, d, final_dtype=torch.float32, context_split=1)
    ro, rs = U.reference_kda(**{k: d[k] for k in ("q", "k", "v", "g", "beta", "scale", "A_log", "dt_bias",
                                                  "initial_state", "cu_seqlens")}, lower_bound=-5.0)
    for auto_cp, want in ((True, auto), (False, whole), (1, auto), (0, whole)):
        out = torch.empty_like(d["v"])
        fs = torch.full_like(d["initial_state"], float("nan"))
        assert flash_kda.fwd_cp(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"],
                                d["dt_bias"], -5.0, d["initial_state"], fs, d["cu_seqlens"], auto_cp) is None
        e_o, e_s = U.rel_l2(out, ro), U.rel_l2(fs, rs)
        print(f"\n[fwd_cp auto_cp={auto_cp!r}] out_err={e_o:.3e} state_err={e_s:.3e}")
        assert U.finite(out) and U.finite(fs) and e_o < 4e-3 and e_s < 3e-3
        assert torch.equal(out, want[0]) and torch.equal(fs, want[1])
    assert not torch.equal(auto[1], whole[1]), "the automatic plan did not split: auto_cp was not exercised"
    assert flash_kda.cp.fwd_cp is flash_kda.fwd_cp  # upstream's module path too


@pytest.mark.parametrize("auto_cp", [None, "yes", 2, 1.0])
def test_fwd_cp_bad_auto_cp_is_named(auto_cp):
    d = U.make_inputs(T=40, H=2, state_dtype=torch.float32)
    out = torch.empty_like(d["v"])
    with pytest.raises(TypeError, match="auto_cp"):
        flash_kda.fwd_cp(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"],
                         -5.0, auto_cp=auto_cp)
