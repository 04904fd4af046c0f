"""The Mueller-Brown networks (sci_moe.sampling.diffusion.mueller_brown_recipe)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.sampling.diffusion import (
    MUELLER_BROWN_RANGES,
    MUELLER_BROWN_VARIANTS,
    MLPEnergy,
    MLPScore,
    TimeMixture,
    mueller_brown_model,
)


@pytest.mark.parametrize("variant", ["plain", "fp"])
def test_single_network_variants(variant):
    model = mueller_brown_model(variant)
    assert isinstance(model, MLPEnergy)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in linears][:3] == [92, 92, 92]


@pytest.mark.parametrize("variant", ["moe", "both"])
def test_time_mixture_variants(variant):
    model = mueller_brown_model(variant)
    assert isinstance(model, TimeMixture) and model.gating == "ranged"
    assert model.ranges == [(0.6, 1.0), (0.099, 0.6), (1e-5, 0.099)] == MUELLER_BROWN_RANGES
    kinds = [type(e) for e in model.experts]
    assert kinds == [MLPScore, MLPScore, MLPEnergy]  # the small-t energy is the force field
    widths = [
        [m.out_features for m in e.modules() if isinstance(m, torch.nn.Linear)][:-1]
        for e in model.experts
    ]
    assert widths == [[54, 54], [64, 64], [64, 64, 64]]


@pytest.mark.parametrize("variant", MUELLER_BROWN_VARIANTS)
def test_energy_and_score_shapes(variant):
    torch.manual_seed(0)
    model = mueller_brown_model(variant)
    x = torch.randn(5, 1, 2)
    t = torch.full((5,), 1e-3)
    assert model.energy(x, t).shape == (5,)
    assert model.score(x, t).shape == x.shape


def test_same_seed_same_weights():
    torch.manual_seed(3)
    a = mueller_brown_model("both").state_dict()
    torch.manual_seed(3)
    b = mueller_brown_model("both").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant must be one of"):
        mueller_brown_model("dense")
