"""Class-incremental segmentation protocol: task splits, background shift, mIoU.

In class-incremental semantic segmentation (CISS) step :math:`t` sees images annotated only
for its own classes :math:`C_t`; every other pixel, including pixels of old classes
:math:`C_{0:t-1}` and of future ones, is labelled background (0): the *background shift*.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["background_shift_labels", "incremental_tasks", "mean_iou", "per_class_iou"]


def incremental_tasks(n_classes: int, base: int, increment: int) -> list[list[int]]:
    """Class splits ``base-increment`` (e.g. 4-1 on 6 classes: [[1..4], [5], [6]]).

    Parameters
    ----------
    n_classes, base, increment : int

    Returns
    -------
    list of list of int
        Classes of each step, labels ``1..n_classes``.
    """
    if not 1 <= base <= n_classes or increment < 1:
        raise ValueError(f"need 1 <= base <= n_classes={n_classes} and increment >= 1")
    tasks = [list(range(1, base + 1))]
    c = base + 1
    while c <= n_classes:
        tasks.append(list(range(c, min(c + increment, n_classes + 1))))
        c += increment
    return tasks


def background_shift_labels(masks: Tensor, current_classes) -> Tensor:
    """Labels of step ``t``: pixels of ``current_classes`` keep their class, all others 0.

    Parameters
    ----------
    masks : Tensor, shape (..., H, W), long
        Full ground-truth masks.
    current_classes : sequence of int

    Returns
    -------
    Tensor, same shape as ``masks``
    """
    keep = torch.zeros_like(masks, dtype=torch.bool)
    for c in current_classes:
        keep |= masks == int(c)
    return torch.where(keep, masks, torch.zeros_like(masks))


def per_class_iou(pred: Tensor, target: Tensor, classes) -> dict[int, float]:
    """Intersection over union of each class (NaN where a class is absent in both)."""
    out = {}
    for c in classes:
        p, t = pred == c, target == c
        union = int((p | t).sum())
        out[int(c)] = float("nan") if union == 0 else int((p & t).sum()) / union
    return out


def mean_iou(pred: Tensor, target: Tensor, classes) -> float:
    """Mean IoU over ``classes`` (absent classes ignored)."""
    vals = [v for v in per_class_iou(pred, target, classes).values() if v == v]
    return float("nan") if not vals else sum(vals) / len(vals)
