"""flash_kda.distributed over 2 processes, one GPU each, NCCL (NVLink multicast off).

One torch.multiprocessing.spawn runs every case (tests/python/_dist_worker.py): golden-like random
inputs (fixed and packed batches with sequences across the rank boundary, with and without initial
state, bf16 initial state, softplus gate, GVA, long memory, uneven shards, the exact method,
final states on their owners) and golden cases split over the ranks. Each case's output and final
state must meet the golden pass rule against float64 (out <= 4e-3, final state <= 3e-3, or FLA's
error where larger), agree with single-GPU flash_kda.fwd on the same inputs, and be finite.
Skips with a message with fewer than 2 GPUs.
"""
import json
import os
import socket
import tempfile

import pytest

import _kda_utils as U

_reason = U.skip_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

if torch.cuda.device_count() < 2:
    pytest.skip(f"flash_kda.distributed tests need 2 GPUs, found {torch.cuda.device_count()}",
                allow_module_level=True)
if not dist.is_available() or not dist.is_nccl_available():
    pytest.skip("torch.distributed with NCCL is not available in this torch build", allow_module_level=True)

import _dist_worker  # noqa: E402

WORLD = 2
CASES = [c["name"] for c in _dist_worker.cases()]
# Golden cases need the golden folder.
if U.golden_dir() is None:
    CASES = [c for c in CASES if not c.startswith("golden_")]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results():
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # inherited by the workers (they set it again)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "results.json")
        torch.multiprocessing.spawn(_dist_worker.main, args=(WORLD, _free_port(), CASES, path), nprocs=WORLD,
                                    join=True)
        with open(path) as f:
            return json.load(f)


@pytest.mark.parametrize("case", CASES)
def test_distributed_matches_single_gpu_and_float64(results, case):
    r = results[case]
    print(f"\n[distributed] {case:34s} out vs f64 {r['out_vs_f64']:.3e} (<= {r['out_tol']:.1e}), "
          f"state vs f64 {r['state_vs_f64']:.3e} (<= {r['state_tol']:.1e}); vs one GPU: out "
          f"{r['out_vs_single']:.3e}, state {r['state_vs_single']:.3e}")
    assert r["finite"], f"{case}: NaN or Inf"
    assert r["out_vs_f64"] <= r["out_tol"], f"{case}: out error {r['out_vs_f64']:.3e} vs float64"
    assert r["state_vs_f64"] <= r["state_tol"], f"{case}: final state error {r['state_vs_f64']:.3e} vs float64"
    # Against one GPU: both are within the rule of float64; they differ by their own rounding.
    assert r["out_vs_single"] <= 4e-3 and r["state_vs_single"] <= 3e-3, f"{case}: far from flash_kda.fwd"
    if "owner_rows_ok" in r:
        assert r["owner_rows_ok"], f"{case}: final_state_on='owner' returned rows of sequences owned elsewhere"
