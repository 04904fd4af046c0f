"""Time scaling to ``[0, 1]`` and per-function value normalisation, fitted on training data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .samples import check_inputs, check_outputs, observed_range

__all__ = ["FunctionScaler"]


@dataclass
class FunctionScaler:
    """Affine maps ``t -> (t - t0) / (t1 - t0)`` and ``x_j -> (x_j - m_j) / s_j``.

    Attributes
    ----------
    domain : (float, float)
        ``(t0, t1)``, the time domain of inputs and outputs.
    input_mean, input_std : ndarray, shape (J,)
        Over all training observations of input function ``j``.
    output_mean, output_std : float
        Over all training output observations.
    """

    domain: tuple[float, float]
    input_mean: np.ndarray
    input_std: np.ndarray
    output_mean: float
    output_std: float

    @classmethod
    def fit(cls, inputs, outputs, domain: tuple[float, float] | None = None) -> FunctionScaler:
        """Fit on checked training data (see :func:`~sci_moe.functional.check_inputs`).

        Parameters
        ----------
        inputs : list (N) of list (J) of (times, values)
        outputs : list (N) of (times, values)
        domain : (float, float), optional
            Default: the range of all observation times.
        """
        if domain is None:
            lo, hi = observed_range(inputs)
            lo = min(lo, min(float(t[0]) for t, _ in outputs))
            hi = max(hi, max(float(t[-1]) for t, _ in outputs))
            domain = (lo, hi)
        if not domain[1] > domain[0]:
            raise ValueError(f"the time domain {domain} is empty; pass domain=(t0, t1), t1 > t0")
        J = len(inputs[0])
        vals = [np.concatenate([s[j][1] for s in inputs]) for j in range(J)]
        out = np.concatenate([v for _, v in outputs])

        def sd(v):
            s = float(np.std(v))
            return s if s > 0 else 1.0

        return cls(
            (float(domain[0]), float(domain[1])),
            np.array([v.mean() for v in vals]),
            np.array([sd(v) for v in vals]),
            float(out.mean()),
            sd(out),
        )

    @property
    def num_functions(self) -> int:
        """``J``."""
        return len(self.input_mean)

    def scale_times(self, t: np.ndarray) -> np.ndarray:
        """Times mapped to ``[0, 1]`` (rounded to 12 decimals so knots merge exactly)."""
        t0, t1 = self.domain
        return np.round((np.asarray(t, dtype=np.float64) - t0) / (t1 - t0), 12)

    def transform_inputs(self, inputs: Sequence) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Check, scale times and normalise values of raw inputs."""
        inputs = check_inputs(inputs, self.num_functions, self.domain)
        return [
            [
                (self.scale_times(t), (v - self.input_mean[j]) / self.input_std[j])
                for j, (t, v) in enumerate(s)
            ]
            for s in inputs
        ]

    def transform_outputs(self, outputs: Sequence, num_samples: int):
        """Check, scale times and normalise values of raw outputs."""
        outputs = check_outputs(outputs, num_samples, self.domain)
        return [(self.scale_times(t), (v - self.output_mean) / self.output_std) for t, v in outputs]

    def inverse_outputs(self, y: np.ndarray) -> np.ndarray:
        """Normalised predictions back to output units."""
        return np.asarray(y) * self.output_std + self.output_mean

    def scale_query(self, query) -> np.ndarray:
        """Check and scale query times (1-D, inside the domain)."""
        q = np.asarray(query, dtype=np.float64)
        if q.ndim != 1 or not q.size or not np.all(np.isfinite(q)):
            raise ValueError("query_times must be a non-empty 1-D array of finite times")
        if q.min() < self.domain[0] or q.max() > self.domain[1]:
            raise ValueError(
                f"query times span [{q.min():g}, {q.max():g}], outside the fitted domain "
                f"{self.domain}; refit with a wider domain="
            )
        return np.clip(self.scale_times(q), 0.0, 1.0)
