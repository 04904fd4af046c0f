"""Empirical multi-stage self-distillation of linear probes on user-supplied features."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression

from sci_moe.theory.self_distillation import (
    EmpiricalSDConfig,
    EmpiricalSDResult,
    Standardizer,
    breast_cancer_demo,
    fit_self_distillation,
    inject_label_noise,
    train_probe_stages,
)


def gmm(seed: int, M: int, N: int = 50, delta: float = 0.5):
    """Two-cluster mixture x = c 1/sqrt(N) + sqrt(delta) g with clean labels (1 + c)/2."""
    rng = np.random.default_rng(seed)
    c = np.where(rng.random(M) < 0.5, 1.0, -1.0)
    X = c[:, None] / np.sqrt(N) + np.sqrt(delta) * rng.standard_normal((M, N))
    return X, (1 + c) / 2


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X, y.astype(float)


def test_config_validation():
    for kwargs, match in [
        ({"n_stages": -1}, "n_stages"),
        ({"n_stages": 1.5}, "n_stages"),
        ({"loss": "hinge"}, "loss"),
        ({"labels": "fuzzy"}, "labels"),
        ({"log10_lambdas": ()}, "log10_lambdas"),
        ({"log10_lambdas": (0.0, np.nan)}, "log10_lambdas"),
        ({"labels": "soft", "betas": (1.0, 0.0)}, "betas"),
        ({"labels": "soft", "betas": ()}, "betas"),
        ({"tuning": "bayes"}, "tuning"),
        ({"tuning": "joint", "labels": "soft", "n_stages": 3}, "joint tuning would train"),
        ({"val_fraction": 1.0}, "val_fraction"),
    ]:
        with pytest.raises(ValueError, match=match):
            EmpiricalSDConfig(**kwargs)
    # hard labels ignore the beta grid
    assert EmpiricalSDConfig(labels="hard", betas=()).betas == ()


def test_input_validation():
    X, y = gmm(0, 60, N=5)
    with pytest.raises(ValueError, match=r"shape \(M, N\)"):
        fit_self_distillation(X[:, 0], y)
    with pytest.raises(ValueError, match="shape"):
        fit_self_distillation(X, y[:-1])
    with pytest.raises(ValueError, match="binary"):
        fit_self_distillation(X, 2 * y)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_self_distillation(Xn, y)
    with pytest.raises(ValueError, match="both X_test and y_test"):
        fit_self_distillation(X, y, X_test=X)
    with pytest.raises(ValueError, match="features"):
        fit_self_distillation(X, y, X_test=X[:, :3], y_test=y)
    with pytest.raises(ValueError, match="too few"):
        fit_self_distillation(X, np.r_[1.0, np.zeros(59)])
    with pytest.raises(TypeError, match="EmpiricalSDConfig"):
        fit_self_distillation(X, y, config={"n_stages": 1})
    with pytest.raises(ValueError, match="loss"):
        train_probe_stages(X, y, [1.0], (), loss="hinge")
    with pytest.raises(ValueError, match="len"):
        train_probe_stages(X, y, [1.0, 1.0], ())


def test_inject_label_noise():
    y = np.r_[np.zeros(40), np.ones(60)]
    yn = inject_label_noise(y, 0.3, seed=1)
    assert np.sum((y == 0) & (yn == 1)) == 12 and np.sum((y == 1) & (yn == 0)) == 18
    np.testing.assert_array_equal(yn, inject_label_noise(torch.tensor(y), 0.3, seed=1))
    assert not np.array_equal(yn, inject_label_noise(y, 0.3, seed=2))
    np.testing.assert_array_equal(inject_label_noise(y, 0.0), y)
    with pytest.raises(ValueError, match="theta"):
        inject_label_noise(y, 0.5)


@pytest.mark.parametrize(
    ("loss", "labels", "learn_bias"),
    [("bce", "hard", True), ("bce", "soft", False), ("mse", "soft", True), ("mse", "hard", False)],
)
def test_shapes_and_torch_inputs(loss, labels, learn_bias):
    X, y = gmm(1, 120, N=10)
    Xt, yt = gmm(2, 50, N=10)
    config = EmpiricalSDConfig(
        n_stages=2,
        loss=loss,
        labels=labels,
        learn_bias=learn_bias,
        log10_lambdas=(-1.0, 1.0),
        betas=(1.0, 4.0),
    )
    res = fit_self_distillation(X, y, config, Xt, yt)
    assert isinstance(res, EmpiricalSDResult)
    assert len(res.lambdas) == 3 and len(res.betas) == 2 and len(res.probes) == 3
    for e in (res.train_errors, res.val_errors, res.test_errors):
        assert e.shape == (3,) and np.all((0 <= e) & (e <= 1))
    if labels == "hard":
        assert res.betas == (np.inf, np.inf)
    if not learn_bias:
        assert all(p.bias == 0.0 for p in res.probes)
    assert len(res.train_index) + len(res.val_index) == 120
    assert np.intersect1d(res.train_index, res.val_index).size == 0
    assert res.decision_function(Xt).shape == (50,)
    assert 0 <= res.best_stage <= 2
    rt = fit_self_distillation(
        torch.tensor(X, dtype=torch.float64), torch.tensor(y), config, torch.tensor(Xt), yt
    )
    assert rt.lambdas == res.lambdas and rt.betas == res.betas
    np.testing.assert_array_equal(rt.test_errors, res.test_errors)


def test_tuning_never_sees_test_labels(cancer):
    X, y = cancer
    rest, test = np.arange(400), np.arange(400, len(y))
    yn = inject_label_noise(y[rest], 0.2, seed=0)
    config = EmpiricalSDConfig(n_stages=2, labels="soft", betas=(1.0, 8.0), seed=3)
    a = fit_self_distillation(X[rest], yn, config, X[test], y[test])
    perm = np.random.default_rng(0).permutation(len(test))
    b = fit_self_distillation(X[rest], yn, config, X[test], 1 - y[test][perm])
    assert a.lambdas == b.lambdas and a.betas == b.betas
    np.testing.assert_array_equal(a.val_errors, b.val_errors)
    np.testing.assert_array_equal(a.train_errors, b.train_errors)
    assert not np.array_equal(a.test_errors, b.test_errors)
    c = fit_self_distillation(X[rest], yn, config)  # no test set at all
    assert c.lambdas == a.lambdas and c.test_errors is None


@pytest.mark.parametrize("learn_bias", [True, False])
def test_zero_stages_equals_sklearn_logistic_regression(cancer, learn_bias):
    X, y = cancer
    config = EmpiricalSDConfig(n_stages=0, learn_bias=learn_bias, seed=1)
    res = fit_self_distillation(X, y, config)
    (lam,) = res.lambdas
    assert res.betas == ()
    Xtr = res.standardizer.transform(X[res.train_index])
    ref = LogisticRegression(C=1 / lam, fit_intercept=learn_bias, tol=1e-12, max_iter=10_000)
    ref.fit(Xtr, y[res.train_index])
    Xs = res.standardizer.transform(X)
    np.testing.assert_allclose(
        res.probes[0].predict_proba(Xs), ref.predict_proba(Xs)[:, 1], atol=1e-4
    )
    # the standardiser is fitted on the training split only
    np.testing.assert_allclose(res.standardizer.mean, X[res.train_index].mean(axis=0))
    assert isinstance(res.standardizer, Standardizer)


def test_one_stage_hard_sd_helps_on_noisy_mixture():
    """30 % label noise, alpha = M/N = 8: hard-label 1-SD beats the tuned probe on average."""
    err = []
    for seed in range(6):
        X, y = gmm(seed, 400)
        Xt, yt = gmm(100 + seed, 2000)
        config = EmpiricalSDConfig(n_stages=1, labels="hard", seed=seed)
        res = fit_self_distillation(X, inject_label_noise(y, 0.3, seed), config, Xt, yt)
        err.append(res.test_errors)
    err = np.array(err)
    assert err[:, 1].mean() <= err[:, 0].mean()
    assert np.sum(err[:, 1] < err[:, 0]) >= 3


def test_joint_tuning_is_at_least_as_good_on_validation(cancer):
    X, y = cancer
    yn = inject_label_noise(y, 0.3, seed=5)
    kw = {"n_stages": 1, "labels": "soft", "betas": (1.0, np.inf), "log10_lambdas": (-1, 1, 3)}
    greedy = fit_self_distillation(X, yn, EmpiricalSDConfig(**kw))
    joint = fit_self_distillation(X, yn, EmpiricalSDConfig(tuning="joint", **kw))
    assert joint.val_errors[-1] <= greedy.val_errors[-1]
    np.testing.assert_array_equal(joint.val_index, greedy.val_index)
    plain = {"n_stages": 0, "log10_lambdas": (-1, 1, 3)}
    a = fit_self_distillation(X, yn, EmpiricalSDConfig(**plain))
    b = fit_self_distillation(X, yn, EmpiricalSDConfig(tuning="joint", **plain))
    assert a.lambdas == b.lambdas


def test_determinism(cancer):
    X, y = cancer
    yn = inject_label_noise(y, 0.3, seed=4)
    config = EmpiricalSDConfig(n_stages=1, labels="soft", betas=(2.0, 8.0), seed=7)
    a, b = fit_self_distillation(X, yn, config), fit_self_distillation(X, yn, config)
    assert a.lambdas == b.lambdas and a.betas == b.betas
    np.testing.assert_array_equal(a.val_index, b.val_index)
    np.testing.assert_array_equal(a.probes[-1].weights, b.probes[-1].weights)
    c = fit_self_distillation(X, yn, EmpiricalSDConfig(n_stages=1, seed=8))
    assert not np.array_equal(a.val_index, c.val_index)


def test_breast_cancer_demo():
    err = breast_cancer_demo(theta=0.2, seeds=[0, 1], n_stages=1)
    assert err.shape == (2, 2) and np.all((0 <= err) & (err < 0.5))
