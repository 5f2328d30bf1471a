"""flash-linear-attention integration: FLA's chunk_kda dispatches to flash_kda (no FLA change).

Runs only where `fla` imports (FLASH_KDA_FLA_DIR or <repo>/.gpu_data/fla; see conftest.py).
Under inference mode with bf16, K = V = 128, HV = H, the three *_in_kernel flags, safe_gate and
state_v_first, FLA's FlashKDABackend calls flash_kda.fwd and logs
"[FLA Backend] kda.chunk_kda -> flash_kda" on logger fla.ops.backends. FLA_FLASH_KDA=0 (checked per
call since FLA 0.5.1) gives FLA's own Triton result; both are compared with each other and with a
float64 recurrence. FLA's Triton kernels autotune on first use (slow on a fresh machine).
"""
import logging

import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402

import flash_kda  # noqa: E402

fla_kda = pytest.importorskip("fla.ops.kda", reason="flash-linear-attention (fla) is not importable")
from fla.ops.backends import BackendRegistry  # noqa: E402

CROSS_TOL = 1e-2  # relative L2, flash_kda vs FLA Triton and each vs float64


def _fla_chunk_kda(d, h0, q=None, k=None, v=None):
    with torch.inference_mode():
        return fla_kda.chunk_kda(
            q if q is not None else d["q"], k if k is not None else d["k"], v if v is not None else d["v"],
            d["g"], d["beta"], scale=d["scale"], initial_state=h0, output_final_state=True,
            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
            safe_gate=True, lower_bound=-5.0, state_v_first=True, cu_seqlens=d["cu_seqlens"],
            A_log=d["A_log"], dt_bias=d["dt_bias"].reshape(-1))


def _reference(d, h0):
    return U.reference_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], d["scale"], A_log=d["A_log"],
                           dt_bias=d["dt_bias"], lower_bound=-5.0, initial_state=h0, cu_seqlens=d["cu_seqlens"])


@pytest.fixture
def fwd_calls(monkeypatch, caplog):
    """Counts flash_kda.fwd calls (FLA looks the attribute up at call time) and captures FLA's log."""
    calls = []
    real = flash_kda.fwd

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(flash_kda, "fwd", counting)
    BackendRegistry.ensure_initialized("kda")
    registry = BackendRegistry._registries.get("kda")
    if registry is not None and hasattr(registry, "_logged"):
        registry._logged.clear()  # FLA logs each dispatch decision once per process
    caplog.set_level(logging.INFO, logger="fla.ops.backends")
    return calls


def _dispatch_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name.startswith("fla.ops.backends")]


def test_fla_dispatches_to_flash_kda_and_matches_triton(monkeypatch, caplog, fwd_calls):
    d = U.make_inputs(seqlens=[100, 233, 179], H=4, state_dtype=torch.float32)
    h0 = d["initial_state"]

    monkeypatch.setenv("FLA_FLASH_KDA", "1")
    o_fk, h_fk = _fla_chunk_kda(d, h0)
    torch.cuda.synchronize()
    lines = _dispatch_lines(caplog)
    for line in lines:
        print(f"\n[fla log] {line}")
    assert any(line.endswith("kda.chunk_kda -> flash_kda") for line in lines), \
        f"FLA did not report dispatching to flash_kda; its log: {lines}"
    assert fwd_calls, "FLA's chunk_kda did not call flash_kda.fwd"

    monkeypatch.setenv("FLA_FLASH_KDA", "0")
    fwd_calls.clear()
    o_tri, h_tri = _fla_chunk_kda(d, h0)
    torch.cuda.synchronize()
    assert not fwd_calls, "FLA_FLASH_KDA=0 still called flash_kda.fwd"

    ro, rs = _reference(d, h0)
    errs = {
        "flash_kda vs triton": (U.rel_l2(o_fk, o_tri), U.rel_l2(h_fk, h_tri)),
        "flash_kda vs f64": (U.rel_l2(o_fk, ro), U.rel_l2(h_fk, rs)),
        "triton vs f64": (U.rel_l2(o_tri, ro), U.rel_l2(h_tri, rs)),
    }
    for name, (eo, es) in errs.items():
        print(f"[fla] {name:20s} out={eo:.3e} state={es:.3e}")
    assert h_fk.dtype == torch.float32 and h_fk.shape == h0.shape
    for name, (eo, es) in errs.items():
        assert eo < CROSS_TOL and es < CROSS_TOL, f"{name}: out {eo:.3e}, state {es:.3e}"
    assert errs["flash_kda vs f64"][0] <= errs["triton vs f64"][0] * 1.5


def test_fla_dispatch_bf16_state_and_strided_qkv(monkeypatch, fwd_calls):
    """What FLA passes untouched: bf16 initial_state (fp32 final_state), q/k/v slices of a fused
    projection, dt_bias flat [H*K]."""
    d = U.make_inputs(B=2, T=150, H=2, state_dtype=torch.bfloat16)
    B, T, H, K = d["q"].shape
    qkv = torch.randn(B, T, 3 * H * K, dtype=torch.bfloat16, device="cuda")
    q, k, v = (qkv[..., i * H * K:(i + 1) * H * K].view(B, T, H, K) for i in range(3))
    d.update(q=q, k=k, v=v)
    monkeypatch.setenv("FLA_FLASH_KDA", "1")
    o, ht = _fla_chunk_kda(d, d["initial_state"])
    torch.cuda.synchronize()
    assert fwd_calls, "FLA's chunk_kda did not dispatch to flash_kda.fwd"
    ro, rs = _reference(d, d["initial_state"])
    eo, es = U.rel_l2(o, ro), U.rel_l2(ht, rs)
    print(f"\n[fla bf16 h0, strided qkv] out={eo:.3e} state={es:.3e} final dtype={ht.dtype}")
    assert ht.dtype == torch.float32
    assert eo < CROSS_TOL and es < CROSS_TOL
