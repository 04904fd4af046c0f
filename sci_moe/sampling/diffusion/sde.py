"""Forward noising SDEs with linear drift: variance preserving (VP) and variance exploding (VE).

Both have the form :math:`dx = a(t)\\,x\\,dt + g(t)\\,dW` with marginals
:math:`x_t = m_t x_0 + \\sigma_t \\varepsilon`, which is all the denoising loss, the
Fokker-Planck residual and the samplers need (Song et al. 2021; ScoreMD, Plainer et al.,
NeurIPS 2025, arXiv 2506.17139).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["SDE", "VESDE", "VPSDE", "time_features"]


class SDE:
    """Base class: linear-drift SDE on ``t in [0, 1]``.

    Subclasses implement :meth:`log_mean_coeff`, :meth:`sigma`, :meth:`drift_coeff` and
    :meth:`g2`. All methods take ``t`` as a tensor of any shape and broadcast.
    """

    def log_mean_coeff(self, t: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def sigma(self, t: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def drift_coeff(self, t: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """``a(t)`` in the drift ``f(x, t) = a(t) x``."""
        raise NotImplementedError

    def g2(self, t: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """Squared diffusion coefficient ``g(t)^2``."""
        raise NotImplementedError

    def mean_coeff(self, t: torch.Tensor) -> torch.Tensor:
        """``m_t`` with ``E[x_t | x_0] = m_t x_0``."""
        return self.log_mean_coeff(t).exp()

    def marginal(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(m_t, sigma_t)`` of the transition kernel ``N(m_t x_0, sigma_t^2 I)``."""
        return self.mean_coeff(t), self.sigma(t)

    def perturb(
        self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample ``x_t = m_t x_0 + sigma_t eps``.

        Parameters
        ----------
        x0 : Tensor, shape (B, ...)
        t : Tensor, shape (B,)
        noise : Tensor, shape (B, ...), optional
            ``eps``; drawn from ``torch.randn_like`` when omitted.

        Returns
        -------
        x_t, eps : Tensor, shape (B, ...)
        """
        if noise is None:
            noise = torch.randn_like(x0)
        m, s = self.marginal(_bcast(t, x0))
        return m * x0 + s * noise, noise

    def prior_sample(
        self, shape: tuple[int, ...], generator: torch.Generator | None = None, **kw
    ) -> torch.Tensor:
        """Draw ``x_1`` from the prior ``N(0, sigma_1^2 I)`` (plus ``m_1 x_0 ~ 0``)."""
        s = float(self.sigma(torch.tensor(1.0, dtype=torch.float64)))
        return s * torch.randn(shape, generator=generator, **kw)


def _bcast(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape ``t`` (B,) to broadcast against ``x`` (B, ...)."""
    return t.reshape(t.shape + (1,) * (x.dim() - t.dim()))


@dataclass
class VPSDE(SDE):
    """Variance-preserving SDE, :math:`dx = -\\tfrac12\\beta(t)x\\,dt + \\sqrt{\\beta(t)}\\,dW`.

    :math:`\\beta(t) = \\beta_{min} + (\\beta_{max} - \\beta_{min})t`,
    :math:`\\log m_t = -\\tfrac12\\beta_{min}t - \\tfrac14(\\beta_{max}-\\beta_{min})t^2`,
    :math:`\\sigma_t^2 = 1 - m_t^2`. Defaults are ScoreMD's (0.1, 20).
    """

    beta_min: float = 0.1
    beta_max: float = 20.0

    def __post_init__(self) -> None:
        if not 0 <= self.beta_min < self.beta_max:
            raise ValueError(
                f"need 0 <= beta_min < beta_max, got beta_min={self.beta_min}, "
                f"beta_max={self.beta_max}"
            )

    def beta(self, t: torch.Tensor) -> torch.Tensor:
        """Noise rate :math:`\\beta(t)`."""
        return self.beta_min + (self.beta_max - self.beta_min) * t

    def log_mean_coeff(self, t):
        return -0.5 * self.beta_min * t - 0.25 * (self.beta_max - self.beta_min) * t**2

    def sigma(self, t):
        return (-torch.expm1(2.0 * self.log_mean_coeff(t))).clamp_min(0).sqrt()

    def drift_coeff(self, t):
        return -0.5 * self.beta(t)

    def g2(self, t):
        return self.beta(t)


@dataclass
class VESDE(SDE):
    """Variance-exploding SDE, :math:`dx = \\sqrt{d\\sigma^2/dt}\\,dW`.

    :math:`\\sigma_t = \\sigma_{min}(\\sigma_{max}/\\sigma_{min})^t`,
    :math:`g^2 = 2\\sigma_t^2\\log(\\sigma_{max}/\\sigma_{min})`, :math:`m_t = 1`. The
    transition variance is taken as :math:`\\sigma_t^2` (the usual approximation that
    neglects :math:`\\sigma_{min}^2`).
    """

    sigma_min: float = 0.01
    sigma_max: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.sigma_min < self.sigma_max:
            raise ValueError(
                f"need 0 < sigma_min < sigma_max, got {self.sigma_min}, {self.sigma_max}"
            )

    def log_mean_coeff(self, t):
        return torch.zeros_like(t)

    def sigma(self, t):
        return self.sigma_min * (self.sigma_max / self.sigma_min) ** t

    def drift_coeff(self, t):
        return torch.zeros_like(t)

    def g2(self, t):
        return 2.0 * self.sigma(t) ** 2 * math.log(self.sigma_max / self.sigma_min)


def time_features(t: torch.Tensor, t0: float = 0.0, t1: float = 1.0) -> torch.Tensor:
    """Time embedding of ScoreMD's MLPs.

    ``[t - (t1 - t0)/2, cos 2 pi t, sin 2 pi t, -cos 4 pi t]`` and, for a range other
    than ``[0, 1]``, the cos/sin/-cos features of ``t01 = (t - t0)/(t1 - t0)`` too.

    Parameters
    ----------
    t : Tensor, shape (B,)

    Returns
    -------
    Tensor, shape (B, 4) or (B, 7)
    """
    tau = 2 * math.pi * t
    feats = [t - (t1 - t0) / 2, torch.cos(tau), torch.sin(tau), -torch.cos(2 * tau)]
    if (t0, t1) != (0.0, 1.0):
        u = 2 * math.pi * (t - t0) / (t1 - t0)
        feats += [torch.cos(u), torch.sin(u), -torch.cos(2 * u)]
    return torch.stack(feats, dim=-1)


def n_time_features(t0: float = 0.0, t1: float = 1.0) -> int:
    """Width of :func:`time_features` for the range ``[t0, t1]``."""
    return 4 if (t0, t1) == (0.0, 1.0) else 7
