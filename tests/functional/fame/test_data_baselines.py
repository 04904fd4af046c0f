"""The oscillator generator against a closed form, the baselines."""

import numpy as np
import pytest
import torch

from sci_moe.functional.fame import (
    FourierFunction,
    FunctionalLinearModel,
    GridMLP,
    ObservationGRU,
    make_oscillator_data,
    oscillator_response,
    relative_l2,
)


def test_oscillator_matches_closed_form_step_response():
    # x1 = F constant, x2 = 0: y = F/w^2 (1 - e^{-z w t} (cos wd t + z/sqrt(1-z^2) sin wd t))
    F, zeta, w = 2.0, 0.3, 1.5
    const = FourierFunction(np.zeros(1), np.ones(1), np.zeros(1), 10.0, offset=F)
    zero = FourierFunction(np.zeros(1), np.ones(1), np.zeros(1), 10.0)
    t = np.linspace(0, 10, 41)
    y = oscillator_response(const, zero, t, zeta=zeta, omega0=w)
    wd = w * np.sqrt(1 - zeta**2)
    exact = (
        F
        / w**2
        * (
            1
            - np.exp(-zeta * w * t)
            * (np.cos(wd * t) + zeta / np.sqrt(1 - zeta**2) * np.sin(wd * t))
        )
    )
    np.testing.assert_allclose(y, exact, atol=1e-8)


def test_generator_observes_30_to_70_percent_and_is_seeded():
    d = make_oscillator_data(6, seed=3)
    fractions = [len(t) / 100 for s in d.inputs for t, _ in s]
    assert min(fractions) >= 0.3 - 0.01 and max(fractions) <= 0.7 + 0.01
    assert d.outputs.shape == (6, 50)
    again = make_oscillator_data(6, seed=3)
    np.testing.assert_array_equal(d.outputs, again.outputs)
    for (x1, _), s in zip(d.functions, d.inputs, strict=True):
        np.testing.assert_allclose(x1(s[0][0]), s[0][1])


def test_functional_linear_model_recovers_a_linear_operator():
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 40)
    X, Y = [], []
    for _ in range(40):
        c = rng.normal(size=3)
        x = c[0] + c[1] * np.sin(2 * t) + c[2] * t**2
        X.append([(t, x)])
        Y.append((t, 2.0 * x + 1.0))  # y = 2 x + 1: linear, in the span of the basis
    flm = FunctionalLinearModel(num_basis=8).fit(X, Y)
    assert relative_l2(flm.predict(X, t), np.array([y for _, y in Y])) < 1e-3


@pytest.mark.parametrize("cls", [GridMLP, ObservationGRU])
def test_neural_baselines_fit_and_predict(cls):
    d = make_oscillator_data(8, seed=1, grid_size=20, output_size=10)
    m = cls(steps=5).fit(d.inputs, d.output_pairs())
    p = m.predict(d.inputs, d.output_times)
    assert p.shape == (8, 10) and np.isfinite(p).all()
    with pytest.raises(ValueError, match="fit"):
        cls().predict(d.inputs, d.output_times)


@pytest.mark.parametrize("cls", [GridMLP, ObservationGRU])
def test_neural_baselines_stop_when_the_validation_curve_is_flat(cls):
    from sci_moe.train import is_flat

    d = make_oscillator_data(12, seed=1, grid_size=20, output_size=10)
    v = make_oscillator_data(6, seed=2, grid_size=20, output_size=10)
    kw = dict(steps=400, eval_every=2, stop_when_flat=0.01, flat_min_steps=20)
    m = cls(**kw).fit(d.inputs, d.output_pairs(), validation=(v.inputs, v.output_pairs()))
    curve = [(e["step"], e["val_rel_l2"]) for e in m.result.evals]
    assert m.result.reason == "flat" and 20 <= m.result.step < 400
    assert is_flat([s for s, _ in curve], [e for _, e in curve], tol=0.01)
    best = min(e for _, e in curve)  # the best validation weights are kept
    pred = m.predict(v.inputs, v.output_times)
    truth = np.array([y for _, y in v.output_pairs()])
    per = np.linalg.norm(pred - truth, axis=1) / np.linalg.norm(truth, axis=1)
    assert float(np.mean(per)) == pytest.approx(best, rel=1e-6)
    plain = cls(steps=30).fit(d.inputs, d.output_pairs())  # no validation: fixed steps
    assert plain.result.reason == "completed" and plain.result.step == 30


def _fit_baseline(cls, **kw):
    d = make_oscillator_data(8, seed=1, grid_size=20, output_size=10)
    v = make_oscillator_data(4, seed=2, grid_size=20, output_size=10)
    m = cls(steps=6, eval_every=2, **kw)
    m.fit(d.inputs, d.output_pairs(), validation=(v.inputs, v.output_pairs()))
    return m, m.predict(v.inputs, v.output_times)


@pytest.mark.parametrize("cls", [GridMLP, ObservationGRU])
def test_neural_baselines_device_cpu_is_the_default(cls):
    (a, pa), (b, pb) = _fit_baseline(cls), _fit_baseline(cls, device="cpu")
    assert np.array_equal(pa, pb) and a.result.evals == b.result.evals


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("cls", [GridMLP, ObservationGRU])
def test_neural_baselines_train_and_predict_on_cuda(cls):
    from sci_moe._util import module_device

    m, p = _fit_baseline(cls, device="cuda")
    net = m.net if cls is GridMLP else m.gru
    assert module_device(net).type == "cuda"
    assert isinstance(p, np.ndarray) and np.isfinite(p).all()
    _, ref = _fit_baseline(cls)
    np.testing.assert_allclose(p, ref, rtol=1e-2, atol=1e-2 * float(np.abs(ref).max()))
