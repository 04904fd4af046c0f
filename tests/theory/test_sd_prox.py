"""Prox operators and quadrature."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from sci_moe.theory.self_distillation import gauss_hermite, gaussian_points, prox_bce, prox_mse


@pytest.mark.parametrize("scale", [1e-6, 0.3, 5.0, 300.0])
def test_bce_prox_stationarity_and_derivative(scale):
    rng = np.random.default_rng(0)
    omega = rng.normal(0, 5, 200)
    y = rng.random(200)
    z, dz = prox_bce(omega, y, scale)
    np.testing.assert_allclose(expit(omega + z) - y + z / scale, 0, atol=1e-10 / min(scale, 1))
    eps = 1e-6
    fd = (prox_bce(omega + eps, y, scale)[0] - prox_bce(omega - eps, y, scale)[0]) / (2 * eps)
    np.testing.assert_allclose(dz, fd, atol=1e-6 * max(scale, 1))


def test_mse_prox_closed_form():
    omega, y, scale = np.array([0.3, -1.0]), np.array([1.0, 0.0]), 0.5
    z, dz = prox_mse(omega, y, scale)
    np.testing.assert_allclose((omega + z + 1) / 2 - y + z / scale, 0, atol=1e-14)
    np.testing.assert_allclose(dz, -scale / (2 + scale))


def test_quadrature_moments():
    x, w = gauss_hermite(21)
    assert w.sum() == pytest.approx(1.0)
    assert w @ x**2 == pytest.approx(1.0) and w @ x**4 == pytest.approx(3.0)
    xi, wq = gaussian_points(2, 11)
    assert wq @ (xi[:, 0] ** 2 * xi[:, 1] ** 2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="method"):
        gaussian_points(1, 5, method="sobol")
