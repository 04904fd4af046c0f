"""Diagnostics for tempering runs: level histograms, round trips, autocorrelation, ESS.

Time series are arrays of shape ``(T, B)`` (``T`` iterations, ``B`` chains); numpy arrays
and torch tensors are both accepted.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "acceptance_summary",
    "autocorrelation",
    "effective_sample_size",
    "ess_per_second",
    "integrated_autocorr_time",
    "level_histogram",
    "masked_mean",
    "round_trips",
]


def _np(a) -> np.ndarray:
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def _series(x) -> np.ndarray:
    a = _np(x).astype(float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] < 2:
        raise ValueError(f"expected a series of shape (T,) or (T, B) with T >= 2, got {a.shape}")
    return a


def level_histogram(levels, n_levels: int) -> np.ndarray:
    """Fraction of (iteration, chain) pairs at each level, shape ``(n_levels,)``."""
    lv = _np(levels).astype(int).ravel()
    if n_levels < 1 or lv.size == 0 or lv.min() < 0 or lv.max() >= n_levels:
        raise ValueError(f"levels must be non-empty and lie in [0, {n_levels - 1}]")
    return np.bincount(lv, minlength=n_levels) / lv.size


def round_trips(levels, n_levels: int) -> np.ndarray:
    """Round trips per chain: target level ``L-1`` -> hottest level ``0`` -> back to ``L-1``.

    Parameters
    ----------
    levels : array, shape (T, B)

    Returns
    -------
    numpy.ndarray, shape (B,), int
    """
    lv = _np(levels).astype(int)
    if lv.ndim == 1:
        lv = lv[:, None]
    out = np.zeros(lv.shape[1], dtype=int)
    for b in range(lv.shape[1]):
        state = 0  # 0: waiting to reach the cold end, 1: going hot, 2: coming back
        for v in lv[:, b]:
            if state == 0 and v == n_levels - 1:
                state = 1
            elif state == 1 and v == 0:
                state = 2
            elif state == 2 and v == n_levels - 1:
                out[b] += 1
                state = 1
    return out


def acceptance_summary(result) -> dict[str, np.ndarray]:
    """Local and level-move acceptance rates of a :class:`TemperingResult` as numpy arrays."""
    return {
        "local": _np(result.local_acceptance),
        "level": _np(result.level_acceptance),
    }


def autocorrelation(x) -> np.ndarray:
    """Normalised autocorrelation :math:`\\rho(k)` averaged over chains (FFT), shape ``(T,)``.

    Autocovariances use the pooled mean over all chains, so a chain stuck away from the
    others shows as slow decorrelation.
    """
    a = _series(x)
    T = a.shape[0]
    a = a - a.mean()
    n = 1 << (2 * T - 1).bit_length()
    f = np.fft.rfft(a, n=n, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=n, axis=0)[:T].mean(axis=1) / T
    if acov[0] <= 0:
        return np.concatenate([[1.0], np.zeros(T - 1)])
    return acov / acov[0]


def integrated_autocorr_time(x, c: float = 5.0) -> float:
    """Integrated autocorrelation time with Sokal's automatic window.

    .. math:: \\tau(M) = 1 + 2\\sum_{k=1}^{M}\\rho(k),

    with ``M`` the smallest window satisfying :math:`M \\ge c\\,\\tau(M)` (Sokal 1989).
    iid data give :math:`\\tau \\approx 1`; AR(1) with coefficient :math:`\\rho` gives
    :math:`(1+\\rho)/(1-\\rho)`. A constant series returns 1.

    Parameters
    ----------
    x : array, shape (T,) or (T, B)
    c : float
        Window constant (5 is standard; larger is safer for slowly decaying series).
    """
    if c <= 0:
        raise ValueError(f"c must be positive, got {c}")
    rho = autocorrelation(x)
    taus = 2.0 * np.cumsum(rho) - 1.0
    windows = np.arange(len(taus))
    ok = windows >= c * taus
    m = int(np.argmax(ok)) if ok.any() else len(taus) - 1
    return float(max(taus[m], 1e-12))


def effective_sample_size(x, c: float = 5.0) -> float:
    """ESS :math:`= T B / \\tau` of a ``(T, B)`` series."""
    a = _series(x)
    return a.size / integrated_autocorr_time(a, c)


def ess_per_second(x, seconds: float, c: float = 5.0) -> float:
    """Effective samples per second of wall time ``seconds``."""
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    return effective_sample_size(x, c) / seconds


def masked_mean(values, mask, c: float = 5.0) -> tuple[float, float]:
    """Mean of ``values`` over the entries where ``mask`` holds, with a standard error.

    Used for ST estimates at the target level: the ratio estimator
    :math:`\\hat\\mu = \\sum f\\,1_m / \\sum 1_m`; its standard error by the delta method on
    :math:`z_t = 1_m(f - \\hat\\mu)`,
    :math:`\\mathrm{se}^2 = \\tau_z\\,\\overline{z^2}/(N\\,\\bar{1}_m^2)`, ``N = T B``.

    Parameters
    ----------
    values, mask : array, shape (T, B)

    Returns
    -------
    (mean, stderr) : tuple of float
    """
    f, m = _series(values), _series(mask).astype(bool)
    if f.shape != m.shape:
        raise ValueError("values and mask must have the same shape")
    if not m.any():
        raise ValueError("mask selects nothing; run longer or check the level")
    mu = float(f[m].mean())
    z = np.where(m, f - mu, 0.0)
    tau = integrated_autocorr_time(z, c)
    se = np.sqrt(tau * (z**2).mean() / (z.size * m.mean() ** 2))
    return mu, float(se)
