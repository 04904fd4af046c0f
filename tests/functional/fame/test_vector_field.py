"""The mixture vector field is the core's (dense router, expert bank) pair, checked by reference."""

import pytest
import torch

from sci_moe.functional.fame import MixtureVectorField
from sci_moe.testing import assert_routed_bank_matches_reference
from tests.conftest import FLOAT_TOLERANCE


def test_one_direction_matches_the_core_reference(float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    vf = MixtureVectorField(
        hidden=4, channels=2, num_experts=3, expert_hidden=5, summary_size=6, groups=1
    )
    s = torch.randn(7, 6)
    assert_routed_bank_matches_reference(
        vf.router, vf.experts, torch.randn(7, 4), router_input=s, atol=tol, rtol=tol
    )


def test_mixture_is_the_weighted_sum_of_expert_fields(float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    vf = MixtureVectorField(
        hidden=3, channels=2, num_experts=2, expert_hidden=4, summary_size=5, groups=2
    )
    s, z = torch.randn(4, 5), torch.randn(8, 3)
    pi = vf.set_paths(s).weights  # (4, 2), computed once
    f = vf.vector_field(torch.tensor(0.0), z)
    assert f.shape == (8, 3, 2)
    for g in range(2):
        for p in range(4):
            ref = sum(
                pi[p, k] * vf.experts.forward_expert(g * 2 + k, z[g * 4 + p : g * 4 + p + 1])
                for k in range(2)
            )
            torch.testing.assert_close(f[g * 4 + p], ref.view(3, 2), atol=tol, rtol=tol)
    with pytest.raises(ValueError, match="set_paths"):
        vf.vector_field(torch.tensor(0.0), torch.randn(5, 3))
