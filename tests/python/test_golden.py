"""Golden cases: flash_kda.fwd against float64 references, from two sources.

- The repository's generated cases (tests/golden_gen.h, written by the CMake build into
  build/tests/golden, or FLASH_KDA_REPO_GOLDEN_DIR): every case listed there; a test that fails,
  saying how to make them, when the folder is missing.
- the shared golden set (FLASH_KDA_GOLDEN_DIR, or its copy in .gpu_data/golden), made independently: every case
  listed there; one skipped test, with the reason, when absent.

Pass rule (the folder's tolerances.json): out_err <= max(4e-3, fla_out), state_err <= max(3e-3,
fla_state), no NaN/Inf; errors are relative L2 norms. Each case prints its errors (pytest -s).
"""
import os

import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402

import flash_kda  # noqa: E402

_REPO_DIR = U.repo_golden_dir()
_SHARED_DIR = U.golden_dir()
_MISSING = "data-missing"


def _check(d, case):
    meta, a = U.load_golden(case, d=d)
    tol = U.golden_tolerances(d)
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


@pytest.mark.parametrize("case", U.golden_cases(_REPO_DIR) or [_MISSING])
def test_repo_golden_case(case):
    assert case != _MISSING, (
        f"in-repo golden vectors missing: no {_REPO_DIR}/index.json (build the project with CMake: "
        f"target flash_kda_golden_data, or set FLASH_KDA_REPO_GOLDEN_DIR)")
    _check(_REPO_DIR, case)


@pytest.mark.parametrize("case", U.golden_cases(_SHARED_DIR) or [_MISSING])
def test_shared_golden_case(case):
    if case == _MISSING:
        if os.environ.get("FLASH_KDA_GOLDEN_DIR"):
            pytest.fail(f"FLASH_KDA_GOLDEN_DIR={os.environ['FLASH_KDA_GOLDEN_DIR']} has no index.json")
        pytest.skip("no copy of the shared golden set (FLASH_KDA_GOLDEN_DIR, .gpu_data/golden): the independent shared check is skipped")
    _check(_SHARED_DIR, case)
