"""Irregularly observed functions: validation of ``(times, values)`` pairs.

A *sample* of function-on-function regression is a list of ``J`` input functions, each
given as a pair ``(times, values)`` of 1-D arrays observed at its own times, and one
output function given the same way. Missing observations are ``NaN`` values (dropped
here); every function needs at least one finite observation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["check_function", "check_inputs", "check_outputs", "observed_range"]


def check_function(
    times,
    values,
    *,
    where: str = "function",
    domain: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate one observed function and drop its missing values.

    Parameters
    ----------
    times : array_like, shape (n,)
        Observation times, strictly increasing.
    values : array_like, shape (n,)
        Observed values; ``NaN`` marks a missing observation.
    where : str
        Name used in error messages (e.g. ``"sample 3, input function 1"``).
    domain : (float, float), optional
        The times must lie in ``[domain[0], domain[1]]``.

    Returns
    -------
    times, values : ndarray, shape (m,), float64
        The finite observations (``1 <= m <= n``).

    Raises
    ------
    ValueError
        Shapes differ or are not 1-D, times are not finite, unsorted or duplicated,
        no value is finite, or a time lies outside ``domain``.
    """
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if t.ndim != 1 or v.ndim != 1 or t.shape != v.shape:
        raise ValueError(
            f"{where}: times and values must be 1-D arrays of the same length, got shapes "
            f"{t.shape} and {v.shape}"
        )
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{where}: times must be finite; drop the NaN/inf times")
    steps = np.diff(t)
    if np.any(steps == 0):
        k = int(np.argmax(steps == 0))
        raise ValueError(
            f"{where}: duplicate time {t[k]!r} at positions {k} and {k + 1}; average or drop "
            "the repeated observations first"
        )
    if np.any(steps < 0):
        k = int(np.argmax(steps < 0))
        raise ValueError(
            f"{where}: times are not increasing ({t[k]!r} then {t[k + 1]!r} at position "
            f"{k + 1}); sort the observations by time (np.argsort)"
        )
    keep = np.isfinite(v)
    if not keep.any():
        raise ValueError(
            f"{where}: all {v.size} values are missing (NaN) or there are none; drop this "
            "sample or impute the function"
        )
    t, v = t[keep], v[keep]
    if domain is not None and (t[0] < domain[0] or t[-1] > domain[1]):
        raise ValueError(
            f"{where}: times span [{t[0]:g}, {t[-1]:g}], outside the domain "
            f"[{domain[0]:g}, {domain[1]:g}]; widen the domain or drop those observations"
        )
    return t, v


def check_inputs(
    inputs: Sequence[Sequence[tuple]],
    num_functions: int | None = None,
    domain: tuple[float, float] | None = None,
) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Validate a list of samples, each a list of ``J`` input functions.

    Parameters
    ----------
    inputs : sequence of sequences of (times, values)
        ``inputs[i][j]`` is input function ``j`` of sample ``i``.
    num_functions : int, optional
        Expected ``J`` (default: that of the first sample).
    domain : (float, float), optional
        See :func:`check_function`.

    Returns
    -------
    list of list of (ndarray, ndarray)
        Cleaned observations (missing values dropped).

    Raises
    ------
    ValueError
        No samples, a sample with a different number of functions, or a bad function.
    """
    if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence) or not len(inputs):
        raise ValueError(
            "inputs must be a non-empty list of samples, each a list of (times, values) pairs"
        )
    out = []
    for i, sample in enumerate(inputs):
        if not isinstance(sample, Sequence) or isinstance(sample, np.ndarray):
            raise ValueError(
                f"sample {i}: expected a list of (times, values) pairs, one per input function"
            )
        if num_functions is None:
            num_functions = len(sample)
        if len(sample) != num_functions:
            raise ValueError(
                f"sample {i} has {len(sample)} input functions, expected {num_functions}; "
                "every sample needs the same input functions in the same order"
            )
        row = []
        for j, pair in enumerate(sample):
            if len(pair) != 2:
                raise ValueError(f"sample {i}, input function {j}: expected (times, values)")
            row.append(
                check_function(*pair, where=f"sample {i}, input function {j}", domain=domain)
            )
        out.append(row)
    return out


def check_outputs(
    outputs: Sequence[tuple],
    num_samples: int,
    domain: tuple[float, float] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Validate one output function ``(times, values)`` per sample.

    Parameters
    ----------
    outputs : sequence of (times, values)
    num_samples : int
        Must equal ``len(outputs)``.
    domain : (float, float), optional

    Returns
    -------
    list of (ndarray, ndarray)
    """
    if len(outputs) != num_samples:
        raise ValueError(
            f"got {len(outputs)} output functions for {num_samples} input samples; pass one "
            "output (times, values) per sample"
        )
    return [
        check_function(*pair, where=f"sample {i}, output", domain=domain)
        for i, pair in enumerate(outputs)
    ]


def observed_range(inputs: Sequence[Sequence[tuple]]) -> tuple[float, float]:
    """Smallest and largest observation time over all samples and functions."""
    lo = min(float(t[0]) for s in inputs for t, _ in s)
    hi = max(float(t[-1]) for s in inputs for t, _ in s)
    return lo, hi
