"""General MoE pieces MvCGE needs that the core lacks (to be moved into ``sci_moe.moe``).

Written as core code: generic names, no graph-specific assumptions.

* :func:`load_equilibrium_loss`: squared coefficient of variation of the expert
  importance, optionally per group of tokens (per view, per scale, per task).
* :func:`group_expert_usage`: per-group expert usage fractions and their entropy (the
  diagnostic of a router shared across views or scales).
* :func:`mmd2`: generalised (multi-kernel Gaussian) squared maximum mean discrepancy
  between two sample sets.
* :func:`pairwise_js_divergence`: mean Jensen-Shannon divergence between groups' expert
  usage (cross-view routing diagnostic).
* :func:`pairwise_discrepancy_loss`: minus the mean pairwise ``MMD^2`` between several
  embedding sets (a loss that keeps views / modalities apart).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sci_moe.moe import Routing, selection_scores

__all__ = [
    "group_expert_usage",
    "load_equilibrium_loss",
    "mmd2",
    "pairwise_discrepancy_loss",
    "pairwise_js_divergence",
]

_SOURCES = ("weights", "probs")


def _scores(routing: Routing, source: str) -> torch.Tensor:
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, got {source!r}")
    return selection_scores(routing) if source == "weights" else routing.probs


def _check_groups(groups: torch.Tensor | None, num_groups: int | None, T: int):
    if groups is None:
        return None, 1
    if groups.shape != (T,):
        raise ValueError(
            f"groups must have shape ({T},) (one id per token), got {tuple(groups.shape)}"
        )
    if groups.dtype.is_floating_point or groups.dtype == torch.bool:
        raise TypeError(f"groups must be an integer tensor, got {groups.dtype}")
    groups = groups.to(torch.long)
    if num_groups is None:
        num_groups = int(groups.max()) + 1 if T else 1
    if T and (int(groups.min()) < 0 or int(groups.max()) >= num_groups):
        raise ValueError(f"group ids must lie in [0, {num_groups}); pass a larger num_groups")
    return groups, num_groups


def load_equilibrium_loss(
    routing: Routing,
    groups: torch.Tensor | None = None,
    num_groups: int | None = None,
    source: str = "weights",
    eps: float = 1e-10,
) -> torch.Tensor:
    """Load-equilibrium loss: squared coefficient of variation of the expert importance.

    .. math::

        I^{(g)}_i = \\sum_{t \\in g} s_{ti}, \\qquad
        L_{le} = \\frac{1}{G}\\sum_{g=1}^{G}
            \\frac{\\mathrm{Var}_i\\big(I^{(g)}_i\\big)}
                 {\\big(\\mathrm{mean}_i I^{(g)}_i\\big)^2 + \\epsilon}

    (Shazeer et al. 2017, Eq. 6, "importance loss"; MvCGE, Wu et al. NeurIPS 2025, uses
    a load-equilibrium term of this kind so that every shared expert is used). ``s`` is
    the routing weight scattered into ``(T, E)`` (``source="weights"``: 0 for unselected
    experts, differentiable through the selected weights) or the full router score
    (``source="probs"``). ``Var`` is the population variance over the ``E`` experts.
    Uniform importance gives 0; all weight on one expert gives ``E - 1``. With ``groups``
    the loss is computed inside each group of tokens (e.g. the nodes or the pooled token
    of one view) and averaged over the groups, so every group must spread its load.
    Groups without tokens are skipped.

    Parameters
    ----------
    routing : Routing
        ``T`` tokens over ``E`` experts.
    groups : Tensor, shape (T,), integer, optional
        Group id of every token (default: one group).
    num_groups : int, optional
        ``G`` (default ``groups.max() + 1``).
    source : {"weights", "probs"}
    eps : float
        Added to the squared mean (guards empty or all-zero importance).

    Returns
    -------
    Tensor, scalar
    """
    s = _scores(routing, source)
    T, E = s.shape
    groups, G = _check_groups(groups, num_groups, T)
    if groups is None:
        importance = s.sum(0, keepdim=True)
        present = torch.ones(1, dtype=torch.bool, device=s.device)
    else:
        importance = s.new_zeros(G, E).index_add(0, groups, s)
        present = torch.bincount(groups, minlength=G) > 0
    mean = importance.mean(-1)
    var = importance.var(-1, unbiased=False)
    cv2 = var / (mean.square() + eps)
    if not bool(present.any()):
        return s.sum() * 0.0
    return cv2[present].mean()


def group_expert_usage(
    routing: Routing,
    groups: torch.Tensor | None = None,
    num_groups: int | None = None,
    weighted: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fraction of each group's kept assignments per expert, and its entropy.

    .. math::

        u_{gi} = \\frac{\\#\\{(t, j): t \\in g,\\ i_{tj} = i\\}}{\\#\\{(t, j): t \\in g\\}},
        \\qquad H_g = -\\sum_i u_{gi} \\log u_{gi}

    ``H_g`` is in nats, between 0 (one expert) and ``log E`` (uniform use). With
    ``weighted=True`` each assignment counts with its routing weight ``w_tj`` instead of 1
    (what matters when a group has few tokens, e.g. one pooled token per view).

    Parameters
    ----------
    routing : Routing
    groups : Tensor, shape (T,), integer, optional
        Group id of every token (default: one group).
    num_groups : int, optional
    weighted : bool

    Returns
    -------
    usage : Tensor, shape (G, E), float
        Rows of groups without kept assignments are 0.
    entropy : Tensor, shape (G,), float (nats)
    """
    T, E = routing.probs.shape
    groups, G = _check_groups(groups, num_groups, T)
    if groups is None:
        groups = torch.zeros(T, dtype=torch.long, device=routing.indices.device)
    kept = routing.kept
    k = routing.indices.shape[1]
    flat_g = groups.repeat_interleave(k)[kept.reshape(-1)]
    flat_e = routing.indices.reshape(-1)[kept.reshape(-1)]
    counts = torch.zeros(G * E, dtype=torch.float64, device=flat_e.device)
    if weighted:
        mass = routing.weights.detach().reshape(-1)[kept.reshape(-1)].to(torch.float64)
    else:
        mass = torch.ones_like(flat_e, dtype=torch.float64)
    counts.index_add_(0, flat_g * E + flat_e, mass)
    counts = counts.view(G, E)
    usage = counts / counts.sum(-1, keepdim=True).clamp_min(1.0)
    entropy = -(usage * usage.clamp_min(1e-300).log()).sum(-1)
    return usage.float(), entropy.float()


def pairwise_js_divergence(p: torch.Tensor) -> torch.Tensor:
    """Mean Jensen-Shannon divergence between the rows of ``p`` (nats).

    .. math::

        \\mathrm{JS}(p, q) = \\tfrac12 \\mathrm{KL}(p \\| m) + \\tfrac12 \\mathrm{KL}(q \\| m),
        \\quad m = \\tfrac12 (p + q); \\qquad
        \\overline{\\mathrm{JS}} = \\frac{2}{G(G-1)}\\sum_{g < h} \\mathrm{JS}(p_g, p_h)

    0 when every group uses the experts alike, at most ``log 2``: a cross-view / cross-scale
    routing diagnostic.

    Parameters
    ----------
    p : Tensor, shape (G, E)
        Distributions (rows summing to one, e.g. :func:`group_expert_usage`), ``G >= 2``.

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
