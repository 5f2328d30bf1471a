"""flash_kda.decode / flash_kda.fused_recurrent_kda on the GPU: against a float64 torch reference
(fp32 and bf16 pools, int32 / int64 indices, gates), verify with every num_accepted_tokens value,
padding and a poisoned pool, prefill then decode against a longer prefill, CUDA-graph capture,
torch.library.opcheck and torch.compile, the eager fast path, the opt-in index check, and FLA's
fused_recurrent_kda on the same inputs when FLA is importable.
"""
import os

import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402

import flash_kda  # noqa: E402
from flash_kda import _decode  # noqa: E402

K = 128
F32, BF16 = torch.float32, torch.bfloat16


def _inputs(B, T, H, HV, slots, pool_dtype=F32, idx_dtype=torch.int32, idx_cols=None, seed=0):
    """Token inputs (make_inputs), a random pool and distinct slot indices ([N] or [N, idx_cols])."""
    torch.manual_seed(seed)
    d = U.make_inputs(B=B, T=T, H=H, HV=HV)
    d["pool"] = torch.randn(slots, HV, K, K, device="cuda").to(pool_dtype)
    perm = torch.randperm(slots, device="cuda")
    cols = idx_cols or 1
    idx = perm[:B * cols].view(B, cols) if idx_cols else perm[:B]
    d["idx"] = idx.to(idx_dtype).contiguous()
    return d


def _reference(d, pool, idx, lower_bound=-5.0, accepted=None):
    """float64: per sequence, the start slot's state through its tokens; returns (out, new pool).
    [N] indices: the final state back to the start slot; [N, T] indices: the state after token t to
    slot idx[n, t] (none where negative)."""
    B, T = d["q"].shape[:2]
    src = pool.double()  # start states are read before anything is written
    new = src.clone()
    out = torch.zeros(d["v"].shape, dtype=torch.float64, device="cuda")
    two_d = idx.dim() == 2

    def run(n, start, tokens):
        sl = slice(n, n + 1)
        return U.reference_kda(d["q"][sl, :tokens], d["k"][sl, :tokens], d["v"][sl, :tokens], d["g"][sl, :tokens],
                               d["beta"][sl, :tokens], d["scale"], A_log=d["A_log"], dt_bias=d["dt_bias"],
                               lower_bound=lower_bound, initial_state=src[start:start + 1])

    for n in range(B):
        col = 0 if accepted is None else min(max(int(accepted[n]), 1), idx.shape[1]) - 1
        start = int(idx[n, col]) if two_d else int(idx[n])
        if start < 0 or start >= pool.shape[0]:
            continue  # padding: zero output, no state access
        o, s = run(n, start, T)
        out[n] = o[0]
        if not two_d:
            new[start] = s[0]
            continue
        for t in range(T):
            slot = int(idx[n, t])
            if 0 <= slot < pool.shape[0]:
                new[slot] = run(n, start, t + 1)[1][0]
    return out, new


def _run(d, pool, idx, **kw):
    return flash_kda.decode(d["q"], d["k"], d["v"], d["g"], d["beta"], pool, idx, scale=d["scale"],
                            A_log=d["A_log"], dt_bias=d["dt_bias"], **kw)


@pytest.mark.parametrize("pool_dtype", [F32, BF16])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("lower_bound", [-5.0, None])
def test_decode_matches_float64(pool_dtype, idx_dtype, lower_bound):
    d = _inputs(B=4, T=1, H=2, HV=4, slots=9, pool_dtype=pool_dtype, idx_dtype=idx_dtype)
    ref_out, ref_pool = _reference(d, d["pool"], d["idx"], lower_bound=lower_bound)
    out = _run(d, d["pool"], d["idx"], lower_bound=lower_bound)
    torch.cuda.synchronize()
    eo, es = U.rel_l2(out, ref_out), U.rel_l2(d["pool"], ref_pool)
    print(f"\n[decode {pool_dtype} {idx_dtype} lb={lower_bound}] out {eo:.2e} pool {es:.2e}")
    assert U.finite(out) and U.finite(d["pool"])
    assert eo < 4e-3 and es < (3e-3 if pool_dtype == F32 else 6e-3)


