"""Continuous attention over time (by quadrature) and cross-attention across functions."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ContinuousAttention", "FunctionCrossAttention", "trapezoid_weights"]


def trapezoid_weights(grid: torch.Tensor) -> torch.Tensor:
    """Trapezoid-rule weights ``w`` with ``sum_q w_q g(tau_q) ~ int g(tau) d tau``.

    Parameters
    ----------
    grid : Tensor, shape (Q,)
        Increasing quadrature nodes, ``Q >= 2``.

    Returns
    -------
    Tensor, shape (Q,)
    """
    d = grid.diff()
    w = torch.zeros_like(grid)
    w[:-1] += d / 2
    w[1:] += d / 2
    return w


class ContinuousAttention(nn.Module):
    """Attention over a continuous time axis, discretised by quadrature.

    .. math::
        \\hat Z(t) = \\int \\frac{\\exp(q(t)\\cdot k(\\tau)/\\sqrt d)}
        {\\int \\exp(q(t)\\cdot k(\\sigma)/\\sqrt d)\\, d\\sigma}\\, v(\\tau)\\, d\\tau
        \\approx \\sum_q \\mathrm{softmax}_q\\big(q(t)\\cdot k(\\tau_q)/\\sqrt d
        + \\log w_q\\big)\\, v(\\tau_q)

    with ``q, k, v`` linear maps of ``Z`` and ``w`` the trapezoid weights (so the
    result does not depend on how the nodes are spaced, only on the integral). The
    output adds a linear skip ``W_o Z(t)``.

    Parameters
    ----------
    d_in : int
    d : int
        Attention width.
    """

    def __init__(self, d_in: int, d: int) -> None:
        super().__init__()
        self.d = d
        self.qkv = nn.Linear(d_in, 3 * d)
        self.skip = nn.Linear(d_in, d)

    def forward(self, z: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        """Attend over the node axis.

        Parameters
        ----------
        z : Tensor, shape (..., Q, d_in)
        grid : Tensor, shape (Q,)

        Returns
        -------
        Tensor, shape (..., Q, d)
        """
        q, k, v = self.qkv(z).chunk(3, dim=-1)
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.d)
        logits = logits + trapezoid_weights(grid).to(logits.dtype).log()
        return logits.softmax(-1) @ v + self.skip(z)


class FunctionCrossAttention(nn.Module):
    """Cross-attention across the ``J`` input functions at every time, then a mean.

    .. math::
        C_j(t) = \\sum_{j'} \\mathrm{softmax}_{j'}\\big(q_j(t)\\cdot k_{j'}(t)/\\sqrt d\\big)
        v_{j'}(t) + H_j(t), \\qquad G(t) = \\frac1J \\sum_j C_j(t)

    Parameters
    ----------
    d : int
    """

    def __init__(self, d: int) -> None:
        super().__init__()
        self.d = d
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Mix functions.

        Parameters
        ----------
        h : Tensor, shape (B, J, Q, d)

        Returns
        -------
        Tensor, shape (B, Q, d)
        """
        x = h.transpose(1, 2)  # (B, Q, J, d)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = (q @ k.transpose(-1, -2) / math.sqrt(self.d)).softmax(-1)
        return (att @ v + x).mean(2)
