"""Multi-view contextual stochastic block model with a computable Bayes-optimal accuracy.

Every node ``i`` has a class ``y_i ~ Uniform{0..C-1}`` (i.i.d.) and Gaussian features
``x_i ~ N(mu_{y_i}, sigma^2 I)`` with ``mu_c = s e_c`` (``s`` = ``feature_signal``). View
``v`` assigns every class to a block, ``b_v(c)``, and draws each undirected edge
independently:

.. math::

    P(A^{(v)}_{ij} = 1) = \\begin{cases} p^{(v)}_{in} & b_v(y_i) = b_v(y_j) \\\\
                                      p^{(v)}_{out} & \\text{otherwise,} \\end{cases}
    \\qquad p^{(v)}_{in/out} = \\frac{\\bar d}{N}\\,(1 \\pm \\lambda_v)

with ``\\bar d`` the mean degree and ``\\lambda_v`` the view's contrast (0: noise,
> 0: assortative, < 0: disassortative). The default views separate {0,1}|{2,3},
{0,2}|{1,3} and nothing (MvCGE's setting, issue 19): the class is identifiable from the
graphs only by combining views 1 and 2.

**Bayes-optimal accuracy** (:func:`bayes_posterior`, :func:`bayes_optimal_accuracy`).
The joint posterior of all labels given the graphs is intractable, so the reference is the
*oracle-neighbour* Bayes classifier, which sees node ``i``'s features, all its edges and
the **true labels of every other node**. Its posterior is exact and factorises:

.. math::

    \\log P(y_i = c \\mid x_i, A, y_{-i}) = \\text{const}
        - \\frac{\\|x_i - \\mu_c\\|^2}{2\\sigma^2}
        + \\sum_v \\sum_{c'} \\Big[n^{(v)}_{ic'} \\log p_v(c, c')
        + \\big(m_{c'}^{(-i)} - n^{(v)}_{ic'}\\big) \\log\\big(1 - p_v(c, c')\\big)\\Big]

with ``n_{ic'}`` the neighbours of class ``c'`` of ``i`` in view ``v`` and
``m^{(-i)}_{c'}`` the other nodes of class ``c'``. Since any classifier of the real task
knows less, its accuracy is an **upper bound** (a ceiling) on what a node classifier can
reach on this graph. Its expectation ``E[max_c P(y_i = c | ...)]`` is estimated by the
mean over the evaluated nodes (a Monte Carlo average with the stated standard error; the
posterior itself is exact).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .io import MultiViewGraph

__all__ = [
    "BayesAccuracy",
    "MultiViewCSBMConfig",
    "bayes_optimal_accuracy",
    "bayes_posterior",
    "make_multiview_csbm",
]


@dataclass
class MultiViewCSBMConfig:
    """Parameters of the multi-view contextual SBM (see the module docstring).

    Parameters
    ----------
    num_nodes : int
        ``N``.
    num_classes : int
        ``C``.
    partitions : sequence of sequence of int
        ``partitions[v][c]`` = block of class ``c`` in view ``v``.
    contrast : sequence of float
        ``lambda_v`` in ``[-1, 1]`` per view.
    mean_degree : float
        ``\\bar d`` (the expected degree when a view's blocks hold equally many classes).
    feature_dim : int
        ``d >= C``.
    feature_signal : float
        ``s``: distance of each class mean from the origin (pairwise ``s sqrt 2``).
    feature_noise : float
        ``sigma``.
    train_fraction, val_fraction : float
        Random split of the nodes; the rest is the test set.
    """

    num_nodes: int = 2000
    num_classes: int = 4
    partitions: Sequence[Sequence[int]] = ((0, 0, 1, 1), (0, 1, 0, 1), (0, 0, 0, 0))
    contrast: Sequence[float] = (0.6, 0.6, 0.0)
    mean_degree: float = 10.0
    feature_dim: int = 8
    feature_signal: float = 1.0
    feature_noise: float = 1.0
    train_fraction: float = 0.2
    val_fraction: float = 0.2

    def __post_init__(self) -> None:
        self.partitions = tuple(tuple(int(b) for b in p) for p in self.partitions)
        self.contrast = tuple(float(c) for c in self.contrast)
        if self.num_classes < 2 or self.num_nodes < 2 * self.num_classes:
            raise ValueError(
                f"need num_classes >= 2 and num_nodes >= 2 * num_classes, got "
                f"{self.num_nodes} nodes, {self.num_classes} classes"
            )
        if not self.partitions:
            raise ValueError("give at least one view (partitions)")
        if len(self.contrast) != len(self.partitions):
            raise ValueError(
                f"{len(self.contrast)} contrasts for {len(self.partitions)} views; give one each"
            )
        for v, p in enumerate(self.partitions):
            if len(p) != self.num_classes:
                raise ValueError(f"partitions[{v}] must give a block for each of the C classes")
        for v, lam in enumerate(self.contrast):
            if not -1.0 <= lam <= 1.0:
                raise ValueError(f"contrast[{v}] = {lam} must lie in [-1, 1]")
        if self.mean_degree <= 0 or self.mean_degree * 2 > self.num_nodes:
            raise ValueError(f"mean_degree must be in (0, N/2], got {self.mean_degree}")
        if self.feature_dim < self.num_classes:
            raise ValueError(f"feature_dim must be >= num_classes = {self.num_classes}")
        if self.feature_noise <= 0:
            raise ValueError(f"feature_noise must be > 0, got {self.feature_noise}")
        if not (0 < self.train_fraction and 0 <= self.val_fraction) or (
            self.train_fraction + self.val_fraction >= 1
        ):
            raise ValueError("need 0 < train_fraction, 0 <= val_fraction, their sum < 1")

    @property
    def num_views(self) -> int:
        """``V``."""
        return len(self.partitions)

    def means(self) -> np.ndarray:
        """Class means ``mu``, shape ``(C, d)``."""
        mu = np.zeros((self.num_classes, self.feature_dim))
        mu[np.arange(self.num_classes), np.arange(self.num_classes)] = self.feature_signal
        return mu

    def edge_probabilities(self, v: int) -> np.ndarray:
        """``p_v(c, c')``, shape ``(C, C)``."""
        p = self.mean_degree / self.num_nodes
        lam = self.contrast[v]
        b = np.asarray(self.partitions[v])
        same = b[:, None] == b[None, :]
        return np.where(same, p * (1 + lam), p * (1 - lam))


def make_multiview_csbm(
    config: MultiViewCSBMConfig | None = None, seed: int = 0, **kwargs
) -> MultiViewGraph:
    """Draw a multi-view contextual SBM graph.

    Parameters
    ----------
    config : MultiViewCSBMConfig, optional
        Keyword arguments build one when omitted.
    seed : int
        Seed of the ``numpy`` generator that draws labels, features, edges and split.

    Returns
    -------
    MultiViewGraph
        Undirected views (both directions), shared features, labels and masks; the
        config is kept in ``graph.meta["csbm"]``.

    Examples
    --------
    >>> g = make_multiview_csbm(num_nodes=40, mean_degree=4, seed=1)
    >>> g.num_views, g.num_nodes, g.num_classes
    (3, 40, 4)
    """
    if config is None:
        config = MultiViewCSBMConfig(**kwargs)
    elif kwargs:
        raise TypeError("pass either a MultiViewCSBMConfig or keyword arguments, not both")
    c = config
    rng = np.random.default_rng(seed)
    N, C = c.num_nodes, c.num_classes
    y = rng.integers(0, C, size=N)
    x = c.means()[y] + c.feature_noise * rng.standard_normal((N, c.feature_dim))
    edges = []
    for v in range(c.num_views):
        P = c.edge_probabilities(v)
        rows, cols = [], []
        chunk = max(1, 2_000_000 // N)
        for start in range(0, N, chunk):
            stop = min(N, start + chunk)
            draw = rng.random((stop - start, N)) < P[y[start:stop]][:, y]
            upper = np.arange(N)[None, :] > np.arange(start, stop)[:, None]
            r, col = np.nonzero(draw & upper)
            rows.append(r + start)
            cols.append(col)
        r, col = np.concatenate(rows), np.concatenate(cols)
        e = np.stack([np.concatenate([r, col]), np.concatenate([col, r])])
        edges.append(torch.as_tensor(e, dtype=torch.long))
    perm = rng.permutation(N)
    n_tr, n_va = round(c.train_fraction * N), round(c.val_fraction * N)
    masks = [np.zeros(N, dtype=bool) for _ in range(3)]
    masks[0][perm[:n_tr]] = True
    masks[1][perm[n_tr : n_tr + n_va]] = True
    masks[2][perm[n_tr + n_va :]] = True
    return MultiViewGraph(
        torch.as_tensor(x, dtype=torch.get_default_dtype()),
        edges,
        torch.as_tensor(y),
        *(torch.as_tensor(m) for m in masks),
        view_names=[f"view{v}" for v in range(c.num_views)],
        allow_empty_views=True,
        meta={"csbm": c, "seed": seed},
    )


def _config_of(graph: MultiViewGraph, config):
    config = graph.meta.get("csbm") if config is None else config
    if config is None:
        raise ValueError("graph was not made by make_multiview_csbm; pass its config")
    if graph.y is None:
        raise ValueError("the Bayes posterior needs the true labels graph.y")
    return config


def bayes_posterior(
    graph: MultiViewGraph,
    config: MultiViewCSBMConfig | None = None,
    views: Sequence[int] | None = None,
    use_features: bool = True,
) -> np.ndarray:
    """Exact oracle-neighbour posterior ``P(y_i = c | x_i, A, y_{-i})`` of every node.

    Parameters
    ----------
    graph : MultiViewGraph
        Drawn by :func:`make_multiview_csbm` (or with the same model and ``config``).
    config : MultiViewCSBMConfig, optional
        Default ``graph.meta["csbm"]``.
    views : sequence of int, optional
        Views the classifier may use (default all; ``()`` for features only).
    use_features : bool
        Include the feature likelihood.

    Returns
    -------
    ndarray, shape (N, C), float64
        Rows sum to one.
    """
    c = _config_of(graph, config)
    views = range(c.num_views) if views is None else list(views)
    y = graph.y.cpu().numpy()
    N, C = y.shape[0], c.num_classes
    onehot = np.eye(C)[y]
    logp = np.zeros((N, C))
    if use_features:
        x = graph.features()[0].detach().cpu().double().numpy()
        d2 = ((x[:, None, :] - c.means()[None]) ** 2).sum(-1)
        logp -= d2 / (2 * c.feature_noise**2)
    others = onehot.sum(0)[None, :] - onehot  # (N, C): other nodes of each class
    for v in views:
        P = c.edge_probabilities(v)
        e = graph.edge_indices[v].cpu().numpy()
        n = np.zeros((N, C))
        np.add.at(n, e[1], onehot[e[0]])  # neighbours of each class (both directions stored)
        logp += n @ np.log(P).T + (others - n) @ np.log1p(-P).T
    logp -= logp.max(1, keepdims=True)
    post = np.exp(logp)
    return post / post.sum(1, keepdims=True)


@dataclass
class BayesAccuracy:
    """Oracle-neighbour Bayes accuracy on a set of nodes.

    Attributes
    ----------
    expected : float
        Mean of ``max_c P(y_i = c | ...)``: the Bayes classifier's expected accuracy.
    stderr : float
        Standard error of ``expected`` over the nodes.
    realised : float
        Fraction of nodes whose posterior argmax is the true label.
    num_nodes : int
    """

    expected: float
    stderr: float
    realised: float
    num_nodes: int


def bayes_optimal_accuracy(
    graph: MultiViewGraph,
    config: MultiViewCSBMConfig | None = None,
    mask: torch.Tensor | np.ndarray | None = None,
    views: Sequence[int] | None = None,
    use_features: bool = True,
) -> BayesAccuracy:
    """Oracle-neighbour Bayes-optimal accuracy (an upper bound for any node classifier).

    Parameters
    ----------
    graph, config, views, use_features
        As :func:`bayes_posterior`.
    mask : Tensor, shape (N,), bool, optional
        Nodes to evaluate (default ``graph.test_mask``, else all).

    Returns
    -------
    BayesAccuracy
    """
    post = bayes_posterior(graph, config, views, use_features)
    if mask is None:
        mask = graph.test_mask
    sel = np.ones(post.shape[0], bool) if mask is None else np.asarray(mask, dtype=bool)
    if not sel.any():
        raise ValueError("mask selects no nodes")
    best = post[sel].max(1)
    y = graph.y.cpu().numpy()[sel]
    n = int(sel.sum())
    stderr = float(best.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return BayesAccuracy(float(best.mean()), stderr, float((post[sel].argmax(1) == y).mean()), n)
