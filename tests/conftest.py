"""Shared fixtures: fixed seeds, float32 + float64 numeric tests, gpu/slow markers."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

# Under pytest-xdist every worker gets one core: torch's intra-op threads would otherwise
# oversubscribe the CPUs and stall (10x slower on a 2-core machine).
# The same holds for numpy/scipy's BLAS thread pools.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass

FLOAT_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 - seeds code that uses the legacy global state
    torch.manual_seed(0)
    yield


@pytest.fixture(params=[torch.float32, torch.float64], ids=["float32", "float64"])
def float_dtype(request):
    """Run a numeric test in float32 and float64 (as the default dtype), with its tolerance."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(request.param)
    try:
        yield request.param
    finally:
        torch.set_default_dtype(old)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
