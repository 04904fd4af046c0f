"""FAME: one expert = plain NCDE, routing once per function, refinement invariance, gradcheck."""

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from sci_moe.functional import build_paths, path_summary, symmetric_grid
from sci_moe.functional.fame import FAME, FAMEConfig, FunctionOnFunctionRegressor, import_torchcde
from tests.conftest import FLOAT_TOLERANCE

torchcde = import_torchcde()
TINY = dict(hidden=3, expert_hidden=4, attention_dim=3, decoder_hidden=3, num_quadrature=5)


def _batch(num_functions=2, B=3, seed=0, kind="natural"):
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(B):
        row = []
        for _ in range(num_functions):
            t = np.round(np.sort(rng.choice(np.linspace(0, 1, 21), 8, replace=False)), 12)
            row.append((t, np.sin(4 * t + rng.normal()) * rng.uniform(0.5, 2)))
        samples.append(row)
    grid = symmetric_grid([t for s in samples for t, _ in s], np.linspace(0, 1, 5))
    dt = torch.get_default_dtype()
    summary = np.array([[path_summary(t, v, kind) for t, v in s] for s in samples])
    return (
        build_paths(samples, grid, kind, dtype=dt),
        torch.as_tensor(grid, dtype=dt),
        torch.as_tensor(summary, dtype=dt),
        build_paths(samples, grid, kind, reverse=True, dtype=dt),
    )


