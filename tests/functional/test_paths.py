"""Control paths: exact polynomial reproduction, refinement, summaries."""

import numpy as np
import pytest
import torch

from sci_moe.functional import build_paths, path_summary, symmetric_grid
from sci_moe.functional.fame import import_torchcde

torchcde = import_torchcde()


def _spline(samples, grid, kind, reverse=False):
    c = build_paths(samples, np.asarray(grid), kind, reverse=reverse, dtype=torch.float64)
    return torchcde.CubicSpline(c, torch.as_tensor(grid, dtype=torch.float64))


def test_not_a_knot_reproduces_a_cubic_exactly():
    rng = np.random.default_rng(1)
    t = np.round(np.sort(rng.choice(np.linspace(0, 1, 60), 9, replace=False)), 12)
    t[0], t[-1] = 0.0, 1.0  # observed over the whole domain
    p = np.polynomial.Polynomial([0.3, -1.0, 2.5, -1.7])
    grid = symmetric_grid([t], np.linspace(0, 1, 7))
    X = _spline([[(t, p(t))]], grid, "not-a-knot")
    s = torch.as_tensor(rng.uniform(0, 1, 50))
    val = X.evaluate(s)[0, 0]  # (50, 2): time, value
    der = X.derivative(s)[0, 0]
    torch.testing.assert_close(val[:, 1], torch.as_tensor(p(s.numpy())), atol=1e-11, rtol=0)
    torch.testing.assert_close(der[:, 1], torch.as_tensor(p.deriv()(s.numpy())), atol=1e-10, rtol=0)
    torch.testing.assert_close(val[:, 0], s)  # time channel
    torch.testing.assert_close(der[:, 0], torch.ones(50, dtype=torch.float64))


@pytest.mark.parametrize("kind", ["natural", "hermite"])
def test_linear_exact_and_constant_outside(kind):
    t = np.array([0.2, 0.35, 0.5, 0.8])
    grid = symmetric_grid([t], np.linspace(0, 1, 5))
    X = _spline([[(t, 2 * t - 1)]], grid, kind)
    s = torch.tensor([0.0, 0.1, 0.25, 0.6, 0.79, 0.9, 1.0], dtype=torch.float64)
    v = X.evaluate(s)[0, 0, :, 1]
    expected = 2 * s.clamp(0.2, 0.8) - 1
    torch.testing.assert_close(v, expected, atol=1e-12, rtol=0)


def test_grid_must_contain_the_observations():
    with pytest.raises(ValueError, match="must contain every observation"):
        build_paths([[(np.array([0.0, 0.33, 1.0]), np.ones(3))]], np.linspace(0, 1, 5))


def test_reverse_path_is_the_mirror():
    t = np.array([0.0, 0.3, 0.45, 0.9])
    v = np.array([1.0, -0.5, 0.2, 0.7])
    grid = symmetric_grid([t], np.linspace(0, 1, 5))
    Xf = _spline([[(t, v)]], grid, "natural")
    Xb = _spline([[(t, v)]], grid, "natural", reverse=True)
    s = torch.linspace(0, 1, 23, dtype=torch.float64)
    torch.testing.assert_close(Xb.evaluate(s)[0, 0, :, 1], Xf.evaluate(1 - s)[0, 0, :, 1])


def test_summary_is_robust_to_refinement():
    def f(t):
        return np.sin(5 * t) + 0.3 * t

    fine = np.linspace(0, 1, 200)
    coarse = np.linspace(0, 1, 25)
    a, b = path_summary(fine, f(fine), "not-a-knot"), path_summary(coarse, f(coarse), "not-a-knot")
    assert np.abs(a - b).max() < 1e-3
    other = path_summary(fine, 2 * f(fine), "not-a-knot")
    assert np.abs(a - other).max() > 0.1
