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
    mueller_brown_stages,
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


def test_stages_follow_scoremd_split_and_fp_placement():
    stages = mueller_brown_stages("both", 180, fp_weight=1e-3, lr=2e-3)
    assert [s.epochs for s in stages] == [30, 30, 120]
    assert [s.expert for s in stages] == [0, 1, 2]
    assert [s.t_range for s in stages] == list(MUELLER_BROWN_RANGES)
    assert [s.mid for s in stages] == [0.8, 0.35, 0.05]
    assert [s.fp_weight for s in stages] == [0.0, 0.0, 1e-3]
    assert {s.lr for s in stages} == {2e-3}
    assert [s.fp_weight for s in mueller_brown_stages("moe", 180)] == [0.0, 0.0, 0.0]
    # a short run still gives every expert an epoch
    assert [s.epochs for s in mueller_brown_stages("moe", 2)] == [1, 1, 1]
    (plain,) = mueller_brown_stages("plain", 7)
    (fp,) = mueller_brown_stages("fp", 7)
    assert plain.epochs == 7 and plain.fp_weight == 0.0 and fp.fp_weight == 5e-4
    assert plain.t_range == (1e-5, 1.0) and plain.expert is None


def test_stages_refuse_bad_input():
    with pytest.raises(ValueError, match="variant must be one of"):
        mueller_brown_stages("mixture", 10)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        mueller_brown_stages("plain", 0)