def test_verify_every_accepted_count():
    T = 4
    d = _inputs(B=T + 1, T=T, H=2, HV=2, slots=(T + 1) * T + 2, idx_cols=T, seed=3)
    accepted = torch.arange(T + 1, device="cuda")  # 0 .. T (0 reads column 0)
    ref_out, ref_pool = _reference(d, d["pool"], d["idx"], accepted=accepted)
    out = _run(d, d["pool"], d["idx"], lower_bound=-5.0, num_accepted_tokens=accepted)
    torch.cuda.synchronize()
    eo, es = U.rel_l2(out, ref_out), U.rel_l2(d["pool"], ref_pool)
    print(f"\n[verify T={T}] out {eo:.2e} pool {es:.2e}")
    assert eo < 4e-3 and es < 3e-3


def test_padding_and_poisoned_pool():
    d = _inputs(B=5, T=1, H=1, HV=2, slots=12, seed=4)
    idx = d["idx"].clone()
    idx[1] = -1
    idx[3] = 12  # out of range: treated as padding without the check
    named = set(int(i) for i in idx.tolist() if 0 <= i < 12)
    pool = d["pool"]
    for s in range(12):
        if s not in named:
            pool[s] = float("nan")
    before = pool.clone()
    out = torch.full(d["v"].shape, float("nan"), dtype=BF16, device="cuda")
    _run(d, pool, idx, lower_bound=-5.0, out=out)
    torch.cuda.synchronize()
    for s in range(12):
        if s not in named:
            assert torch.equal(pool[s].view(torch.int32), before[s].view(torch.int32)), f"slot {s} touched"
    assert torch.all(out[1] == 0) and torch.all(out[3] == 0)
    assert U.finite(out)


def test_prefill_then_decode_equals_longer_prefill():
    T, P = 100, 60
    d = U.make_inputs(B=2, T=T, H=2, state_dtype=F32)
    ref_out, ref_state = U.reference_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], A_log=d["A_log"],
                                         dt_bias=d["dt_bias"], lower_bound=-5.0, initial_state=d["initial_state"])
    pool = torch.empty_like(d["initial_state"])
    out = torch.empty_like(d["v"])
    flash_kda.fwd(d["q"][:, :P], d["k"][:, :P], d["v"][:, :P], d["g"][:, :P], d["beta"][:, :P], d["scale"],
                  out[:, :P], d["A_log"], d["dt_bias"], -5.0, initial_state=d["initial_state"], final_state=pool)
    idx = torch.arange(2, dtype=torch.int32, device="cuda")
    for t in range(P, T):
        flash_kda.decode(d["q"][:, t:t + 1], d["k"][:, t:t + 1], d["v"][:, t:t + 1], d["g"][:, t:t + 1],
                         d["beta"][:, t:t + 1], pool, idx, out=out[:, t:t + 1], scale=d["scale"], A_log=d["A_log"],
                         dt_bias=d["dt_bias"], lower_bound=-5.0)
    o_full, s_full = U.run_fwd(flash_kda, d, final_dtype=F32)
    torch.cuda.synchronize()
    errs = (U.rel_l2(out, ref_out), U.rel_l2(pool, ref_state), U.rel_l2(o_full, ref_out), U.rel_l2(s_full, ref_state))
    print(f"\n[prefill {P} + decode {T - P}] out {errs[0]:.2e} state {errs[1]:.2e} | prefill {T}: out {errs[2]:.2e} "
          f"state {errs[3]:.2e}")
    assert errs[0] < 4e-3 and errs[1] < 3e-3
    assert U.rel_l2(out, o_full) < 4e-3 and U.rel_l2(pool, s_full) < 3e-3


