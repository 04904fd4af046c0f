"""Level weights of simulated tempering: Park-Pande thermodynamic integration and online
SAMS / Wang-Landau adaptation, shared by the batched samplers (:mod:`.tempering`) and the
OpenMM bridge (:mod:`.openmm_sampler`).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["OnlineWeights", "check_weight_adaptation", "park_pande_weights", "resolve_weight_mode"]


def park_pande_weights(betas: Tensor, mean_log_prob: Tensor) -> Tensor:
    """Park-Pande weights by trapezoidal thermodynamic integration.

    Since :math:`d\\log Z_\\beta/d\\beta = \\langle\\log p\\rangle_\\beta`,

    .. math:: \\log Z_{l+1} - \\log Z_l \\approx (\\beta_{l+1}-\\beta_l)
              \\tfrac12(\\langle\\log p\\rangle_l + \\langle\\log p\\rangle_{l+1}),

    and ``g = -log Z`` with ``g[-1] = 0``.

    Parameters
    ----------
    betas : Tensor, shape (L,)
    mean_log_prob : Tensor, shape (L,)
        :math:`\\langle\\log p\\rangle` at each level.

    Returns
    -------
    Tensor, shape (L,)
    """
    if betas.shape != mean_log_prob.shape or betas.ndim != 1:
        raise ValueError("betas and mean_log_prob must be 1-D tensors of the same shape")
    inc = (betas[1:] - betas[:-1]) * 0.5 * (mean_log_prob[1:] + mean_log_prob[:-1])
    log_z = torch.cat([torch.zeros(1, dtype=inc.dtype), torch.cumsum(inc, 0)])
    return -(log_z - log_z[-1])


def check_weight_adaptation(
    gain0: float, gain_exponent: float, flatness: float, n_pilot_steps: int
) -> None:
    """Validate the level-weight adaptation settings shared by every tempering config.

    Raises
    ------
    ValueError
        If ``gain0 <= 0``, ``gain_exponent`` is outside (0.5, 1] (SAMS needs a
        Robbins-Monro gain), ``flatness`` is outside (0, 1) or ``n_pilot_steps < 2``.
    """
    if not gain0 > 0:
        raise ValueError(f"gain0 must be positive, got {gain0}")
    if not 0.5 < gain_exponent <= 1:
        raise ValueError(f"gain_exponent must lie in (0.5, 1], got {gain_exponent}")
    if not 0 < flatness < 1:
        raise ValueError(f"flatness must lie in (0, 1), got {flatness}")
    if n_pilot_steps < 2:
        raise ValueError(f"n_pilot_steps must be >= 2, got {n_pilot_steps}")


def resolve_weight_mode(weights: str | None, log_weights, modes: tuple[str, ...]) -> str:
    """The level-weight mode of a tempering config.

    ``None`` means ``"given"`` when ``log_weights`` are given, ``"sams"`` otherwise.

    Raises
    ------
    ValueError
        If the mode is not one of ``modes``, or is ``"given"`` without ``log_weights``.
    """
    if weights is None:
        weights = "sams" if log_weights is None else "given"
    if weights not in modes:
        raise ValueError(f"weights must be one of {modes}, got {weights!r}")
    if weights == "given" and log_weights is None:
        raise ValueError("weights='given' needs log_weights (g_l = -log Z_l), or pick 'sams'")
    return weights


class OnlineWeights:
    """SAMS / Wang-Landau adaptation of the level weights ``g`` (one update per iteration).

    With Rao-Blackwellised level probabilities :math:`\\bar p_l` (averaged over chains),
    :math:`g \\leftarrow g - \\gamma_t L \\bar p` and ``g[-1] = 0``. SAMS (Tan 2017): stage 0
    gain :math:`\\gamma_0\\min(1/L, t^{-\\beta_0})` until the accumulated histogram of
    :math:`\\bar p` is flat, then :math:`\\gamma_0\\min(1/L, (t - t_0 + t_0^{\\beta_0})^{-1})`.
    Wang-Landau: gain :math:`\\gamma_0`, halved (histogram reset) each time it is flat, and
    :math:`\\gamma_0/t` once that is larger. Shared by :class:`SimulatedTempering` and the
    OpenMM bridge (:mod:`.openmm_sampler`).

    Parameters
    ----------
    mode : {"sams", "wang-landau"}
    n_levels : int
    gain0, gain_exponent, flatness : float
        As in :class:`TemperingConfig`.
    """

    def __init__(
        self, mode: str, n_levels: int, gain0: float, gain_exponent: float, flatness: float
    ) -> None:
        if mode not in ("sams", "wang-landau"):
            raise ValueError(f"mode must be 'sams' or 'wang-landau', got {mode!r}")
        self.mode, self.n_levels = mode, n_levels
        self.gain0, self.gain_exponent, self.flatness = gain0, gain_exponent, flatness
        self.stage, self.t_stage, self.gamma = 0, 0, gain0
        self.hist = None

    def update(self, g, p, t: int):
        """New weights after iteration ``t >= 1`` with level probabilities ``p`` (shape (L,)).

        ``g`` and ``p`` are torch tensors or numpy arrays (the result has their type).
        """
        L = self.n_levels
        self.hist = p * 1.0 if self.hist is None else self.hist + p
        if self.mode == "sams":
            pi_min = 1.0 / L
            if self.stage == 0:
                self.gamma = self.gain0 * min(pi_min, t**-self.gain_exponent)
            else:
                ts = self.t_stage
                self.gamma = self.gain0 * min(pi_min, 1.0 / (t - ts + ts**self.gain_exponent))
        elif self.stage == 1:
            self.gamma = self.gain0 / t
        g = g - self.gamma * p * L
        g = g - g[-1]
        hist = self.hist
        if self.stage == 0 and float(hist.min()) >= (1 - self.flatness) * float(hist.sum()) / L:
            if self.mode == "sams":
                self.stage, self.t_stage = 1, t
            else:
                self.gamma *= 0.5
                self.hist = hist * 0.0
                if self.gamma < self.gain0 / t:
                    self.stage = 1
        return g
