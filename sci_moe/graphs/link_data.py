"""Link-prediction graphs with a known ground truth, and real graphs in the same format.

A generated multi-domain collection (the offline stand-in for AnyGraph's 38 data sets):
four families with known link models, varied sizes and feature dimensions, held-out
edges on every graph and wholly unseen graphs for zero-shot tests.

===============  ==========================================  ==========================
family           link model                                   node features
===============  ==========================================  ==========================
``"sbm"``        SBM, ``P_ij = B[c_i, c_j]``, homophily h      block mean + noise
``"geometric"``  soft random geometric (latent distance),      ``tanh`` of a random map of
                 ``P_ij = σ((r - |z_i - z_j|)/s)``              the latent position + noise
``"ba"``         Barabási–Albert preferential attachment      pure noise
``"ws"``         Watts–Strogatz ring + rewiring                ring angle map + noise
===============  ==========================================  ==========================

:data:`SPECIALISED_FAMILIES` (issue 45) are families whose link rules pull an
inner-product expert ``⟨f(z_u), f(z_v)⟩`` on AnyGraph's SVD-unified, propagated input in
opposite directions, so that one expert per family has to specialise; each has a known
``P_ij`` (:func:`link_probability`):

* ``"heterophily"``: links join nearby nodes of a hidden plane ``h`` *across* two blocks
  (``P_ij = σ((r - |h_i - h_j|)/s) (1 ∓ ρ)``); the block is the loudest feature (the SVD's
  top column) and anti-predictive, ``h`` is quiet: the expert must silence the top column
  and amplify the next ones;
* ``"heterophily_quiet"``: the same links, the block quiet and ``h`` loud: the expert must
  keep the top columns and silence a lower one;
* ``"feature_group1"`` / ``"feature_group4"``: links follow distance in a hidden Gaussian
  space that only one of four feature groups (scales 256, 16, 1, 1/16) shows -- the
  loudest (keep the top columns) or the quietest (silence the top, amplify the bottom).

A heterophilous rule alone (``"disassortative"``) cannot be learned by a symmetric inner
product of block embeddings (the Gram matrix is positive semi-definite, so a cross-block
score cannot exceed both within-block scores); the heterophily families above therefore
pair the anti-predictive block with a homophilous hidden plane. Further families with known
``P_ij``: ``"assortative"``, ``"disassortative"`` (SBMs, 2-4 blocks, homophily 0.8-0.95 /
0-0.1), ``"chung_lu"`` (``P_ij = min(1, w_i w_j / Σw)``, Pareto weights: degree-driven) and
``"feature_group2"``, ``"feature_group3"``; on the propagated input their experts hardly
differ (every expert fits them about equally), so they are not in the specialised set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

from ._link_generators import _GENERATORS

__all__ = [
    "ALL_FAMILIES",
    "FAMILIES",
    "SPECIALISED_FAMILIES",
    "GraphCollection",
    "karate_club",
    "link_probability",
    "link_split",
    "load_pyg_dataset",
    "make_graph_collection",
    "make_link_graph",
]

FAMILIES = ("sbm", "geometric", "ba", "ws")
#: Families whose link rules differ so that one shared inner-product expert cannot fit
#: them all at once (issue 45; see the module docstring); every one with a known ``P_ij``.
SPECIALISED_FAMILIES = ("heterophily", "heterophily_quiet", "feature_group1", "feature_group4")
ALL_FAMILIES = (
    *FAMILIES,
    "assortative",
    "disassortative",
    "chung_lu",
    "heterophily",
    "heterophily_quiet",
    *(f"feature_group{g}" for g in range(1, 5)),
)


def link_split(data: Data, held_out: float = 0.15, seed: int = 0, name: str | None = None) -> Data:
    """Hold out a fraction of the edges of a graph for link prediction.

    Parameters
    ----------
    data : Data
        ``edge_index`` of shape ``(2, M)`` (directed or both directions; self-loops and
        duplicates dropped), optional ``x`` of shape ``(n, f)`` (``f = 0`` or no ``x``:
        the model then uses the structure only).
    held_out : float
        Fraction of undirected edges moved to ``test_edge_index``, in ``(0, 1)``.
    seed : int
        For the split and the sampled test non-edges.
    name : str, optional

    Returns
    -------
    Data
        A new graph: ``x``, ``edge_index`` (training edges, both directions),
        ``test_edge_index`` and ``test_neg_edge_index`` (``(2, m)``, ``u < v``), ``name``;
        other attributes of ``data`` are copied. Isolated nodes are allowed (they get a
        self-loop in propagation).

    Raises
    ------
    ValueError
        If the graph has fewer than 2 undirected edges or fewer than 2 nodes.
    """
    if not 0.0 < held_out < 1.0:
        raise ValueError(f"held_out must lie in (0, 1), got {held_out}")
    n = int(data.num_nodes)
    ei = data.edge_index
    if ei is None or ei.dim() != 2 or ei.shape[0] != 2:
        raise ValueError("data.edge_index must have shape (2, M); link prediction needs edges")
    ei = ei.long()
    u, v = torch.minimum(ei[0], ei[1]), torch.maximum(ei[0], ei[1])
    keep = u != v
    pairs = torch.unique(torch.stack([u[keep], v[keep]]), dim=1)
    M = pairs.shape[1]
    if n < 2 or M < 2:
        raise ValueError(
            f"graph has {n} nodes and {M} undirected edges; link prediction needs at least 2 "
            "edges (a graph with no edges has nothing to hold out)"
        )
    rng = np.random.default_rng(seed)
    m = min(M - 1, max(1, round(held_out * M)))
    perm = torch.as_tensor(rng.permutation(M))
    test, train = pairs[:, perm[:m]], pairs[:, perm[m:]]
    existing = set((pairs[0] * n + pairs[1]).tolist())
    negatives = []
    max_neg = n * (n - 1) // 2 - M
    while len(negatives) < min(m, max_neg):
        a, b = rng.integers(0, n, 2)
        a, b = min(a, b), max(a, b)
        if a != b and a * n + b not in existing:
            existing.add(a * n + b)
            negatives.append((a, b))
    neg = torch.as_tensor(negatives, dtype=torch.long).reshape(-1, 2).T
    x = data.x if data.x is not None else torch.zeros(n, 0)
    out = Data(
        x=x.to(torch.get_default_dtype()),
        edge_index=torch.cat([train, train.flip(0)], 1),
        test_edge_index=test,
        test_neg_edge_index=neg,
        num_nodes=n,
    )
    for key in data.keys():
        if key not in ("x", "edge_index", "num_nodes", "y", "train_mask"):
            out[key] = data[key]
    out.name = name or str(getattr(data, "name", "graph"))
    return out


def make_link_graph(
    family: str,
    num_nodes: int = 400,
    feature_dim: int = 16,
    degree: float = 8.0,
    held_out: float = 0.15,
    seed: int = 0,
    homophily: tuple[float, float] = (0.3, 0.95),
) -> Data:
    """One generated graph of a family with a known link model, split for link prediction.

    Parameters
    ----------
    family : str
        One of :data:`ALL_FAMILIES` (:data:`FAMILIES`, :data:`SPECIALISED_FAMILIES` and
        ``"assortative"``, ``"disassortative"``, ``"chung_lu"``, ``"feature_group2"``,
        ``"feature_group3"``).
    num_nodes : int
        ``n >= 20``.
    feature_dim : int
        ``f >= 0``.
    degree : float
        Target mean degree.
    held_out : float
        Fraction of held-out edges.
    seed : int
    homophily : (float, float)
        Range of the SBM's homophily ``h`` (drawn uniformly; the fraction of a node's
        expected edges inside its block), within ``[0, 1]``; other families ignore it.

    Returns
    -------
    Data
        See :func:`link_split`; plus ``family``, ``description`` and the family's latent
        variables (SBM, assortative, disassortative: ``sbm_block``, ``sbm_probs``; geometric,
        feature groups: ``latent``, ``radius``, ``softness``; heterophily: these and
        ``het_block``, ``het_rho``; Chung-Lu: ``cl_weight``).
    """
    if family not in _GENERATORS:
        raise ValueError(f"family must be one of {ALL_FAMILIES}, got {family!r}")
    if num_nodes < 20 or feature_dim < 0 or not 1.0 <= degree < num_nodes / 2:
        raise ValueError(
            f"need num_nodes >= 20, feature_dim >= 0, 1 <= degree < num_nodes/2; got "
            f"{num_nodes}, {feature_dim}, {degree}"
        )
    if not 0.0 <= homophily[0] <= homophily[1] <= 1.0:
        raise ValueError(f"homophily must be a range (lo, hi) within [0, 1], got {homophily}")
    rng = np.random.default_rng(seed)
    extra_args = {"homophily": tuple(homophily)} if family == "sbm" else {}
    edges, x, extra, desc = _GENERATORS[family](num_nodes, feature_dim, degree, rng, **extra_args)
    base = Data(
        x=torch.as_tensor(x, dtype=torch.get_default_dtype()).reshape(num_nodes, feature_dim),
        edge_index=torch.as_tensor(edges, dtype=torch.long),
        num_nodes=num_nodes,
    )
    for key, value in extra.items():
        base[key] = value
    out = link_split(base, held_out, seed + 1, name=f"{family}-{seed}")
    out.family, out.description = family, desc
    return out


def link_probability(data: Data, pairs: torch.Tensor | None = None) -> torch.Tensor | None:
    """The true link probability ``P_ij`` of a generated graph, or ``None`` if unknown.

    Parameters
    ----------
    data : Data
        From :func:`make_link_graph`.
    pairs : Tensor, shape (2, m), optional
        Node pairs; default all pairs (returns ``(n, n)``).

    Returns
    -------
    Tensor, shape (m,) or (n, n), float64, or None
        ``None`` for families without a closed-form link model (BA, WS, real graphs).
        Chung-Lu: ``min(1, w_i w_j / Σw)`` (the diagonal included when ``pairs`` is None).
    """
    if "sbm_probs" in data:
        c, B = data.sbm_block, data.sbm_probs
        if pairs is None:
            return B[c][:, c]
        return B[c[pairs[0]], c[pairs[1]]]
    if "cl_weight" in data:
        w = data.cl_weight
        if pairs is None:
            return (torch.outer(w, w) / w.sum()).clamp(max=1.0)
        return (w[pairs[0]] * w[pairs[1]] / w.sum()).clamp(max=1.0)
    if "latent" in data:
        z = data.latent
        if pairs is None:
            # the exact formula: cdist's default uses a matrix product above 25 points
            # (nonzero self-distance, disagrees with the pair path below)
            dist = torch.cdist(z, z, compute_mode="donot_use_mm_for_euclid_dist")
        else:
            dist = (z[pairs[0]] - z[pairs[1]]).norm(dim=-1)
        p = torch.sigmoid((data.radius - dist) / data.softness)
        if "het_block" in data:  # heterophily: (1 - ρ) inside a block, (1 + ρ) across
            b = data.het_block
            same = b[:, None] == b[None] if pairs is None else b[pairs[0]] == b[pairs[1]]
            p = (p * torch.where(same, 1.0 - data.het_rho, 1.0 + data.het_rho)).clamp(max=1.0)
        return p
    return None


@dataclass
class GraphCollection:
    """A multi-domain collection: graphs to train on and wholly unseen graphs.

    Attributes
    ----------
    train : list of Data
        Trained on (their held-out edges test generalisation within a graph).
    unseen : list of Data
        Never trained on (zero-shot test).
    """

    train: list
    unseen: list


def make_graph_collection(
    num_train: int = 8,
    num_unseen: int = 4,
    families: tuple[str, ...] = FAMILIES,
    num_nodes: tuple[int, int] = (200, 800),
    feature_dims: tuple[int, int] = (4, 64),
    degree: float = 8.0,
    held_out: float = 0.15,
    seed: int = 0,
    homophily: tuple[float, float] = (0.3, 0.95),
) -> GraphCollection:
    """Generate the multi-domain collection, families assigned round robin.

    Parameters
    ----------
    num_train, num_unseen : int
    families : tuple of str
    num_nodes : (int, int)
        Range of graph sizes (uniform, inclusive).
    feature_dims : (int, int)
        Range of feature dimensions.
    degree, held_out : float
    seed : int
    homophily : (float, float)
        Range of the SBM graphs' homophily (see :func:`make_link_graph`).

    Returns
    -------
    GraphCollection
    """
    if num_train < 1 or num_unseen < 0:
        raise ValueError(f"need num_train >= 1, num_unseen >= 0; got {num_train}, {num_unseen}")
    rng = np.random.default_rng(seed)
    graphs = []
    for i in range(num_train + num_unseen):
        family = families[i % len(families)]
        n = int(rng.integers(num_nodes[0], num_nodes[1] + 1))
        f = int(rng.integers(feature_dims[0], feature_dims[1] + 1))
        seed_g = int(rng.integers(2**31))
        graphs.append(
            make_link_graph(family, n, f, degree, held_out, seed=seed_g, homophily=homophily)
        )
    return GraphCollection(graphs[:num_train], graphs[num_train:])


def karate_club(held_out: float = 0.15, seed: int = 0) -> Data:
    """Zachary's karate club (ships with torch-geometric, no download), split for links.

    Returns
    -------
    Data
        34 nodes, one-hot features ``(34, 34)``; see :func:`link_split`.
    """
    from torch_geometric.datasets import KarateClub

    out = link_split(KarateClub()[0], held_out, seed, name="karate")
    out.family = "real"
    return out


def load_pyg_dataset(
    root: str | os.PathLike,
    name: str,
    index: int = 0,
    held_out: float = 0.15,
    seed: int = 0,
    **kwargs,
) -> Data:
    """Load graph ``index`` of a torch-geometric data set already on disk, split for links.

    Never downloads: if the files are missing under ``root`` a ``ValueError`` says so.

    Parameters
    ----------
    root : path
        The data set's folder (as passed to the torch-geometric class).
    name : str
        A class of :mod:`torch_geometric.datasets` (``"Planetoid"``, ``"Amazon"``...); a
        ``name`` keyword for the class goes in ``kwargs`` (e.g. ``name="Cora"`` is
        ``load_pyg_dataset(root, "Planetoid", dataset_name="Cora")``).
    index : int
        Which graph of the data set.
    held_out : float
    seed : int
    **kwargs
        Passed to the class; ``dataset_name`` is passed as its ``name``.

    Returns
    -------
    Data
        See :func:`link_split`.
    """
    import torch_geometric.datasets as pyg_datasets

    cls = getattr(pyg_datasets, name, None)
    if cls is None or not isinstance(cls, type):
        raise ValueError(f"{name!r} is not a torch_geometric.datasets class")
    if not os.path.isdir(root):
        raise ValueError(f"{root} is not a folder; download the data set there yourself first")

    def _no_download(self):
        raise ValueError(
            f"{name} files are missing under {root}; sci-moe never downloads: fetch them "
            "with torch-geometric on a machine with network and copy the folder"
        )

    offline = type(f"Offline{cls.__name__}", (cls,), {"download": _no_download})
    if "dataset_name" in kwargs:
        kwargs["name"] = kwargs.pop("dataset_name")
    dataset = offline(root, **kwargs)
    out = link_split(dataset[index], held_out, seed, name=f"{name}-{index}")
    out.family = "real"
    return out