def test_cuda_graph_capture():
    d = _inputs(B=3, T=1, H=2, HV=2, slots=6, seed=5)
    pool_e, pool_g = d["pool"].clone(), d["pool"].clone()
    out_e, out_g = torch.empty_like(d["v"]), torch.empty_like(d["v"])
    for _ in range(3):
        _run(d, pool_e, d["idx"], lower_bound=-5.0, out=out_e)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # nothing is allocated per call: out and the pool are given
        _run(d, pool_g, d["idx"], lower_bound=-5.0, out=out_g)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out_g, out_e) and torch.equal(pool_g, pool_e)


def test_opcheck_and_compile():
    d = _inputs(B=2, T=1, H=2, HV=2, slots=4, seed=6)
    out = torch.empty_like(d["v"])
    args = (d["q"], d["k"], d["v"], d["g"], d["beta"], d["pool"].clone(), d["idx"], out, d["scale"], d["A_log"],
            d["dt_bias"], -5.0, None, None, True, True, True, False, False, 0)
    torch.library.opcheck(torch.ops.flash_kda.decode.default, args)

    def step(pool, out):
        return flash_kda.decode(d["q"], d["k"], d["v"], d["g"], d["beta"], pool, d["idx"], out=out,
                                scale=d["scale"], A_log=d["A_log"], dt_bias=d["dt_bias"], lower_bound=-5.0)

    pool_c, pool_e = d["pool"].clone(), d["pool"].clone()
    out_c = torch.compile(step, fullgraph=True)(pool_c, torch.empty_like(d["v"]))
    out_e = step(pool_e, torch.empty_like(d["v"]))
    torch.cuda.synchronize()
    assert torch.equal(out_c, out_e) and torch.equal(pool_c, pool_e)


def test_eager_fast_path_equals_general_path():
    if _decode._decode_eager is None:
        pytest.skip("built without the eager fast path")
    d = _inputs(B=3, T=2, H=2, HV=4, slots=10, idx_cols=2, seed=7)
    acc = torch.tensor([0, 1, 2], dtype=torch.int64, device="cuda")
    pool_f, pool_g = d["pool"].clone(), d["pool"].clone()
    fast = _decode._decode_eager(d["q"], d["k"], d["v"], d["g"], d["beta"], pool_f, d["idx"], None, d["scale"],
                                 d["A_log"], d["dt_bias"], -5.0, acc, None, True, True, True, False, False, 0)
    assert fast is not NotImplemented
    general = _decode._decode_general(d["q"], d["k"], d["v"], d["g"], d["beta"], pool_g, d["idx"], None, d["scale"],
                                      d["A_log"], d["dt_bias"], -5.0, acc, None, gate_in_kernel=True,
                                      beta_sigmoid=True, qk_l2norm=True, allow_neg_eigval=False,
                                      check_indices=False, kernel_config=0)
    torch.cuda.synchronize()
    assert torch.equal(fast, general) and torch.equal(pool_f, pool_g)
    # A strided q (not 16-byte rows) is declined, and flash_kda.decode copies it on the general path.
    q_wide = torch.randn(3, 2, 2, K + 8, dtype=BF16, device="cuda")[..., 4:K + 4]
    assert _decode._decode_eager(q_wide, d["k"], d["v"], d["g"], d["beta"], pool_f, d["idx"], None, d["scale"],
                                 d["A_log"], d["dt_bias"], -5.0, acc, None, True, True, True, False, False,
                                 0) is NotImplemented


def test_check_indices_names_the_entry():
    d = _inputs(B=3, T=1, H=1, HV=1, slots=5, seed=8)
    idx = d["idx"].clone()
    idx[2] = 7
    with pytest.raises(ValueError, match=r"state_indices\[2\] = 7"):
        _run(d, d["pool"], idx, lower_bound=-5.0, check_indices=True)
    idx[2] = idx[0]
    with pytest.raises(ValueError, match=r"named by one sequence at most"):
        _run(d, d["pool"], idx, lower_bound=-5.0, check_indices=True)