def test_one_expert_equals_plain_ncde(float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    model = FAME(FAMEConfig(num_functions=2, num_experts=1, **TINY))
    coeffs, grid, summary, rev = _batch()
    z = model.encode(coeffs, grid, summary, rev)  # (B, J, Q, 2h)
    bank, h = model.field.experts, model.config.hidden

    def plain(e):
        def f(t, zz):
            hid = torch.tanh(F.linear(zz, bank.up[e], bank.up_bias[e]))
            return F.linear(hid, bank.down[e], bank.down_bias[e]).view(-1, h, 2)

        return f

    # the plain NCDE is driven by the path (time_scale * t, x): scale the time channel's
    # spline coefficients (channel 0 of each of the four coefficient blocks)
    s = model.config.time_scale
    stretch = torch.ones(8, dtype=coeffs.dtype)
    stretch[0::2] = s
    for direction, c in enumerate((coeffs, rev)):
        X = torchcde.CubicSpline(c.reshape(6, *c.shape[2:]) * stretch, grid)
        z0 = model.initial[direction](X.evaluate(grid[0]))
        ref = torchcde.cdeint(
            X,
            plain(direction),
            z0,
            model.quadrature,
            adjoint=False,
            method="rk4",
            options=dict(step_size=model.config.step_size),
        )
        ref = ref.view(3, 2, 5, h)
        got = z[..., direction * h : (direction + 1) * h]
        if direction:
            got = got.flip(-2)
        torch.testing.assert_close(got, ref, atol=tol, rtol=tol)


def test_mixture_computed_once_per_function():
    model = FAME(FAMEConfig(num_functions=2, num_experts=3, **TINY))
    calls = []
    model.field.router.register_forward_hook(lambda m, i, o: calls.append(i[0].shape))
    coeffs, grid, summary, rev = _batch()
    y = model(coeffs, grid, summary, torch.linspace(0, 1, 4), rev)
    assert y.shape == (3, 4)
    assert calls == [torch.Size([6, 4 + 2])]  # one router call, one row per function
    pi = model.mixture_weights
    torch.testing.assert_close(pi.sum(-1), torch.ones(6))
    assert pi.shape == (6, 3)


def test_gradcheck_through_the_solver():
    torch.manual_seed(0)
    with torch.random.fork_rng():
        old = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            model = FAME(FAMEConfig(num_functions=1, num_experts=2, **TINY))
            coeffs, grid, summary, rev = _batch(num_functions=1, B=2)
            q = torch.tensor([0.1, 0.6, 1.0])
            s = summary.clone().requires_grad_(True)
            a = torch.tensor([1.0, 1.0], requires_grad=True)  # path scales: d/dX

            def fn(s, a):
                scale = torch.stack([a[0], a[1]]).repeat(4)  # (time, value) x 4 coefficients
                return model(coeffs * scale, grid, s, q, rev * scale)

            assert torch.autograd.gradcheck(fn, (s, a), eps=1e-6, atol=1e-6)
        finally:
            torch.set_default_dtype(old)


def test_predictions_invariant_to_refining_a_smooth_input():
    def x1(t):
        return np.sin(2 * t) + 0.5

    def x2(t):
        return np.cos(3 * t) * t

    train_t = np.linspace(0, 3, 30)
    X = [[(train_t, a * x1(train_t)), (train_t, x2(train_t) + a)] for a in (0.5, 1.0, 1.5)]
    Y = [(train_t, a * x2(train_t)) for a in (0.5, 1.0, 1.5)]
    reg = FunctionOnFunctionRegressor(steps=1, spline="not-a-knot", progress=False, **TINY)
    reg.fit(X, Y)
    q = np.linspace(0, 3, 11)

    def obs(n):
        t = np.linspace(0, 3, n)
        return [[(t, x1(t)), (t, x2(t) + 1.0)]]

    ref = reg.predict(obs(400), q)
    assert np.abs(reg.predict(obs(100), q) - ref).max() < 1e-5 * (1 + np.abs(ref).max())
    coarse = np.abs(reg.predict(obs(5), q) - ref).max()
    assert coarse > 1e-3  # a grid too coarse to resolve the input does change the output


def test_regressor_handles_missing_values_and_irregular_outputs():
    rng = np.random.default_rng(0)
    X, Y = [], []
    for _ in range(5):
        t = np.sort(rng.choice(np.linspace(0, 2, 30), 12, replace=False))
        v = np.sin(t) * rng.uniform(1, 2)
        v[3] = np.nan
        X.append([(t, v)])
        to = np.sort(rng.choice(np.linspace(0, 2, 30), 6, replace=False))
        Y.append((to, np.cos(to)))
    reg = FunctionOnFunctionRegressor(steps=3, batch_size=2, progress=False, **TINY).fit(X, Y)
    assert len(reg.history) == 3 and all(np.isfinite(reg.history))
    p = reg.predict(X, [1.5, 0.0, 1.5])
    assert p.shape == (5, 3) and np.allclose(p[:, 0], p[:, 2])
    assert reg.mixture_weights(X).shape == (5, 1, 3)
    with pytest.raises(ValueError, match="outside the fitted domain"):
        reg.predict(X, [5.0])
    with pytest.raises(ValueError, match="input functions, expected 1"):
        reg.predict([[X[0][0], X[0][0]]], [1.0])


def test_config_errors():
    with pytest.raises(ValueError, match="spline"):
        FAMEConfig(num_functions=1, spline="linear")
    with pytest.raises(ValueError, match="num_experts"):
        FAMEConfig(num_functions=1, num_experts=0)
    with pytest.raises(TypeError, match="not both"):
        FunctionOnFunctionRegressor(FAMEConfig(num_functions=1), hidden=3)


@pytest.mark.slow  # ~25 s on a contended 2-core machine (the adjoint solve is step-bound)
def test_adjoint_gradients_match_backpropagation():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        kw = dict(TINY, substeps=3, time_scale=1.0)  # adjoint and backprop discretise alike
        a = FAME(FAMEConfig(num_functions=1, num_experts=2, **kw))
        b = FAME(FAMEConfig(num_functions=1, num_experts=2, adjoint=True, **kw))
        b.load_state_dict(a.state_dict())
        coeffs, grid, summary, rev = _batch(num_functions=1, B=2)
        q = torch.linspace(0, 1, 3)
        grads = []
        for m in (a, b):
            m(coeffs, grid, summary, q, rev).pow(2).sum().backward()
            grads.append(torch.cat([p.grad.flatten() for p in m.field.experts.parameters()]))
        torch.testing.assert_close(grads[1], grads[0], atol=1e-4, rtol=1e-3)
    finally:
        torch.set_default_dtype(old)


def test_time_channel_scaled_so_time_alone_drives_the_decoder_far():
    """With the decoder field saturated (tanh = 1) and G constant, the path moves only in
    time, so ``u(1) - u(0) = time_scale``: the time channel is not the bottleneck.
    Unscaled (``time_scale = 1``, the old model), the decoder state could move by at most
    1 over the whole domain from time alone, whatever the weights."""
    for s in (1.0, 8.0):
        model = FAME(FAMEConfig(num_functions=1, num_experts=1, time_scale=s, **TINY))
        last = model.decoder_field[2]
        with torch.no_grad():
            last.weight.zero_()
            last.bias.fill_(50.0)  # tanh(50) = 1 for every entry of the field
        g = torch.zeros(1, 5, 3)
        u0 = model.decoder_initial(g[:, 0])
        model.readout.weight.data.fill_(1.0)
        with torch.no_grad():
            y = model.decode(g, torch.tensor([0.0, 1.0]))
        moved = (y[0, 1] - y[0, 0]) / 3  # readout sums the 3 decoder states
        assert u0.shape == (1, 3)
        torch.testing.assert_close(moved, torch.tensor(s, dtype=moved.dtype), rtol=1e-6, atol=1e-6)
    assert FAMEConfig(num_functions=1).time_scale > 1  # the default scales


def test_regressor_centres_outputs_on_the_training_mean_curve():
    """An untrained head (readout and skip zero) predicts the training mean curve, not a
    constant: the network learns deviations from the mean function."""
    t = np.linspace(0, 1, 9)
    X = [[(t, np.sin(a * t))] for a in (1.0, 2.0, 3.0)]
    Y = [(t, 5 * t**2 + a) for a in (1.0, 2.0, 3.0)]
    reg = FunctionOnFunctionRegressor(steps=1, lr=1e-9, progress=False, **TINY).fit(X, Y)
    with torch.no_grad():
        for p in (reg.model.readout.weight, reg.model.readout.bias, reg.model.skip.weight):
            p.zero_()
    np.testing.assert_allclose(reg.predict(X, t)[1], 5 * t**2 + 2.0, atol=1e-9)
    flat = FunctionOnFunctionRegressor(steps=1, lr=1e-9, progress=False, center=False, **TINY)
    flat.fit(X, Y)
    with torch.no_grad():
        for p in (flat.model.readout.weight, flat.model.readout.bias, flat.model.skip.weight):
            p.zero_()
    assert np.ptp(flat.predict(X, t)[1]) < 1e-9  # the old behaviour: one constant
