"""Sparse probing and top activations of a decomposition's units.

Sparse probing (Gurnee et al. 2023, as used by the MxD paper): rank the units of a
sparse code by how differently they fire on the two classes of a labelled task, keep
the top ``n`` units, and fit a logistic-regression probe on their coefficients alone.
High held-out accuracy with few units means single units carry the feature. Here the
labelled task is the corpus a token comes from (Wikipedia vs news), known for every
cached token.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["code_columns", "rank_units", "sparse_codes", "sparse_probe", "top_activations"]


@torch.no_grad()
def sparse_codes(module: nn.Module, x: torch.Tensor, batch_size: int = 4096):
    """The top-k code of ``module`` on ``x``.

    Parameters
    ----------
    module : MixtureOfDecoders or Transcoder or SkipTranscoder
    x : Tensor, shape (T, d_in)
    batch_size : int

    Returns
    -------
    values, indices : Tensor, shape (T, k)
    num_units : int
    """
    was = module.training
    module.eval()
    vals, idxs, n = [], [], None
    try:
        for b in range(0, x.shape[0], batch_size):
            out = module(x[b : b + batch_size])
            vals.append(out.values)
            idxs.append(out.indices)
            n = out.num_units
    finally:
        module.train(was)
    return torch.cat(vals), torch.cat(idxs), n


def code_columns(values: torch.Tensor, indices: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
    """Dense coefficients of selected units, shape ``(T, len(units))`` (0 where inactive)."""
    out = values.new_zeros(values.shape[0], units.numel())
    for j, u in enumerate(units.tolist()):
        hit = indices == u
        out[:, j] = (values * hit).sum(-1)
    return out


def rank_units(
    values: torch.Tensor, indices: torch.Tensor, num_units: int, labels: torch.Tensor
) -> torch.Tensor:
    """Units ordered by the gap of their mean coefficient between the two classes.

    Parameters
    ----------
    values, indices : Tensor, shape (T, k)
    num_units : int
    labels : Tensor, int64 or bool, shape (T,)
        Binary labels.

    Returns
    -------
    Tensor, int64, shape (num_units,)
        Units by decreasing ``|mean_1 - mean_0|`` of their (dense) coefficient.
    """
    labels = labels.long()
    if labels.shape != values.shape[:1] or not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels must be 0/1 with one entry per token")
    n1 = int(labels.sum())
    n0 = labels.numel() - n1
    if n0 == 0 or n1 == 0:
        raise ValueError("both classes must occur among the tokens")
    sums = torch.zeros(2, num_units, dtype=values.dtype)
    k = values.shape[1]
    rows = labels.repeat_interleave(k)
    sums.index_put_((rows, indices.reshape(-1)), values.reshape(-1), accumulate=True)
    gap = (sums[1] / n1 - sums[0] / n0).abs()
    return gap.argsort(descending=True)


def sparse_probe(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    test_features: torch.Tensor,
    test_labels: torch.Tensor,
    seed: int = 0,
) -> float:
    """Held-out accuracy of a logistic-regression probe (scikit-learn, balanced classes).

    Parameters
    ----------
    train_features, test_features : Tensor, shape (T, n)
    train_labels, test_labels : Tensor, shape (T,)
    seed : int

    Returns
    -------
    float
        Balanced accuracy on the test tokens (mean of the per-class recalls).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score

    clf = LogisticRegression(max_iter=1000, class_weight="balanced", random_state=seed)
    clf.fit(train_features.double().numpy(), train_labels.numpy())
    pred = clf.predict(test_features.double().numpy())
    return float(balanced_accuracy_score(test_labels.numpy(), pred))


def top_activations(
    values: torch.Tensor, indices: torch.Tensor, unit: int, n: int = 10
) -> torch.Tensor:
    """Tokens on which ``unit`` has its largest coefficients.

    Returns
    -------
    Tensor, int64, shape (<= n,)
        Token indices (rows of the code), by decreasing coefficient; only tokens where
        the unit is active.
    """
    coef = (values * (indices == unit)).sum(-1)
    order = coef.argsort(descending=True)[:n]
    return order[coef[order] > 0]
