"""Scatter reductions over the first dimension (graphs, ensembles, expert outputs)."""

from __future__ import annotations

import torch

__all__ = ["scatter_mean", "scatter_sum"]


def scatter_sum(src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """Sum rows of ``src`` into ``size`` slots: ``out[index[r]] += src[r]``.

    Parameters
    ----------
    src : Tensor, shape (R, ...)
    index : Tensor, shape (R,), int64
    size : int

    Returns
    -------
    Tensor, shape (size, ...)
    """
    out = src.new_zeros((size, *src.shape[1:]))
    return out.index_add_(0, index, src)


def scatter_mean(src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """Mean of the rows of ``src`` per slot of ``index`` (0 for empty slots).

    Parameters
    ----------
    src : Tensor, shape (R, ...)
    index : Tensor, shape (R,), int64
    size : int

    Returns
    -------
    Tensor, shape (size, ...)
    """
    total = scatter_sum(src, index, size)
    count = torch.bincount(index, minlength=size).clamp_min(1).to(src.dtype)
    return total / count.view(-1, *([1] * (src.dim() - 1)))
