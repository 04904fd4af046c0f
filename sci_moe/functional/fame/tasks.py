"""Driven ODE operators with an exact truth: a linear one and a regime-switching nonlinear one.

Both map one input function ``x`` on ``[0, T]`` to the response ``y`` of a driven ODE at
rest at 0, solved by ``scipy.integrate.solve_ivp`` (DOP853, ``rtol=1e-9``,
``atol=1e-11``) with ``x`` evaluated in closed form (so ``y`` is exact to solver
tolerance):

* ``"linear"``: ``y' = -1.5 y + x(t)``; the operator is linear, so a functional linear
  model can represent it exactly (up to its basis).
* ``"regime"``: the dynamics switch with the sign of the input's mean level
  ``m = (1/T) int_0^T x``:

  .. math::
      y' = \\begin{cases} -y^3 + \\sin(2 x(t)) & m > 0 \\\\
      -2 y + \\tfrac12 x(t)^2 & m \\le 0 \\end{cases}

  Both branches are nonlinear in ``x`` and differ in kind (a saturating cubic drift with
  an oscillating drive, a linear drift with a quadratic drive), so one smooth vector field
  must bend to cover both while a mixture can give each regime its own expert; the
  regime is visible in the path summary the FAME router reads (the mean level).

Inputs: ``x(t) = m_0 + sum_k a_k sin(2 pi f_k t / T + phi_k)`` with 2-4 modes of frequency
0.5-3 cycles per domain and amplitude ``~ N(0, 1/M)``; ``m_0 = +-1`` with equal
probability for ``"regime"`` (the realised mean ``m`` decides the branch) and ``N(0, 0.3)``
for ``"linear"``. Every input is observed at its own random fraction of a ``grid_size``
grid (``observed``), the outputs on an equispaced ``output_size`` grid.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from .data import FourierFunction, OscillatorData, subsample

__all__ = ["ODE_TASKS", "make_ode_data", "ode_response", "regime_of"]

#: The operators of :func:`make_ode_data`.
ODE_TASKS = ("linear", "regime")


def regime_of(x: FourierFunction, period: float, points: int = 2001) -> bool:
    """Whether ``x`` has a positive mean level on ``[0, period]`` (trapezoid rule)."""
    t = np.linspace(0.0, period, points)
    return bool(np.trapezoid(x(t), t) > 0)


def ode_response(task: str, xs, times: np.ndarray, period: float) -> np.ndarray:
    """Exact responses of the ``task`` operator (module docstring), shape ``(N, len(times))``.

    Parameters
    ----------
    task : {"linear", "regime"}
    xs : sequence (N) of FourierFunction
    times : ndarray, shape (M,)
        Increasing output times in ``[0, period]``.
    period : float
        ``T``.
    """
    if task not in ODE_TASKS:
        raise ValueError(f"task must be one of {ODE_TASKS}, got {task!r}")
    xs = list(xs)
    pos = np.array([regime_of(x, period) for x in xs]) if task == "regime" else None

    def rhs(t, y):
        x = np.array([f(t) for f in xs])
        if task == "linear":
            return -1.5 * y + x
        return np.where(pos, -(y**3) + np.sin(2 * x), -2 * y + 0.5 * x**2)

    sol = solve_ivp(
        rhs,
        (0.0, float(times[-1])),
        np.zeros(len(xs)),
        method="DOP853",
        t_eval=times,
        rtol=1e-9,
        atol=1e-11,
    )
    if not sol.success:  # pragma: no cover - smooth bounded inputs
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y


def make_ode_data(
    task: str,
    num_samples: int,
    seed: int = 0,
    *,
    period: float = 10.0,
    grid_size: int = 50,
    output_size: int = 25,
    observed: float | tuple[float, float] = (0.25, 1.0),
) -> OscillatorData:
    """Inputs, their irregular observations and the exact responses of one operator.

    Parameters
    ----------
    task : {"linear", "regime"}
    num_samples : int
    seed : int
    period : float
        Domain ``[0, period]``.
    grid_size : int
        Points of the input observation grid.
    output_size : int
        Points of the (equispaced) output grid.
    observed : float or (float, float)
        Observed fraction of the grid per input function (a range: drawn per function).

    Returns
    -------
    OscillatorData
        ``functions`` holds one-element tuples ``(x,)``; ``inputs`` one function each.
    """
    if task not in ODE_TASKS:
        raise ValueError(f"task must be one of {ODE_TASKS}, got {task!r}")
    if num_samples < 1 or grid_size < 4 or output_size < 2:
        raise ValueError("need num_samples >= 1, grid_size >= 4 and output_size >= 2")
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, period, grid_size)
    out_t = np.linspace(0.0, period, output_size)
    functions = []
    for _ in range(num_samples):
        m = int(rng.integers(2, 5))
        freqs = rng.uniform(0.5, 3.0, size=m)
        amps = rng.normal(size=m) / np.sqrt(m)
        offset = float(rng.choice([-1.0, 1.0])) if task == "regime" else 0.3 * rng.normal()
        x = FourierFunction(amps, freqs, rng.uniform(0, 2 * np.pi, size=m), period, offset)
        functions.append((x,))
    ys = ode_response(task, [f[0] for f in functions], out_t, period)
    inputs = subsample(functions, grid, observed, rng)
    return OscillatorData(functions, grid, inputs, out_t, ys)
