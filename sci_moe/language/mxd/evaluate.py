"""Faithfulness by splicing: next-token loss with one MLP replaced.

The MxD paper's faithfulness metric: run the pretrained model with one MLP replaced by
its sparse decomposition and measure the next-token cross-entropy, next to the original
model's and to a **mean ablation** (the MLP replaced by its mean output over training
tokens, which removes everything the MLP computes per token). The closer a
decomposition's loss is to the original's, the more of the MLP's function it keeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .sites import MLPSite, splice

__all__ = [
    "MeanAblation",
    "RescaledDecomposition",
    "SpliceReport",
    "activation_rms",
    "next_token_ce",
    "splice_report",
]


class MeanAblation(nn.Module):
    """A constant map: every token gets the MLP's mean output.

    Parameters
    ----------
    mean : Tensor, shape (d_model,)
        Mean MLP output over training tokens.
    """

    def __init__(self, mean: torch.Tensor) -> None:
        super().__init__()
        if mean.ndim != 1:
            raise ValueError(f"mean must have shape (d_model,), got {tuple(mean.shape)}")
        self.register_buffer("mean", mean.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The mean output broadcast to ``x``'s leading shape: ``(..., d_model)``."""
        return self.mean.to(x.dtype).expand(*x.shape[:-1], -1)


@torch.no_grad()
def activation_rms(t: torch.Tensor, rows: int = 1 << 16) -> float:
    """Root mean square of all entries of an activation matrix.

    Sums in float64 over chunks of ``rows`` rows, so float16 caches of millions of tokens
    neither overflow nor need a float32 copy.

    Parameters
    ----------
    t : Tensor, shape (tokens, d)
        Activations (any float dtype).
    rows : int
        Rows per chunk.

    Returns
    -------
    float
        ``sqrt(mean(t ** 2))``.
    """
    if t.ndim != 2 or t.numel() == 0:
        raise ValueError(f"t must be a non-empty (tokens, d) matrix, got shape {tuple(t.shape)}")
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    total = 0.0
    for b in range(0, t.shape[0], rows):
        total += float(t[b : b + rows].double().pow(2).sum())
    return math.sqrt(total / t.numel())


class RescaledDecomposition(nn.Module):
    """A decomposition trained on rescaled activations, as a map of the raw ones.

    Pretrained MLPs can write *massive activations* (SmolLM2-135M's layer-2 MLP: output
    norms of 500-900 on a few percent of tokens against about 20 elsewhere), which Adam's
    small steps cannot reach from a standard initialisation. Training on
    ``x / s_x -> y / s_y`` (``s`` the activations' :func:`activation_rms`) removes that
    scale; this module maps raw inputs to raw outputs, ``y = s_y * inner(x / s_x).y``, for
    :func:`~sci_moe.language.mxd.splice`.

    Parameters
    ----------
    inner : nn.Module
        A decomposition returning a :class:`~sci_moe.language.mxd.DecompositionOutput`.
    s_x, s_y : float
        Positive input and output scales.
    """

    def __init__(self, inner: nn.Module, s_x: float, s_y: float) -> None:
        super().__init__()
        for name, s in (("s_x", s_x), ("s_y", s_y)):
            if not (math.isfinite(s) and s > 0):
                raise ValueError(f"{name} must be a finite positive scale, got {s}")
        self.inner, self.s_x, self.s_y = inner, float(s_x), float(s_y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` of shape ``(..., d_in)`` -> the raw-scale output ``(..., d_out)``."""
        return self.inner(x / self.s_x).y * self.s_y


@torch.no_grad()
def next_token_ce(model: nn.Module, ids: torch.Tensor, batch_size: int = 8) -> float:
    """Mean next-token cross-entropy (nats/token) of a causal LM over windows.

    Parameters
    ----------
    model : nn.Module
        A causal LM returning ``.logits`` of shape ``(batch, seq, vocab)``.
    ids : Tensor, int64, shape (n_windows, context_len)
        Each window predicts its tokens ``1..context_len - 1`` from the preceding ones.
    batch_size : int

    Returns
    -------
    float
        Cross-entropy averaged over all ``n_windows * (context_len - 1)`` predictions.
    """
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(
            f"ids must have shape (n_windows, context_len >= 2), got {tuple(ids.shape)}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    total, count = 0.0, 0
    was = model.training
    model.eval()
    device = next(iter(model.parameters())).device
    try:
        for b in range(0, ids.shape[0], batch_size):
            chunk = ids[b : b + batch_size].to(device)
            logits = model(input_ids=chunk).logits[:, :-1].float()
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1), reduction="sum"
            )
            total += float(loss)
            count += chunk[:, 1:].numel()
    finally:
        model.train(was)
    return total / count


@dataclass(frozen=True)
class SpliceReport:
    """Next-token losses (nats/token) with one MLP replaced.

    Attributes
    ----------
    original : float
        The unmodified model.
    mean_ablation : float
        The MLP replaced by its mean output.
    spliced : dict of str to float
        One entry per replacement.
    """

    original: float
    mean_ablation: float
    spliced: dict

    def increase(self, name: str) -> float:
        """``spliced[name] - original`` (the loss a decomposition adds)."""
        return self.spliced[name] - self.original

    def recovered(self, name: str) -> float:
        """Fraction of the mean-ablation loss increase recovered,
        ``(mean_ablation - spliced) / (mean_ablation - original)`` (1 = faithful)."""
        return (self.mean_ablation - self.spliced[name]) / (self.mean_ablation - self.original)


def splice_report(
    model: nn.Module,
    site: MLPSite,
    replacements: Mapping[str, Callable[[torch.Tensor], torch.Tensor]],
    ids: torch.Tensor,
    mean_output: torch.Tensor,
    batch_size: int = 8,
) -> SpliceReport:
    """Cross-entropy of the original model, a mean ablation and every replacement.

    Parameters
    ----------
    model : nn.Module
        A causal LM (``LlamaForCausalLM``).
    site : MLPSite
        The MLP to replace (:func:`~sci_moe.language.mxd.mlp_site`).
    replacements : mapping of str to callable
        ``(tokens, d_model) -> (tokens, d_model)`` maps, e.g. trained decompositions.
    ids : Tensor, int64, shape (n_windows, context_len)
        Evaluation windows (held-out documents).
    mean_output : Tensor, shape (d_model,)
        The MLP's mean output over training tokens.
    batch_size : int

    Returns
    -------
    SpliceReport
    """
    original = next_token_ce(model, ids, batch_size)
    with splice(site, MeanAblation(mean_output)):
        ablated = next_token_ce(model, ids, batch_size)
    spliced = {}
    for name, rep in replacements.items():
        if isinstance(rep, nn.Module):
            was = rep.training
            rep.eval()
        with splice(site, rep):
            spliced[name] = next_token_ce(model, ids, batch_size)
        if isinstance(rep, nn.Module):
            rep.train(was)
    return SpliceReport(original, ablated, spliced)