def test_fused_recurrent_kda_non_inplace():
    """FLA's calling forms without the pool in place: identity states, gathered states."""
    d = _inputs(B=3, T=2, H=2, HV=2, slots=6, seed=9)
    h0 = d["pool"][:3].clone()
    o, ht = flash_kda.fused_recurrent_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], A_log=d["A_log"],
                                          dt_bias=d["dt_bias"], scale=d["scale"], initial_state=h0,
                                          output_final_state=True, use_qk_l2norm_in_kernel=True,
                                          use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                          lower_bound=-5.0, inplace_final_state=False)
    ro, rs = U.reference_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], A_log=d["A_log"],
                             dt_bias=d["dt_bias"], lower_bound=-5.0, initial_state=h0)
    assert torch.equal(h0, d["pool"][:3]), "initial_state must not change"
    assert ht.dtype == F32 and U.rel_l2(o, ro) < 4e-3 and U.rel_l2(ht, rs) < 3e-3


# ---- FLA's fused_recurrent_kda on the same inputs --------------------------------------------------

def _fla_fwd():
    os.environ["FLA_FLASH_KDA"] = "0"
    mod = pytest.importorskip("fla.ops.kda.fused_recurrent", reason="flash-linear-attention (fla) is not importable")
    return mod


@pytest.mark.parametrize("pool_dtype", [F32, BF16])
def test_matches_fla_fused_recurrent_kda(pool_dtype):
    fla = _fla_fwd()
    d = _inputs(B=8, T=1, H=2, HV=4, slots=20, pool_dtype=pool_dtype, seed=10)
    pool_fla, pool_ours = d["pool"].clone(), d["pool"].clone()
    with torch.inference_mode():
        o_fla, _ = fla.fused_recurrent_kda_fwd(
            q=d["q"], k=d["k"], v=d["v"], g=d["g"], beta=d["beta"], A_log=d["A_log"], dt_bias=d["dt_bias"],
            scale=d["scale"], initial_state=pool_fla, inplace_final_state=True, state_v_first=True,
            ssm_state_indices=d["idx"], use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
            use_beta_sigmoid_in_kernel=True, lower_bound=-5.0)
        o_ours, _ = flash_kda.fused_recurrent_kda(
            d["q"], d["k"], d["v"], d["g"], d["beta"], A_log=d["A_log"], dt_bias=d["dt_bias"], scale=d["scale"],
            initial_state=pool_ours, output_final_state=True, use_qk_l2norm_in_kernel=True,
            use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=-5.0, state_v_first=True,
            inplace_final_state=True, ssm_state_indices=d["idx"])
    torch.cuda.synchronize()
    eo, es = U.rel_l2(o_ours, o_fla), U.rel_l2(pool_ours, pool_fla)
    print(f"\n[vs FLA fused_recurrent_kda, pool {pool_dtype}] out {eo:.2e} pool {es:.2e}")
    assert eo < 1e-2 and es < 1e-2


def test_matches_fla_public_fused_recurrent_kda_softplus_without_A_log():
    fla = _fla_fwd()
    d = _inputs(B=2, T=3, H=2, HV=2, slots=2, seed=11)
    h0 = d["pool"].clone()
    with torch.inference_mode():
        o_fla, ht_fla = fla.fused_recurrent_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], dt_bias=d["dt_bias"],
                                                scale=d["scale"], initial_state=h0, output_final_state=True,
                                                use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                                use_beta_sigmoid_in_kernel=True, state_v_first=True)
        o, ht = flash_kda.fused_recurrent_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], dt_bias=d["dt_bias"],
                                              scale=d["scale"], initial_state=h0, output_final_state=True,
                                              use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                              use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                              inplace_final_state=False)
    torch.cuda.synchronize()
    assert U.rel_l2(o, o_fla) < 1e-2 and U.rel_l2(ht, ht_fla) < 1e-2
