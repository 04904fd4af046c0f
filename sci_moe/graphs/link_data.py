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

Every graph is a PyG :class:`~torch_geometric.data.Data` with ``x`` (``(n, f)``, ``f``
may be 0), ``edge_index`` (training edges, both directions), ``test_edge_index`` (held-out
edges ``u < v``, ``(2, m)``), ``test_neg_edge_index`` (as many sampled non-edges),
``family`` and ``name``; SBM and geometric graphs also carry the latent variables of
their link model, so :func:`link_probability` gives the exact ``P_ij`` (the Bayes-optimal
ranking of held-out pairs for these independent-edge models).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

__all__ = [
    "FAMILIES",
    "GraphCollection",
    "karate_club",
    "link_probability",
    "link_split",
    "load_pyg_dataset",
    "make_graph_collection",
    "make_link_graph",
]

FAMILIES = ("sbm", "geometric", "ba", "ws")


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _sample_edges(prob: np.ndarray, rng) -> np.ndarray:
    iu = np.triu_indices(prob.shape[0], 1)
    keep = rng.random(iu[0].shape[0]) < prob[iu]
    return np.stack([iu[0][keep], iu[1][keep]])


def _sbm(n, f, degree, rng, homophily=(0.3, 0.95)):
    B = int(rng.integers(3, 9))
    h = float(rng.uniform(*homophily))
    blocks = rng.integers(0, B, n)
    p_in = min(1.0, h * degree * B / n)
    p_out = min(1.0, (1 - h) * degree * B / (n * (B - 1)))
    probs = np.full((B, B), p_out) + np.eye(B) * (p_in - p_out)
    edges = _sample_edges(probs[blocks][:, blocks], rng)
    means = rng.normal(size=(B, f))
    x = means[blocks] + rng.normal(scale=1.5, size=(n, f))
    extra = {"sbm_block": torch.as_tensor(blocks), "sbm_probs": torch.as_tensor(probs)}
    return edges, x, extra, f"homophily={h:.2f}, blocks={B}"


def _geometric(n, f, degree, rng):
    z = rng.random((n, 2))
    r = math.sqrt(degree / (n * math.pi))
    s = r / float(rng.uniform(4, 12))
    dist = np.linalg.norm(z[:, None] - z[None], axis=-1)
    edges = _sample_edges(_sigmoid((r - dist) / s), rng)
    x = np.tanh(z @ rng.normal(scale=2.0, size=(2, f))) + rng.normal(scale=0.3, size=(n, f))
    extra = {"latent": torch.as_tensor(z), "radius": float(r), "softness": float(s)}
    return edges, x, extra, f"radius={r:.3f}"


def _ba(n, f, degree, rng):
    m = max(1, round(degree / 2))
    targets, rep, edges = list(range(m)), [], []
    for v in range(m, n):
        for u in set(targets):
            edges.append((u, v))
        rep.extend(targets)
        rep.extend([v] * m)
        targets = [rep[i] for i in rng.integers(0, len(rep), m)]
    edges = np.array(sorted(set(edges))).T
    return edges, rng.normal(size=(n, f)), {}, f"m={m}"


def _ws(n, f, degree, rng):
    K = max(2, 2 * round(degree / 2))
    beta = float(rng.uniform(0.05, 0.3))
    edge_set = set()
    for u in range(n):
        for j in range(1, K // 2 + 1):
            v = (u + j) % n
            if rng.random() < beta:
                v = int(rng.integers(0, n))
                while v == u or (min(u, v), max(u, v)) in edge_set:
                    v = int(rng.integers(0, n))
            edge_set.add((min(u, v), max(u, v)))
    edges = np.array(sorted(edge_set)).T
    angle = 2 * math.pi * np.arange(n) / n
    ring = np.stack([np.cos(angle), np.sin(angle)], 1)
    x = np.tanh(ring @ rng.normal(scale=2.0, size=(2, f))) + rng.normal(scale=0.5, size=(n, f))
    return edges, x, {}, f"K={K}, beta={beta:.2f}"


_GENERATORS = {"sbm": _sbm, "geometric": _geometric, "ba": _ba, "ws": _ws}


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
    family : {"sbm", "geometric", "ba", "ws"}
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
        variables (SBM: ``sbm_block``, ``sbm_probs``; geometric: ``latent``, ``radius``,
        ``softness``).
    """
    if family not in _GENERATORS:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
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
    """
    if "sbm_probs" in data:
        c, B = data.sbm_block, data.sbm_probs
        if pairs is None:
            return B[c][:, c]
        return B[c[pairs[0]], c[pairs[1]]]
    if "latent" in data:
        z = data.latent
        if pairs is None:
            # the exact formula: cdist's default uses a matrix product above 25 points
            # (nonzero self-distance, disagrees with the pair path below)
            dist = torch.cdist(z, z, compute_mode="donot_use_mm_for_euclid_dist")
        else:
            dist = (z[pairs[0]] - z[pairs[1]]).norm(dim=-1)
        return torch.sigmoid((data.radius - dist) / data.softness)
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
