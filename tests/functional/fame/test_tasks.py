"""The driven-ODE tasks: closed-form responses to constant inputs, the regime switch."""

import numpy as np
import pytest

from sci_moe.functional.fame import FourierFunction, make_ode_data, ode_response, regime_of


def _const(c: float) -> FourierFunction:
    return FourierFunction(np.zeros(1), np.ones(1), np.zeros(1), 10.0, offset=c)


def test_constant_inputs_have_closed_form_responses():
    t = np.linspace(0, 10, 11)
    lin = ode_response("linear", [_const(2.0)], t, 10.0)[0]
    np.testing.assert_allclose(lin, 2.0 / 1.5 * (1 - np.exp(-1.5 * t)), atol=1e-8)
    # m <= 0: y' = -2 y + x^2 / 2
    neg = ode_response("regime", [_const(-1.0)], t, 10.0)[0]
    np.testing.assert_allclose(neg, 0.25 * (1 - np.exp(-2 * t)), atol=1e-8)
    # m > 0: y' = -y^3 + sin(2x) settles at the cube root of sin(2x)
    pos = ode_response("regime", [_const(0.7)], np.linspace(0, 10, 3), 10.0)[0]
    assert pos[-1] == pytest.approx(np.sin(1.4) ** (1 / 3), abs=1e-3)


def test_regime_follows_the_mean_level_and_data_are_reproducible():
    assert regime_of(_const(0.1), 10.0) and not regime_of(_const(-0.1), 10.0)
    a = make_ode_data("regime", 6, seed=3)
    b = make_ode_data("regime", 6, seed=3)
    np.testing.assert_array_equal(a.outputs, b.outputs)
    assert a.outputs.shape == (6, 25) and len(a.inputs[0]) == 1
    assert {f[0].offset for f in a.functions} <= {-1.0, 1.0}
    with pytest.raises(ValueError, match="task"):
        make_ode_data("cubic", 2)
