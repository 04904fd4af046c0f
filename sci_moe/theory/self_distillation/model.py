"""The noisy two-cluster Gaussian mixture of optimal self-distillation and its test error.

Data model of Takanami, Takahashi and Sakata, "The Effect of Optimal Self-Distillation in
Noisy Gaussian Mixture Model" (NeurIPS 2025, arXiv:2501.16226).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

__all__ = ["LOSSES", "SelfDistillationModel", "classification_error"]

LOSSES = ("bce", "mse")


@dataclass(frozen=True)
class SelfDistillationModel:
    r"""Data model and training loss of multi-stage self-distillation of a linear classifier.

    Inputs are :math:`x_\mu = c_\mu \mathbf 1_N/\sqrt N + \sqrt\Delta\, g_\mu`,
    :math:`g_\mu \sim \mathcal N(0, I_N)`, :math:`\mu = 1..M = \alpha N`, with cluster
    :math:`c = +1` w.p. :math:`\rho` and :math:`-1` w.p. :math:`1-\rho`; the label
    :math:`y = (1+c)/2 \in \{0, 1\}` is flipped w.p. :math:`\theta`. The classifier is
    :math:`u = w\cdot x/\sqrt N + B`, trained stage-wise on

    .. math::

        \sum_\mu \ell(\tilde y_\mu, u_\mu) + \frac{\lambda_t}{2}\lVert w\rVert^2,\qquad
        \ell_{\rm BCE} = \log(1+e^{-u}) + (1-y)u,\qquad
        \ell_{\rm MSE} = \Big(\frac{u+1}{2} - y\Big)^2,

    with the bias :math:`B` unregularised (``learn_bias=True``) or fixed to 0.

    Parameters
    ----------
    alpha : float
        Sample ratio :math:`\alpha = M/N > 0`.
    theta : float
        Label-flip probability, in ``[0, 0.5]``.
    rho : float
        Probability of cluster ``c = +1``, in ``(0, 1)``; ``rho != 0.5`` is label imbalance.
    delta : float
        Within-class variance :math:`\Delta > 0`.
    loss : {"bce", "mse"}
        Training loss.
    learn_bias : bool
        Learn the (unregularised) bias; ``False`` fixes ``B = 0`` (the imbalance heuristic).
    """

    alpha: float
    theta: float = 0.0
    rho: float = 0.5
    delta: float = 1.0
    loss: str = "bce"
    learn_bias: bool = True

    def __post_init__(self):
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"alpha must be a finite number > 0 (M/N), got {self.alpha!r}")
        if not 0.0 <= self.theta <= 0.5:
            raise ValueError(
                f"theta (label-flip probability) must be in [0, 0.5], got {self.theta!r}"
            )
        if not 0.0 < self.rho < 1.0:
            raise ValueError(f"rho (probability of c=+1) must be in (0, 1), got {self.rho!r}")
        if not (math.isfinite(self.delta) and self.delta > 0):
            raise ValueError(
                f"delta (within-class variance) must be finite and > 0, got {self.delta!r}"
            )
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if not isinstance(self.learn_bias, bool):
            raise TypeError(f"learn_bias must be a bool, got {type(self.learn_bias).__name__}")

    def class_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The four (cluster, noisy label) combinations and their probabilities.

        Returns
        -------
        c, y, p : ndarray, shape (4,)
            Cluster ``c`` in {+1, -1}, label ``y`` in {0, 1}, probability ``p`` (sums to 1).
        """
        c = np.array([1.0, 1.0, -1.0, -1.0])
        y = np.array([1.0, 0.0, 0.0, 1.0])
        p = np.array(
            [
                self.rho * (1 - self.theta),
                self.rho * self.theta,
                (1 - self.rho) * (1 - self.theta),
                (1 - self.rho) * self.theta,
            ]
        )
        return c, y, p


def classification_error(m: float, Q: float, b: float, model: SelfDistillationModel) -> float:
    r"""Exact population test error (against the clean cluster) of a linear classifier.

    With :math:`m = w\cdot\mathbf 1/N`, :math:`Q = \lVert w\rVert^2/N` and bias :math:`b`,

    .. math::

        \varepsilon = \rho\, H\!\Big(\frac{m+b}{\sqrt{\Delta Q}}\Big)
        + (1-\rho)\, H\!\Big(\frac{m-b}{\sqrt{\Delta Q}}\Big),\qquad H(x) = \int_x^\infty
        \frac{e^{-t^2/2}}{\sqrt{2\pi}}\,dt .

    ``Q = 0`` (a constant classifier) gives the error of the sign of ``b`` (ties count as ``1/2``).
    """
    if Q < 0:
        raise ValueError(f"Q = |w|^2/N must be >= 0, got {Q!r}")
    s = math.sqrt(model.delta * Q)
    if s == 0.0:
        plus = 0.0 if m + b > 0 else (1.0 if m + b < 0 else 0.5)
        minus = 0.0 if m - b > 0 else (1.0 if m - b < 0 else 0.5)
        return model.rho * plus + (1 - model.rho) * minus
    return float(model.rho * ndtr(-(m + b) / s) + (1 - model.rho) * ndtr(-(m - b) / s))
