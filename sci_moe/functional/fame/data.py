"""Synthetic function-on-function data with an exact ground truth: a forced oscillator.

The operator maps two input functions ``(x_1, x_2)`` on ``[0, T]`` to the response
``y`` of a damped oscillator with forcing ``x_1`` and stiffness modulated by ``x_2``:

.. math::
    y'' + 2\\zeta\\omega_0\\, y' + \\omega_0^2\\,(1 + \\tfrac12 x_2(t))\\, y = x_1(t),
    \\qquad y(0) = y'(0) = 0,

solved by ``scipy.integrate.solve_ivp`` (DOP853, ``rtol=1e-9``, ``atol=1e-11``) with the
inputs evaluated in closed form, so ``y`` is exact to solver tolerance. Inputs have
heterogeneous scales and smoothness: ``x_1`` is a smooth random Fourier series (2-4 low
modes, amplitude log-uniform in ``[0.5, 5]``); ``x_2 = tanh`` of a rougher series (4-8
modes up to frequency 8), so ``|x_2| < 1`` and the stiffness stays positive. Every input
function is observed at its own random 30-70 % of a 100-point grid; the output is
given on a dense grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

__all__ = [
    "FourierFunction",
    "OscillatorData",
    "make_oscillator_data",
    "oscillator_response",
    "relative_l2",
    "subsample",
]


@dataclass
class FourierFunction:
    """``f(t) = offset + sum_m a_m sin(2 pi k_m t / T + phi_m)``, optionally through tanh.

    Attributes
    ----------
    amplitudes, frequencies, phases : ndarray, shape (M,)
    period : float
        ``T``.
    offset : float
    squash : bool
        Apply ``tanh`` to the series.
    """

    amplitudes: np.ndarray
    frequencies: np.ndarray
    phases: np.ndarray
    period: float
    offset: float = 0.0
    squash: bool = False

    def __call__(self, t):
        t = np.asarray(t, dtype=np.float64)
        arg = 2 * np.pi * np.multiply.outer(t, self.frequencies) / self.period + self.phases
        s = self.offset + np.sin(arg) @ self.amplitudes
        return np.tanh(s) if self.squash else s


def _random_series(rng, period, modes, max_freq, scale, squash=False) -> FourierFunction:
    m = int(rng.integers(modes[0], modes[1] + 1))
    freqs = rng.uniform(0.5, max_freq, size=m)
    amps = scale * rng.normal(size=m) / np.sqrt(m) / (1 + freqs) ** 0.5
    return FourierFunction(
        amps,
        freqs,
        rng.uniform(0, 2 * np.pi, size=m),
        period,
        offset=float(scale * 0.3 * rng.normal()),
        squash=squash,
    )


def _stacked(fs):
    """One callable evaluating all functions at a scalar time (vectorised if Fourier)."""
    if not all(isinstance(f, FourierFunction) for f in fs):
        return lambda t: np.array([f(t) for f in fs])
    M = max(len(f.amplitudes) for f in fs)

    def pad(name):
        return np.array([np.pad(getattr(f, name), (0, M - len(f.amplitudes))) for f in fs])

    a, k, ph = pad("amplitudes"), pad("frequencies"), pad("phases")
    off = np.array([f.offset for f in fs])
    per = np.array([f.period for f in fs])[:, None]
    sq = np.array([f.squash for f in fs])

    def call(t):
        s = off + (a * np.sin(2 * np.pi * k * t / per + ph)).sum(1)
        return np.where(sq, np.tanh(s), s)

    return call


def oscillator_response(
    x1, x2, times: np.ndarray, zeta: float = 0.3, omega0: float = 1.5
) -> np.ndarray:
    """Exact responses ``y(times)`` of the forced, modulated oscillator (module docstring).

    Several input pairs are solved as one stacked system (one ``solve_ivp`` call, the
    error control covers every component).

    Parameters
    ----------
    x1, x2 : callable or sequence of callables
        Input functions of time (one pair, or ``N`` pairs).
    times : ndarray, shape (n,)
        Increasing output times, ``times[0] >= 0`` (the state starts at rest at 0).
    zeta, omega0 : float
        Damping ratio and natural frequency (rad per time unit).

    Returns
    -------
    ndarray, shape (n,) or (N, n)
    """
    single = callable(x1)
    x1s, x2s = ([x1], [x2]) if single else (list(x1), list(x2))
    N = len(x1s)

    f1s, f2s = _stacked(x1s), _stacked(x2s)

    def rhs(t, s):
        y, v = s[:N], s[N:]
        w2 = omega0**2 * (1.0 + 0.5 * f2s(t))
        return np.concatenate([v, f1s(t) - 2 * zeta * omega0 * v - w2 * y])

    sol = solve_ivp(
        rhs,
        (0.0, float(times[-1])),
        np.zeros(2 * N),
        method="DOP853",
        t_eval=times,
        rtol=1e-9,
        atol=1e-11,
    )
    if not sol.success:  # pragma: no cover - smooth bounded inputs
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    y = sol.y[:N]
    return y[0] if single else y


@dataclass
class OscillatorData:
    """A forced-oscillator data set.

    Attributes
    ----------
    functions : list (N) of (FourierFunction, FourierFunction)
        The true inputs ``(x_1, x_2)`` (callable, exact).
    grid : ndarray, shape (G,)
        Observation grid of the inputs.
    inputs : list (N) of list (2) of (times, values)
        Observed inputs.
    output_times : ndarray, shape (M,)
    outputs : ndarray, shape (N, M)
        Exact responses.
    """

    functions: list
    grid: np.ndarray
    inputs: list
    output_times: np.ndarray
    outputs: np.ndarray

    def output_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Outputs as ``(times, values)`` pairs (what the regressors' ``fit`` takes)."""
        return [(self.output_times, y) for y in self.outputs]


