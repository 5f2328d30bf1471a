"""pytest setup for the Python tests of flash_kda (they run on a Hopper GPU machine).

Every test module skips itself, with the reason, when torch, a CUDA device or an SM90 GPU is
missing (see _kda_utils.skip_reason), so `pytest tests/python` passes on a machine without them.
Data locations (first that exists):
  generated golden FLASH_KDA_REPO_GOLDEN_DIR, <repo>/build/tests/golden (made by the CMake build)
  shared golden   FLASH_KDA_GOLDEN_DIR, <repo>/.gpu_data/golden (optional)
  FLA source      FLASH_KDA_FLA_DIR, <repo>/.gpu_data   (a folder holding the `fla` package)
The FLA folder is put on sys.path here, before any test imports `fla`.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _kda_utils  # noqa: E402

_fla = _kda_utils.fla_dir()
if _fla is not None and _fla not in sys.path:
    sys.path.insert(0, _fla)


def pytest_report_header(config):
    lines = [f"flash_kda tests: generated golden dir = {_kda_utils.repo_golden_dir()}, "
             f"shared golden dir = {_kda_utils.golden_dir()}, FLA dir = {_fla}"]
    reason = _kda_utils.skip_reason()
    if reason:
        lines.append(f"flash_kda tests will be skipped: {reason}")
    return lines


@pytest.fixture(autouse=True)
def _seed():
    """Same random inputs in every test, whatever the order."""
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(0)
