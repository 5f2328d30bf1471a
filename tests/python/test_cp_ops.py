"""Building blocks of context parallelism on one GPU: flash_kda.segment_transition,
combine_transitions, fwd_prepared (docs/design.md section 3.4).

The convention S_end = S_start @ M.mT + D against the float64 recurrence; a sequence cut in shards
and chained through the combine equals one flash_kda.fwd; fwd_prepared equals flash_kda.fwd on the
same shard bit for bit; the ops pass torch.library.opcheck; bad arguments name themselves.
"""
import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402

import flash_kda  # noqa: E402

K = 128


def _shard(d, lo, hi):
    s = dict(d)
    for key in ("q", "k", "v", "g", "beta"):
        s[key] = d[key][:, lo:hi].contiguous()
    return s


def _transition(s, **kw):
    return flash_kda.segment_transition(s["q"], s["k"], s["v"], s["g"], s["beta"], s["scale"], s["A_log"],
                                        s["dt_bias"], kw.pop("lower_bound", -5.0), s["cu_seqlens"], **kw)


@pytest.mark.parametrize("method", ["auto", "exact"])
@pytest.mark.parametrize("lower_bound", [-5.0, -0.1, None])
def test_transition_convention_against_float64(method, lower_bound):
    d = U.make_inputs(B=2, T=200, H=2, state_dtype=torch.float32)
    D, M = _transition(d, lower_bound=lower_bound, context_method=method)
    assert D.shape == (2, 2, K, K) and M.shape == (2, 2, K, K) and D.dtype == torch.float32
    S0 = d["initial_state"]
    end = S0.double() @ M.double().mT + D.double()
    _, ref = U.reference_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], d["A_log"], d["dt_bias"],
                             lower_bound, S0)
    err = U.rel_l2(end, ref)
    print(f"\n[cp] {method} lb={lower_bound}: S0 @ M.mT + D vs float64 end state {err:.3e}")
    assert err <= 3e-3


@pytest.mark.parametrize("varlen", [False, True])
def test_shards_chained_equal_one_fwd(varlen):
    if varlen:
        d = U.make_inputs(seqlens=[700, 900], H=2, state_dtype=torch.float32)
        cuts = [0, 300, 1000, 1600]  # sequence 0 over shards 0-1, sequence 1 over shards 1-2
    else:
        d = U.make_inputs(B=1, T=1600, H=2, state_dtype=torch.float32)
        cuts = [0, 300, 1000, 1600]
    out1, fs1 = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    ref = U.reference_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], d["A_log"], d["dt_bias"],
                          -5.0, d["initial_state"], d["cu_seqlens"])  # (out, final state)
    if not varlen:
        # Fixed batch: every shard's (D, M), one combine, each shard from its start state.
        shards = [_shard(d, a, b) for a, b in zip(cuts[:-1], cuts[1:])]
        DM = [_transition(s) for s in shards[:-1]]
        starts, end = flash_kda.combine_transitions(torch.stack([x[0] for x in DM]), torch.stack([x[1] for x in DM]),
                                                    d["initial_state"], return_start_states=True)
        assert torch.equal(starts[0], d["initial_state"])
        inits = [starts[1], end]
        out = torch.empty_like(d["v"])
        fs = torch.empty_like(fs1)
        for i, s in enumerate(shards):
            o = torch.empty_like(s["v"])
            flash_kda.fwd(s["q"], s["k"], s["v"], s["g"], s["beta"], s["scale"], o, s["A_log"], s["dt_bias"], -5.0,
                          initial_state=d["initial_state"] if i == 0 else inits[i - 1],
                          final_state=fs if i == len(shards) - 1 else None)
            out[:, cuts[i]:cuts[i + 1]] = o
    else:
        # Packed: shard 1 holds the end of sequence 0 and the start of sequence 1; shard 2 its rest.
        s1 = _shard(d, 300, 1000)
        s1["cu_seqlens"] = torch.tensor([0, 400, 700], device="cuda")
        s0 = _shard(d, 0, 300)
        s0["cu_seqlens"] = torch.tensor([0, 300], device="cuda")
        D0, M0 = _transition(s0)
        start0 = flash_kda.combine_transitions(D0[None], M0[None], d["initial_state"][:1])
        D1, M1 = _transition(s1, num_transitions=1)  # its last sequence only
        start1 = flash_kda.combine_transitions(D1[None], M1[None], d["initial_state"][1:2])
        out = torch.empty_like(d["v"])
        fs = torch.empty_like(fs1)
        o0 = torch.empty_like(s0["v"])
        flash_kda.fwd(s0["q"], s0["k"], s0["v"], s0["g"], s0["beta"], d["scale"], o0, d["A_log"], d["dt_bias"], -5.0,
                      initial_state=d["initial_state"][:1], cu_seqlens=s0["cu_seqlens"])
        o1 = torch.empty_like(s1["v"])
        f1 = torch.empty(2, 2, K, K, device="cuda")
        flash_kda.fwd(s1["q"], s1["k"], s1["v"], s1["g"], s1["beta"], d["scale"], o1, d["A_log"], d["dt_bias"], -5.0,
                      initial_state=torch.cat([start0, d["initial_state"][1:2]]), final_state=f1,
                      cu_seqlens=s1["cu_seqlens"])
        s2 = _shard(d, 1000, 1600)
        o2 = torch.empty_like(s2["v"])
        f2 = torch.empty(1, 2, K, K, device="cuda")
        flash_kda.fwd(s2["q"], s2["k"], s2["v"], s2["g"], s2["beta"], d["scale"], o2, d["A_log"], d["dt_bias"], -5.0,
                      initial_state=start1, final_state=f2)
        out = torch.cat([o0, o1, o2], dim=1)
        fs = torch.cat([f1[:1], f2])
    print(f"\n[cp] chained shards (varlen={varlen}): out vs f64 {U.rel_l2(out, ref[0]):.3e}, state vs f64 "
          f"{U.rel_l2(fs, ref[1]):.3e}; vs one fwd: out {U.rel_l2(out, out1):.3e}, state {U.rel_l2(fs, fs1):.3e}")
    assert U.rel_l2(out, ref[0]) <= 4e-3 and U.rel_l2(fs, ref[1]) <= 3e-3


