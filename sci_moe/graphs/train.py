"""Full-batch semi-supervised node classification: training loop and metrics."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .io import MultiViewGraph

__all__ = ["TrainConfig", "TrainResult", "accuracy", "macro_f1", "train_node_classifier"]


def accuracy(pred: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of ``pred == y`` (both shape ``(n,)``)."""
    if pred.numel() == 0:
        raise ValueError("no nodes to score")
    return float((pred == y).double().mean())


def macro_f1(pred: torch.Tensor, y: torch.Tensor, num_classes: int) -> float:
    """Unweighted mean over the ``num_classes`` classes of the per-class F1.

    .. math:: F1_c = \\frac{2\\,TP_c}{2\\,TP_c + FP_c + FN_c}

    (a class absent from both ``pred`` and ``y`` scores 0, as scikit-learn's
    ``zero_division=0`` with ``labels=range(C)``).
    """
    if pred.numel() == 0:
        raise ValueError("no nodes to score")
    f1s = []
    for c in range(num_classes):
        tp = int(((pred == c) & (y == c)).sum())
        fp = int(((pred == c) & (y != c)).sum())
        fn = int(((pred != c) & (y == c)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return sum(f1s) / num_classes


@dataclass
class TrainConfig:
    """Options of :func:`train_node_classifier`.

    Parameters
    ----------
    epochs : int
    lr, weight_decay : float
        Adam.
    seed : int
        ``torch.manual_seed`` before building the optimiser and training (dropout,
        router noise, MMD node samples).
    progress : bool
        Show a tqdm bar.
    """

    epochs: int = 200
    lr: float = 0.01
    weight_decay: float = 5e-4
    seed: int = 0
    progress: bool = False

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.lr <= 0 or self.weight_decay < 0:
            raise ValueError("need epochs >= 1, lr > 0, weight_decay >= 0")


@dataclass
class TrainResult:
    """Scores of the epoch with the best validation accuracy (the model is left there).

    Attributes
    ----------
    best_epoch : int
    val_accuracy, test_accuracy, test_macro_f1 : float
    history : list of dict
        Per epoch: ``loss``, ``val_accuracy``.
    """

    best_epoch: int
    val_accuracy: float
    test_accuracy: float
    test_macro_f1: float
    history: list = field(default_factory=list, repr=False)


def _logits(model, graph):
    out = model(graph.features(), graph.edge_indices)
    return out, (out if isinstance(out, torch.Tensor) else out.logits)


def train_node_classifier(
    model: nn.Module, graph: MultiViewGraph, config: TrainConfig | None = None
) -> TrainResult:
    """Train ``model`` on ``graph.train_mask``, select the epoch by ``val_mask``.

    ``model(features, edge_indices)`` returns logits ``(N, C)`` or an object with
    ``.logits`` (then a ``model.loss(out, y, mask)`` method, if present, gives the
    objective; else cross-entropy). Without a validation mask the last epoch is kept.

    Parameters
    ----------
    model : nn.Module
    graph : MultiViewGraph
        With ``y``, ``train_mask`` and ``test_mask``.
    config : TrainConfig, optional

    Returns
    -------
    TrainResult
    """
    from .._util import progress_bar

    config = TrainConfig() if config is None else config
    if graph.y is None or graph.train_mask is None or graph.test_mask is None:
        raise ValueError("the graph needs y, train_mask and test_mask to train and score")
    if not bool(graph.train_mask.any()):
        raise ValueError("train_mask selects no nodes")
    torch.manual_seed(config.seed)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    y, tr = graph.y, graph.train_mask
    va = graph.val_mask if graph.val_mask is not None and bool(graph.val_mask.any()) else None
    best, best_state, best_epoch, history = -1.0, None, config.epochs - 1, []
    for epoch in progress_bar(range(config.epochs), disable=not config.progress, desc="train"):
        model.train()
        opt.zero_grad()
        out, logits = _logits(model, graph)
        loss = (
            model.loss(out, y, tr) if hasattr(model, "loss") else F.cross_entropy(logits[tr], y[tr])
        )
        loss.backward()
        opt.step()
        rec = {"loss": float(loss.detach())}
        if va is not None:
            model.eval()
            with torch.no_grad():
                pred = _logits(model, graph)[1].argmax(-1)
            rec["val_accuracy"] = acc = accuracy(pred[va], y[va])
            if acc > best:
                best, best_epoch = acc, epoch
                best_state = copy.deepcopy(model.state_dict())
        history.append(rec)
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        pred = _logits(model, graph)[1].argmax(-1)
    te = graph.test_mask
    C = max(graph.num_classes, int(pred.max()) + 1)
    return TrainResult(
        best_epoch,
        best if va is not None else float("nan"),
        accuracy(pred[te], y[te]),
        macro_f1(pred[te], y[te], C),
        history,
    )
