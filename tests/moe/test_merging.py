"""The differentiable merge against naive references (values and all gradients, f32 and f64)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import copy_expert, merge_experts, merged_forward, merged_parameters
from tests.conftest import FLOAT_TOLERANCE
from tests.moe._residual import NAMES, naive_expert, randn, residual_bank


def _grads(out, tensors, seed=1):
    g = torch.Generator().manual_seed(seed)
    cot = torch.randn(out.shape, generator=g, dtype=out.dtype)
    return torch.autograd.grad((out * cot).sum(), tensors, allow_unused=True)


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.get_default_dtype())


@pytest.mark.parametrize("ids", [[1, 3], [0, 2, 3]])
def test_merged_forward_matches_naive_values_and_grads(float_dtype, ids):
    bank = residual_bank()
    x = randn(7, 6, seed=1, requires_grad=True)
    w = _rand(len(ids), seed=2).requires_grad_()
    out = merged_forward(bank, x, ids, w)
    theta = {n: sum(w[j] * getattr(bank, n)[i] for j, i in enumerate(ids)) for n in NAMES}
    ref = naive_expert(theta, x)
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
    tensors = [x, w, *(getattr(bank, n) for n in NAMES)]
    for a, b in zip(_grads(out, tensors), _grads(ref, tensors), strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    # the no-grad core merge is the same map
    with torch.no_grad():
        wn = w / w.sum()
        core = merge_experts(bank, ids, wn.tolist()).forward_expert(0, x)
        torch.testing.assert_close(merged_forward(bank, x, ids, wn), core, atol=tol, rtol=tol)


def test_one_hot_merge_is_that_expert(float_dtype):
    bank = residual_bank()
    x = randn(9, 6, seed=1)
    out = merged_forward(bank, x, [0, 2, 3], torch.tensor([0.0, 1.0, 0.0]))
    assert torch.equal(out, bank.forward_expert(2, x))
    core = merge_experts(bank, [0, 2, 3], [0.0, 1.0, 0.0])
    assert torch.equal(core.forward_expert(0, x), bank.forward_expert(2, x))


def test_merging_identical_experts_is_any_of_them(float_dtype):
    bank = residual_bank()
    copy_expert(bank, 1)  # every expert = expert 1
    x = randn(9, 6, seed=1)
    w = torch.tensor([0.2, 0.5, 0.3])
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(
        merged_forward(bank, x, [0, 2, 3], w), bank.forward_expert(3, x), atol=tol, rtol=tol
    )


def test_merged_parameters_and_selection_errors():
    bank = residual_bank()
    p = merged_parameters(bank, [1, 2], [0.5, 0.5])
    assert p["weight"].shape == (1, 2, 6, 6)
    x = randn(2, 6, seed=1)
    with pytest.raises(ValueError, match="k <= 4"):
        merged_forward(bank, x, [0, 1, 2, 3, 0], torch.ones(5))
    with pytest.raises(ValueError, match="one weight per"):
        merged_forward(bank, x, [0, 1], torch.ones(3))
    with pytest.raises(ValueError, match="lie in"):
        merged_forward(bank, x, [0, 7], torch.ones(2))
    with pytest.raises(ValueError, match="at least one"):
        merged_parameters(bank, [], [])
    # the differentiable and the no-grad merge share one validation
    with pytest.raises(ValueError, match="lie in"):
        merge_experts(bank, [0, 7])
    with pytest.raises(ValueError, match="one weight per"):
        merge_experts(bank, [0, 1], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=">= 0"):
        merge_experts(bank, [0, 1], [1.0, -1.0])
