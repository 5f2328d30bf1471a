"""Golden cases (shared/golden): flash_kda.fwd against independent float64 references.

Pass rule (golden/tolerances.json): out_err <= max(4e-3, fla_out), state_err <= max(3e-3,
fla_state), no NaN/Inf; errors are relative L2 norms. Each case prints its errors (pytest -s).
"""
import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)
if U.golden_dir() is None:
    pytest.skip("golden vectors not found (set FLASH_KDA_GOLDEN_DIR, or run scripts/prepare_gpu_data.sh)",
                allow_module_level=True)

import torch  # noqa: E402

import flash_kda  # noqa: E402


@pytest.mark.parametrize("case", U.golden_cases())
def test_golden_case(case):
    meta, a = U.load_golden(case)
    tol = U.golden_tolerances()
    fla = tol["fla"].get(case, {})
    out_tol = max(tol["default"]["out"], fla.get("out", 0.0))
    state_tol = max(tol["default"]["final_state"], fla.get("final_state", 0.0))

    N, HV, V, K = meta["N"], meta["HV"], meta["V"], meta["K"]
    out = torch.full_like(a["v"], float("nan"))
    final = torch.full((N, HV, V, K), float("nan"), dtype=torch.float32, device="cuda")
    cu = a.get("cu_seqlens")
    if cu is None and meta.get("cu_seqlens") is not None:
        cu = torch.tensor(meta["cu_seqlens"], dtype=torch.int64, device="cuda")
    flash_kda.fwd(a["q"], a["k"], a["v"], a["g"], a["beta"], meta["scale"], out,
                  a.get("A_log"), a.get("dt_bias"), meta["lower_bound"],
                  initial_state=a.get("initial_state"), final_state=final, cu_seqlens=cu,
                  gate_in_kernel=meta["gate_in_kernel"],
                  beta_sigmoid=meta["beta_sigmoid_in_kernel"],
                  qk_l2norm=meta["qk_l2norm_in_kernel"])
    torch.cuda.synchronize()

    out_err = U.rel_l2(out, a["expected_o"])
    state_err = U.rel_l2(final, a["expected_final_state"])
    print(f"\n[golden] {case:22s} out_err={out_err:.3e} (<= {out_tol:.2e})  "
          f"state_err={state_err:.3e} (<= {state_tol:.2e})  {meta.get('note', '')}")
    assert U.finite(out), f"{case}: NaN/Inf in out"
    assert U.finite(final), f"{case}: NaN/Inf in final_state"
    assert out_err <= out_tol, f"{case}: out relative L2 error {out_err:.3e} > {out_tol:.2e}"
    assert state_err <= state_tol, f"{case}: final_state relative L2 error {state_err:.3e} > {state_tol:.2e}"
