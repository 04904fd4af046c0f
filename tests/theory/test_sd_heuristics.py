"""Early stopping of self-distillation stages and the stage convergence check."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.theory.self_distillation import (
    SelfDistillationModel,
    early_stopping_stage,
    sample_mixture,
    stage_gradient,
    train_stage,
)


@pytest.mark.parametrize(
    ("errs", "kwargs", "stage"),
    [
        ([0.3], {}, 0),
        ([0.3, 0.2, 0.1, 0.05], {}, 3),
        ([0.3, 0.2, 0.25, 0.1], {}, 1),  # stops at the first non-improvement
        ([0.3, 0.2, 0.25, 0.1], {"patience": 2}, 3),
        ([0.3, 0.3, 0.1], {}, 0),  # a tie is no improvement
        ([0.3, 0.29, 0.1], {"min_delta": 0.02}, 0),
        ([0.3, 0.2, 0.2, 0.2, 0.1], {"patience": 2}, 1),
    ],
)
def test_early_stopping_stage(errs, kwargs, stage):
    assert early_stopping_stage(errs, **kwargs) == stage


@pytest.mark.parametrize(
    ("errs", "kwargs", "match"),
    [
        ([], {}, "non-empty"),
        ([0.1, float("nan")], {}, "finite"),
        ([0.1], {"patience": 0}, "patience"),
        ([0.1], {"patience": 1.5}, "patience"),
        ([0.1], {"min_delta": -1.0}, "min_delta"),
    ],
)
def test_early_stopping_stage_rejects_bad_input(errs, kwargs, match):
    with pytest.raises(ValueError, match=match):
        early_stopping_stage(errs, **kwargs)


@pytest.mark.parametrize("loss", ["bce", "mse"])
@pytest.mark.parametrize("learn_bias", [True, False])
def test_stage_gradient_vanishes_at_the_trained_stage(loss, learn_bias):
    model = SelfDistillationModel(alpha=2.0, theta=0.2, rho=0.3, loss=loss, learn_bias=learn_bias)
    X, _, y = sample_mixture(model, 40, np.random.default_rng(0))
    w, B = train_stage(X, y, loss, 0.5, learn_bias)
    assert stage_gradient(X, y, loss, 0.5, learn_bias, w, B) < 1e-7
    # away from the optimum it does not
    assert stage_gradient(X, y, loss, 0.5, learn_bias, 0.5 * w, B) > 1e-3


def test_stage_gradient_checks_shapes_and_loss():
    X = np.zeros((5, 3))
    with pytest.raises(ValueError, match="loss"):
        stage_gradient(X, np.zeros(5), "hinge", 1.0, True, np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="need X"):
        stage_gradient(X, np.zeros(4), "bce", 1.0, True, np.zeros(3), 0.0)
