"""Discrepancy between sample sets: the (multi-kernel Gaussian) squared MMD and a loss.

:func:`mmd2` measures how far two sets of embeddings are apart as distributions;
:func:`pairwise_discrepancy_loss` turns it into a loss that keeps ``V`` sets (views,
modalities, experts' outputs) apart, as MvCGE's graph-discrepancy term (Wu et al.,
NeurIPS 2025). :func:`pairwise_js_divergence` compares distributions (rows of a matrix,
e.g. how groups of tokens use the experts) by their mean Jensen-Shannon divergence.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["mmd2", "pairwise_discrepancy_loss", "pairwise_js_divergence"]


def _bandwidths(bandwidths, x, y) -> torch.Tensor:
    if bandwidths is None:
        # median heuristic on the pooled sample (constant w.r.t. the inputs)
        z = torch.cat([x, y]).detach()
        sq = z.square().sum(-1)
        d2 = (sq[:, None] + sq[None, :] - 2.0 * (z @ z.T)).clamp_min(0)
        med = d2[d2 > 0].median() if bool((d2 > 0).any()) else d2.new_tensor(1.0)
        return med * d2.new_tensor([0.25, 0.5, 1.0, 2.0, 4.0])
    bw = torch.as_tensor(bandwidths, dtype=x.dtype, device=x.device).reshape(-1)
    if bw.numel() == 0 or bool((bw <= 0).any()):
        raise ValueError(f"bandwidths must be positive numbers, got {bw.tolist()}")
    return bw


def _kernel(a: torch.Tensor, b: torch.Tensor, bw: torch.Tensor) -> torch.Tensor:
    # squared distances by the Gram expansion (one matmul), clamped at 0 against round-off
    d2 = (a.square().sum(-1)[:, None] + b.square().sum(-1)[None, :] - 2.0 * (a @ b.T)).clamp_min(0)
    bw = bw.to(d2.dtype)
    return sum(torch.exp(-d2 / bw[i]) for i in range(bw.numel())) / bw.numel()


def mmd2(
    x: torch.Tensor,
    y: torch.Tensor,
    bandwidths: Sequence[float] | torch.Tensor | None = None,
    unbiased: bool = False,
) -> torch.Tensor:
    """Generalised squared maximum mean discrepancy with a mixture of Gaussian kernels.

    .. math::

        k(a, b) = \\frac{1}{B}\\sum_{b=1}^{B} \\exp\\!\\big(-\\|a - b\\|^2 / \\sigma_b^2\\big),
        \\qquad
        \\mathrm{MMD}^2 = \\overline{k(x, x')} + \\overline{k(y, y')} - 2\\,\\overline{k(x, y)}

    (Gretton et al. 2012). The biased V-statistic averages over all pairs, diagonals
    included (always >= 0, at most 2); ``unbiased=True`` drops the diagonals of the
    within-sample terms (the U-statistic; can be slightly negative).

    Parameters
    ----------
    x : Tensor, shape (n, d)
    y : Tensor, shape (m, d)
    bandwidths : sequence of float, optional
        The ``sigma_b^2`` (squared-distance units). Default: the median squared pairwise
        distance of the pooled sample times (1/4, 1/2, 1, 2, 4), detached.
    unbiased : bool

    Returns
    -------
    Tensor, scalar
    """
    if x.dim() != 2 or y.dim() != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(
            f"x and y must be (n, d) and (m, d) with the same d; got {tuple(x.shape)} and "
            f"{tuple(y.shape)}"
        )
    n, m = x.shape[0], y.shape[0]
    if n < 1 + unbiased or m < 1 + unbiased:
        raise ValueError(f"need at least {1 + unbiased} samples per set, got {n} and {m}")
    bw = _bandwidths(bandwidths, x, y)
    kxx, kyy, kxy = _kernel(x, x, bw), _kernel(y, y, bw), _kernel(x, y, bw)
    if unbiased:
        txx = (kxx.sum() - kxx.diagonal().sum()) / (n * (n - 1))
        tyy = (kyy.sum() - kyy.diagonal().sum()) / (m * (m - 1))
    else:
        txx, tyy = kxx.mean(), kyy.mean()
    return txx + tyy - 2.0 * kxy.mean()


def pairwise_discrepancy_loss(
    embeddings: Sequence[torch.Tensor] | torch.Tensor,
    bandwidths: Sequence[float] | torch.Tensor | None = None,
    unbiased: bool = False,
) -> torch.Tensor:
    """Minus the mean pairwise ``MMD^2`` between ``V`` embedding sets.

    .. math:: L_{gd} = -\\frac{2}{V(V-1)}\\sum_{v < u} \\mathrm{MMD}^2(H_v, H_u)

    Minimising it pushes the sets apart (MvCGE's graph-discrepancy loss, reconstructed:
    views keep complementary information). It is bounded below by -2 for the biased
    statistic. The bandwidths, when not given, follow the median heuristic of
    :func:`mmd2` computed for each pair.

    Parameters
    ----------
    embeddings : sequence of Tensor of shape (n_v, d), or Tensor of shape (V, n, d)
        At least two sets.
    bandwidths : sequence of float, optional
    unbiased : bool

    Returns
    -------
    Tensor, scalar
    """
    sets = list(embeddings)
    V = len(sets)
    if V < 2:
        raise ValueError(f"need at least two embedding sets for a discrepancy, got {V}")
    total = sets[0].new_zeros(())
    for v in range(V):
        for u in range(v + 1, V):
            total = total + mmd2(sets[v], sets[u], bandwidths, unbiased)
    return -total * (2.0 / (V * (V - 1)))


def pairwise_js_divergence(p: torch.Tensor) -> torch.Tensor:
    """Mean Jensen-Shannon divergence between the rows of ``p`` (nats).

    .. math::

        \\mathrm{JS}(p, q) = \\tfrac12 \\mathrm{KL}(p \\| m) + \\tfrac12 \\mathrm{KL}(q \\| m),
        \\quad m = \\tfrac12 (p + q); \\qquad
        \\overline{\\mathrm{JS}} = \\frac{2}{G(G-1)}\\sum_{g < h} \\mathrm{JS}(p_g, p_h)

    0 when every group uses the experts alike, at most ``log 2``: a cross-view /
    cross-scale routing diagnostic.

    Parameters
    ----------
    p : Tensor, shape (G, E)
        Distributions (rows summing to one, e.g.
        :func:`sci_moe.moe.group_expert_usage`), ``G >= 2``.

    Returns
    -------
    Tensor, scalar
    """
    if p.dim() != 2 or p.shape[0] < 2:
        raise ValueError(f"p must have shape (G, E) with G >= 2, got {tuple(p.shape)}")
    a, b = p.unsqueeze(1), p.unsqueeze(0)
    m = 0.5 * (a + b)

    def kl(x, y):
        return torch.where(x > 0, x * (x.clamp_min(1e-300).log() - y.clamp_min(1e-300).log()), 0.0)

    js = 0.5 * (kl(a, m) + kl(b, m)).sum(-1)
    G = p.shape[0]
    iu = torch.triu_indices(G, G, 1)
    return js[iu[0], iu[1]].mean()