def subsample(functions, grid, fraction, rng) -> list:
    """Observe every function at a random subset of ``grid``.

    Parameters
    ----------
    functions : list (N) of sequences of callables
    grid : ndarray, shape (G,)
    fraction : float or (float, float)
        Observed fraction, or a range to draw it from per function.
    rng : numpy.random.Generator

    Returns
    -------
    list (N) of list of (times, values)
    """
    out = []
    for fs in functions:
        row = []
        for f in fs:
            p = rng.uniform(*fraction) if np.ndim(fraction) else float(fraction)
            n = max(2, round(p * len(grid)))
            t = np.sort(rng.choice(grid, size=n, replace=False))
            row.append((t, f(t)))
        out.append(row)
    return out


def make_oscillator_data(
    num_samples: int,
    seed: int = 0,
    *,
    period: float = 10.0,
    grid_size: int = 100,
    output_size: int = 50,
    observed: float | tuple[float, float] = (0.3, 0.7),
) -> OscillatorData:
    """Generate ``num_samples`` input pairs, their observations and exact responses.

    Parameters
    ----------
    num_samples : int
    seed : int
    period : float
        Domain ``[0, period]``.
    grid_size : int
        Points of the input observation grid.
    output_size : int
        Points of the (equispaced) output grid.
    observed : float or (float, float)
        Observed fraction of the grid per input function.

    Returns
    -------
    OscillatorData
    """
    if num_samples < 1 or grid_size < 4 or output_size < 2:
        raise ValueError("need num_samples >= 1, grid_size >= 4 and output_size >= 2")
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, period, grid_size)
    out_t = np.linspace(0.0, period, output_size)
    functions = []
    for _ in range(num_samples):
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(5.0))))
        x1 = _random_series(rng, period, (2, 4), 3.0, scale)
        x2 = _random_series(rng, period, (4, 8), 8.0, 1.5, squash=True)
        functions.append((x1, x2))
    ys = oscillator_response([f[0] for f in functions], [f[1] for f in functions], out_t)
    inputs = subsample(functions, grid, observed, rng)
    return OscillatorData(functions, grid, inputs, out_t, ys)


def relative_l2(pred: np.ndarray, true: np.ndarray) -> float:
    """Mean over samples of ``||pred_i - true_i||_2 / ||true_i||_2``.

    Parameters
    ----------
    pred, true : ndarray, shape (N, M)
    """
    pred, true = np.asarray(pred), np.asarray(true)
    if pred.shape != true.shape:
        raise ValueError(f"shapes differ: {pred.shape} vs {true.shape}")
    num = np.linalg.norm(pred - true, axis=-1)
    return float(np.mean(num / np.maximum(np.linalg.norm(true, axis=-1), 1e-12)))
