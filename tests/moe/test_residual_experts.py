"""ResidualMLPExperts against its formula and the naive loop reference (outputs + grads)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import ResidualMLPExperts, Routing, copy_expert, merge_experts, stacked_names
from sci_moe.testing import assert_routed_bank_matches_reference
from tests.conftest import FLOAT_TOLERANCE
from tests.moe._residual import NAMES, naive_expert, randn, residual_bank


def test_residual_bank_matches_reference(float_dtype):
    bank = residual_bank()
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 4, (10, 2), generator=g)
    w = torch.rand(10, 2, generator=g, dtype=float_dtype)
    routing = Routing.from_assignments(idx, w, 4)
    tol = FLOAT_TOLERANCE[float_dtype]
    assert_routed_bank_matches_reference(
        None, bank, randn(10, 6, seed=2), routing=routing, atol=tol, rtol=tol
    )
    x = randn(5, 6, seed=3)
    theta = {n: getattr(bank, n)[2] for n in NAMES}
    torch.testing.assert_close(bank.forward_expert(2, x), naive_expert(theta, x))


def test_residual_bank_fits_the_surgery_contract():
    bank = residual_bank()
    assert stacked_names(bank) == list(NAMES)
    merged = merge_experts(bank, [[0, 1], [3]], [[1.0, 3.0], [1.0]])
    assert type(merged) is ResidualMLPExperts and merged.num_experts == 2
    for n in NAMES:
        t = getattr(bank, n).detach()
        torch.testing.assert_close(getattr(merged, n)[0], 0.25 * t[0] + 0.75 * t[1])
    copy_expert(bank, 3, [0])
    x = randn(4, 6, seed=1)
    assert torch.equal(bank.forward_expert(0, x), bank.forward_expert(3, x))


def test_residual_bank_errors():
    with pytest.raises(ValueError, match="activation"):
        ResidualMLPExperts(2, 4, activation="swish")
    with pytest.raises(ValueError, match=">= 1"):
        ResidualMLPExperts(2, 4, num_layers=0)
    with pytest.raises(ValueError, match="dropout"):
        ResidualMLPExperts(2, 4, dropout=1.0)
