"""The generators of :func:`sci_moe.graphs.make_link_graph`'s families (private).

Each ``_family(n, f, degree, rng, ...)`` returns ``(edges (2, M) with u < v, features
(n, f), latent variables {name: value}, description)``; the families and their link models
are described in :mod:`sci_moe.graphs.link_data`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

__all__: list[str] = []


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _sample_edges(prob: np.ndarray, rng) -> np.ndarray:
    iu = np.triu_indices(prob.shape[0], 1)
    keep = rng.random(iu[0].shape[0]) < prob[iu]
    return np.stack([iu[0][keep], iu[1][keep]])


def _sbm(n, f, degree, rng, homophily=(0.3, 0.95), blocks=(3, 8)):
    B = int(rng.integers(blocks[0], blocks[1] + 1))
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


def _assortative(n, f, degree, rng):
    """SBM, 2-4 blocks, homophily 0.8-0.95: links inside blocks (features alike)."""
    return _sbm(n, f, degree, rng, homophily=_ASSORTATIVE, blocks=(2, 4))


def _disassortative(n, f, degree, rng):
    """SBM, 2-4 blocks, homophily 0-0.1: links across blocks (features unlike)."""
    return _sbm(n, f, degree, rng, homophily=_DISASSORTATIVE, blocks=(2, 4))


def _chung_lu(n, f, degree, rng):
    """Chung-Lu: ``P_ij = min(1, w_i w_j / Σw)``, Pareto(2.5) weights of mean ``degree``,
    pure-noise features: links follow degree, not communities or features."""
    w = rng.pareto(1.5, n) + 1.0  # Pareto with tail exponent 2.5 (density ~ w^-2.5)
    w = np.minimum(w, math.sqrt(n)) * degree / float(np.mean(np.minimum(w, math.sqrt(n))))
    prob = np.minimum(1.0, np.outer(w, w) / w.sum())
    edges = _sample_edges(prob, rng)
    extra = {"cl_weight": torch.as_tensor(w)}
    return edges, rng.normal(size=(n, f)), extra, f"max weight={w.max():.1f}"


def _feature_group(n, f, degree, rng, group):
    """Links follow distance in a hidden Gaussian space ``z`` that only feature group
    ``group`` shows: the features are 4 groups of ``f // 4`` columns at scales 8, 4, 2, 1
    (so their SVD columns come in that order); group ``group`` is ``scale * z``, the
    others independent noise; ``P_ij = σ((r - |z_i - z_j|)/s)``."""
    w = max(1, f // len(_GROUP_SCALES))
    z = rng.normal(size=(n, w))
    dist = np.linalg.norm(z[:, None] - z[None], axis=-1)
    pair = dist[np.triu_indices(n, 1)]
    sharp = float(rng.uniform(4, 12))  # r / s
    lo, hi = 0.0, float(pair.max())
    for _ in range(50):  # r such that the expected mean degree is ``degree``
        r = (lo + hi) / 2
        lo, hi = (r, hi) if _sigmoid((r - pair) * sharp / r).mean() < degree / (n - 1) else (lo, r)
    r = (lo + hi) / 2
    s = r / sharp
    edges = _sample_edges(_sigmoid((r - dist) / s), rng)
    cols = [
        scale * (z if g == group else rng.normal(size=(n, w)))
        for g, scale in enumerate(_GROUP_SCALES)
    ]
    cols.append(_GROUP_SCALES[-1] * rng.normal(size=(n, f - w * len(_GROUP_SCALES))))
    x = np.concatenate(cols, 1)[:, :f]
    extra = {"latent": torch.as_tensor(z), "radius": r, "softness": s}
    return edges, x, extra, f"group={group}, width={w}"


def _heterophily(n, f, degree, rng, block_scale=64.0, latent_scale=1.0):
    """Bipartite-leaning links between nearby nodes of a hidden plane ``h``:
    ``P_ij = σ((r - |h_i - h_j|)/s) (1 ∓ ρ)`` (``-`` inside a block, ``+`` across two
    blocks, ``ρ`` in 0.8-0.95). The block shows in the first feature column (``±block_scale``
    + noise) and is anti-predictive: linked nodes differ in it; ``h`` in the next two
    (``latent_scale`` times), the rest is noise at scale 0.1. ``heterophily``: loud block
    (64), quiet ``h`` (1); ``heterophily_quiet``: the reverse (the block's SVD column comes
    after ``h``'s)."""
    blocks = rng.integers(0, 2, n)
    rho = float(rng.uniform(0.8, 0.95))
    h = rng.random((n, 2))
    dist = np.linalg.norm(h[:, None] - h[None], axis=-1)
    factor = np.where(blocks[:, None] == blocks[None], 1.0 - rho, 1.0 + rho)
    iu = np.triu_indices(n, 1)
    pair, fac = dist[iu], factor[iu]
    sharp = float(rng.uniform(4, 12))
    lo, hi = 0.0, float(pair.max())
    for _ in range(50):  # r such that the expected mean degree is ``degree``
        r = (lo + hi) / 2
        mean = np.minimum(1.0, _sigmoid((r - pair) * sharp / r) * fac).mean()
        lo, hi = (r, hi) if mean < degree / (n - 1) else (lo, r)
    r = (lo + hi) / 2
    edges = _sample_edges(np.minimum(1.0, _sigmoid((r - dist) * sharp / r) * factor), rng)
    x = 0.1 * rng.normal(size=(n, max(f, 3)))
    x[:, 0] = block_scale * (2 * blocks - 1) + rng.normal(size=n)
    x[:, 1:3] = latent_scale * (h - 0.5)
    extra = {
        "latent": torch.as_tensor(h),
        "radius": r,
        "softness": r / sharp,
        "het_block": torch.as_tensor(blocks),
        "het_rho": rho,
    }
    return edges, x[:, :f], extra, f"rho={rho:.2f}"


_GROUP_SCALES = (256.0, 16.0, 1.0, 0.0625)
_ASSORTATIVE = (0.8, 0.95)
_DISASSORTATIVE = (0.0, 0.1)
_GENERATORS = {
    "sbm": _sbm,
    "geometric": _geometric,
    "ba": _ba,
    "ws": _ws,
    "assortative": _assortative,
    "disassortative": _disassortative,
    "chung_lu": _chung_lu,
    "heterophily": _heterophily,
    "heterophily_quiet": functools.partial(_heterophily, block_scale=1.0, latent_scale=64.0),
    **{
        f"feature_group{g + 1}": functools.partial(_feature_group, group=g)
        for g in range(len(_GROUP_SCALES))
    },
}