def test_fwd_prepared_equals_fwd():
    d = U.make_inputs(seqlens=[1000, 3000], H=4, state_dtype=torch.float32)
    out1, fs1 = U.run_fwd(flash_kda, d, final_dtype=torch.float32)
    ws = torch.empty(flash_kda.get_transition_workspace_size(d["q"], d["k"], d["v"], d["g"], d["beta"], d["A_log"],
                                                             d["dt_bias"], -5.0, d["cu_seqlens"]),
                     dtype=torch.uint8, device="cuda")
    D, M = _transition(d, num_transitions=1, workspace=ws)
    assert D.shape[0] == 1
    out = torch.empty_like(d["v"])
    fs = torch.empty_like(fs1)
    flash_kda.fwd_prepared(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"], -5.0,
                           d["initial_state"], fs, d["cu_seqlens"], workspace=ws)
    assert torch.equal(out, out1) and torch.equal(fs, fs1)
    # The preparation alone (no D, M) serves as well.
    D0, M0 = _transition(d, num_transitions=0, workspace=ws)
    assert D0 is None and M0 is None
    out.zero_()
    flash_kda.fwd_prepared(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], out, d["A_log"], d["dt_bias"], -5.0,
                           d["initial_state"], fs, d["cu_seqlens"], workspace=ws)
    assert torch.equal(out, out1)


def test_combine_matches_a_float64_fold():
    R, N, HV = 3, 2, 2
    D = torch.randn(R, N, HV, K, K, device="cuda")
    M = torch.randn(R, N, HV, K, K, device="cuda") / K ** 0.5
    h0 = torch.randn(N, HV, K, K, device="cuda").to(torch.bfloat16)
    starts, end = flash_kda.combine_transitions(D, M, h0, return_start_states=True)
    S = h0.double()
    for r in range(R):
        assert U.rel_l2(starts[r], S) <= 1e-5
        S = S @ M[r].double().mT + D[r].double()
    assert U.rel_l2(end, S) <= 1e-5
    # Deterministic, and the same from a packed [R, N, HV, V + K, K] buffer's views.
    buf = torch.cat([D, M], dim=3)
    end2 = flash_kda.combine_transitions(buf[..., :K, :], buf[..., K:, :], h0)
    assert torch.equal(end, end2)


def test_opcheck():
    d = U.make_inputs(B=2, T=40, H=2)
    D = torch.empty(2, 2, K, K, device="cuda")
    M = torch.empty(2, 2, K, K, device="cuda")
    torch.library.opcheck(torch.ops.flash_kda.segment_transition.default,
                          (d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], D, M, d["A_log"], d["dt_bias"], -5.0,
                           None, None, True, True, True, False, 0, 0))
    Dr = torch.randn(4, 2, K, K, device="cuda")
    Mr = torch.randn(4, 2, K, K, device="cuda")
    end = torch.empty(2, 2, K, K, device="cuda")
    torch.library.opcheck(torch.ops.flash_kda.combine_transitions.default, (2, Dr, Mr, None, None, end))


def test_bad_arguments_name_themselves():
    D = torch.randn(2, 1, 2, K, K, device="cuda")
    M = torch.randn(2, 1, 2, K, 64, device="cuda")
    with pytest.raises(ValueError, match=r"\bM\b.*\[2, 2, 128, 128\]"):
        flash_kda.combine_transitions(D, M)
    d = U.make_inputs(B=2, T=40, H=2)
    with pytest.raises(ValueError, match=r"\bD\b.*\[1, N\]"):
        _transition(d, D=torch.empty(3, 2, K, K, device="cuda"), M=torch.empty(3, 2, K, K, device="cuda"))
    with pytest.raises(ValueError, match=r"D and M"):
        _transition(d, D=torch.empty(2, 2, K, K, device="cuda"))
