"""Full-batch semi-supervised node classification on the training engine, and its metrics.

Every optimiser step is one epoch over the whole graph (the loss on ``train_mask``); the
validation accuracy is evaluated after every step and picks the weights that are kept
(:class:`sci_moe.train.Trainer`: seeding, Adam, checkpoints with exact resume).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from sci_moe._util import to_device
from sci_moe.train import ShuffledBatches, Trainer
from sci_moe.train import TrainConfig as _BaseConfig

from ..io import MultiViewGraph

__all__ = [
    "NODE_MODELS",
    "MvCGETrainConfig",
    "TrainConfig",
    "TrainResult",
    "accuracy",
    "build_node_classifier",
    "macro_f1",
    "run_mvcge",
    "train_node_classifier",
]

#: Models of :class:`MvCGETrainConfig` (``"view<v>"``: a GCN on view ``v`` alone).
NODE_MODELS = ("mvcge", "early_fusion", "late_fusion", "attention_fusion", "mlp", "view<v>")
_FIXED_MODELS = NODE_MODELS[:-1]


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
class TrainConfig(_BaseConfig):
    """Options of :func:`train_node_classifier` (the engine's options plus the below).

    Parameters
    ----------
    steps : int
        Epochs: full-batch updates on ``train_mask``, >= 1.
    batch_size : int
        Not used: every step takes the whole graph.
    lr : float
        Adam's learning rate (constant by default).
    weight_decay : float
        Adam's L2 decay of the weight matrices.
    """

    steps: int = 200
    batch_size: int = 1
    lr: float = 0.01
    weight_decay: float = 5e-4
    optimizer: str = "adam"
    schedule: str = "constant"
    warmup: float = 0.0
    grad_clip: float | None = None
    eval_every: int = 1
    monitor: str = "val_accuracy"
    mode: str = "max"
    checkpoint_every: int = 50
    progress: bool = False


@dataclass
class TrainResult:
    """Scores of the epoch with the best validation metric (the model is left there).

    Attributes
    ----------
    best_epoch : int
        0-based (the model after ``best_epoch + 1`` updates).
    val_accuracy, test_accuracy, test_macro_f1 : float
        Of the kept weights (those of the best ``monitor``: by default the validation
        accuracy, ``"val_loss"`` picks the best validation cross-entropy).
    history : list of dict
        Every evaluation: ``step`` (updates done), ``val_accuracy`` and ``val_loss``
        (cross-entropy of the validation nodes, eval mode).
    train : dict
        The engine's summary of the run (:meth:`sci_moe.train.TrainResult.to_dict`).
    """

    best_epoch: int
    val_accuracy: float
    test_accuracy: float
    test_macro_f1: float
    history: list = field(default_factory=list, repr=False)
    train: dict = field(default_factory=dict, repr=False)


def _logits(model, features, edge_indices):
    out = model(features, edge_indices)
    return out, (out if isinstance(out, torch.Tensor) else out.logits)


def train_node_classifier(
    model: nn.Module,
    graph: MultiViewGraph,
    config: TrainConfig | None = None,
    *,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
) -> TrainResult:
    """Train ``model`` on ``graph.train_mask``, select the epoch by ``val_mask``.

    ``model(features, edge_indices)`` returns logits ``(N, C)`` or an object with
    ``.logits`` (then a ``model.loss(out, y, mask)`` method, if present, gives the
    objective; else cross-entropy). Without a validation mask the last epoch is kept.
    The model trains on ``config.device``: the graph (features, edges, labels and masks)
    is moved there once and every step and evaluation reads it there.

    Parameters
    ----------
    model : nn.Module
        Built by the caller (after :func:`sci_moe.train.seed_everything` for reproducible
        initial weights).
    graph : MultiViewGraph
        With ``y``, ``train_mask`` and ``test_mask``.
    config : TrainConfig, optional
    out_dir : path, optional
        Checkpoint and ``metrics.jsonl`` folder.
    resume : bool
        Continue the run in ``out_dir`` exactly.
    stop_after : int, optional
        Return after this many updates (a deliberate interruption; the scores are then
        those of the current weights).

    Returns
    -------
    TrainResult
    """
    config = TrainConfig() if config is None else config
    if graph.y is None or graph.train_mask is None or graph.test_mask is None:
        raise ValueError("the graph needs y, train_mask and test_mask to train and score")
    if not bool(graph.train_mask.any()):
        raise ValueError("train_mask selects no nodes")
    meta = {
        "model": type(model).__name__,
        "nodes": graph.num_nodes,
        "views": graph.num_views,
        "features": graph.num_features,
    }
    on: dict = {}  # the graph's tensors on the engine's device (moved once)

    def loss_fn(m: nn.Module, batch: tuple) -> torch.Tensor:
        out, logits = _logits(m, *batch)
        y, tr = on["y"], on["train"]
        return m.loss(out, y, tr) if hasattr(m, "loss") else F.cross_entropy(logits[tr], y[tr])

    def evaluate(m: nn.Module) -> dict:
        logits = _logits(m, *on["batch"])[1]
        y, va = on["y"], on["val"]
        return {
            "val_accuracy": accuracy(logits[va].argmax(-1), y[va]),
            "val_loss": float(F.cross_entropy(logits[va], y[va])),
        }

    has_val = graph.val_mask is not None and bool(graph.val_mask.any())
    trainer = Trainer(
        model,
        loss_fn,
        ShuffledBatches(1, 1, lambda idx: on["batch"], shuffle=False),
        config,
        evaluate=evaluate if has_val else None,
        out_dir=out_dir,
        meta=meta,
        name="node classification",
    )
    g = graph if trainer.device.type == "cpu" else to_device(graph, trainer.device)
    on.update(
        batch=(g.features(), g.edge_indices),
        y=g.y,
        train=g.train_mask,
        val=g.val_mask if has_val else None,
    )
    res = trainer.fit(resume=resume, stop_after=stop_after)
    model.eval()
    with torch.no_grad():
        pred = _logits(model, *on["batch"])[1].argmax(-1)
    y, va = on["y"], on["val"]
    te = g.test_mask
    C = max(graph.num_classes, int(pred.max()) + 1)
    best = res.best_step if va is not None and res.best_step is not None else res.step
    return TrainResult(
        best - 1,
        accuracy(pred[va], y[va]) if va is not None else float("nan"),
        accuracy(pred[te], y[te]),
        macro_f1(pred[te], y[te], C),
        res.evals,
        res.to_dict(),
    )


@dataclass
class MvCGETrainConfig(TrainConfig):
    """MvCGE (or a baseline) on a multi-view graph (``sci-moe train mvcge``).

    The graph is the file or folder ``data`` (:func:`~sci_moe.graphs.load_multiview_graph`)
    or, without it, a multi-view contextual SBM of the benchmark's ``setting``
    (:func:`~sci_moe.graphs.mvcge.mvcge_csbm_config`: four classes, three views,
    complementary or consistent), whose Bayes-optimal accuracy is reported beside the
    model's.

    The training defaults are the benchmark's (``benchmarks/mvcge/run.py``): at most 1000
    epochs, the validation cross-entropy every 2 epochs picks the weights kept, stop after
    100 evaluations without a new best.

    Parameters
    ----------
    model : str
        mvcge, early_fusion, late_fusion, attention_fusion (HAN-style), mlp (features
        only), or view<v> (a GCN on view v alone).
    hidden_dim : int
        Hidden width.
    num_layers : int
        Graph layers.
    num_experts : int
        MvCGE's experts per layer.
    top_k : int
        MvCGE's experts per token.
    token : str
        MvCGE's routing token: node (every node of every view) or view (one pooled token
        per view).
    router_input : str
        What MvCGE's router sees: graph (propagated row, its contrast with the node's own
        row and the log degree in the view) or propagated (the propagated row only).
    fusion : str
        MvCGE's view fusion: concat, attention or mean.
    shared_experts : bool
        One expert pool shared by the views (MvCGE) or one per view (the ablation).
    dropout : float
        On every layer's input, in [0, 1).
    router_noise : float
        Std of MvCGE's router logit noise (training only).
    le_weight : float
        Weight of MvCGE's load-equilibrium loss.
    le_source : str
        Importance of the load-equilibrium loss: probs (full softmax) or weights
        (renormalised top-k weights).
    gd_weight : float
        Weight of MvCGE's graph-discrepancy (MMD) loss.
    mmd_max_nodes : int
        Nodes sampled for the MMD per step.
    data : str or None
        A multi-view graph (.npz or folder); none: the contextual SBM below.
    setting : str
        SBM setting: complementary (view v makes class v a community) or consistent
        (every view has the same four communities).
    num_nodes : int
        SBM nodes.
    contrast : tuple of float
        SBM homophily contrast of the three views, each in [-1, 1].
    mean_degree : float
        SBM mean degree per view.
    feature_signal : float
        SBM distance of the class means from the origin (feature noise 1).
    data_seed : int
        Seed of the SBM graph and its 20/20/60 split.
    """

    steps: int = 1000
    eval_every: int = 2
    monitor: str = "val_loss"
    mode: str = "min"
    patience: int = 100
    progress: bool = True
    model: str = "mvcge"
    hidden_dim: int = 32
    num_layers: int = 2
    num_experts: int = 4
    top_k: int = 2
    token: str = "node"
    router_input: str = "graph"
    fusion: str = "concat"
    shared_experts: bool = True
    dropout: float = 0.5
    router_noise: float = 0.0
    le_weight: float = 0.01
    gd_weight: float = 0.1
    le_source: str = "probs"
    mmd_max_nodes: int = 128
    data: str | None = None
    setting: str = "complementary"
    num_nodes: int = 600
    contrast: tuple[float, ...] = (0.7, 0.7, 0.7)
    mean_degree: float = 6.0
    feature_signal: float = 1.0
    data_seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.contrast = tuple(self.contrast)
        if not (self.model in _FIXED_MODELS or _view_of(self.model)):
            raise ValueError(f"model must be one of {NODE_MODELS}, got {self.model!r}")
        if self.data is None:
            try:
                self.csbm_config()
            except ValueError as err:
                raise ValueError(
                    f"the SBM options (setting, num_nodes, contrast, mean_degree): {err}"
                ) from None
            view = _view_of(self.model)
            if view is not None and int(view) >= len(self.contrast):
                raise ValueError(f"model {self.model}: the SBM has {len(self.contrast)} views")
        # the model options, checked without a graph (in_dim and num_classes are the data's)
        self._mvcge_config(in_dim=1, num_classes=2, num_views=len(self.contrast))

    def csbm_config(self):
        """The :class:`~sci_moe.graphs.MultiViewCSBMConfig` of the generated graph."""
        from ..sbm import MultiViewCSBMConfig
        from .data import MVCGE_SETTINGS

        if self.setting not in MVCGE_SETTINGS:
            raise ValueError(
                f"setting must be one of {sorted(MVCGE_SETTINGS)}, not {self.setting!r}"
            )
        partitions = MVCGE_SETTINGS[self.setting][0]
        if len(self.contrast) != len(partitions):
            raise ValueError(f"give one contrast per view ({len(partitions)}), got {self.contrast}")
        return MultiViewCSBMConfig(
            num_nodes=self.num_nodes,
            num_classes=4,
            partitions=partitions,
            contrast=self.contrast,
            mean_degree=self.mean_degree,
            feature_signal=self.feature_signal,
        )

    def _mvcge_config(self, in_dim: int, num_classes: int, num_views: int):
        from .config import MvCGEConfig

        return MvCGEConfig(
            in_dim=in_dim,
            num_classes=num_classes,
            hidden_dim=self.hidden_dim,
            num_layers=self.num_layers,
            num_experts=self.num_experts,
            top_k=self.top_k,
            token=self.token,
            router_input=self.router_input,
            shared_experts=self.shared_experts,
            num_views=num_views,
            fusion=self.fusion,
            dropout=self.dropout,
            router_noise=self.router_noise,
            le_weight=self.le_weight,
            gd_weight=self.gd_weight,
            le_source=self.le_source,
            mmd_max_nodes=self.mmd_max_nodes,
        )


def _view_of(model: str) -> str | None:
    return model[4:] if model.startswith("view") and model[4:].isdigit() else None


def build_node_classifier(config: MvCGETrainConfig, graph: MultiViewGraph) -> nn.Module:
    """The model of ``config`` for ``graph`` (weights from ``config.seed``)."""
    from sci_moe.train import seed_everything

    from .baselines import MLP, AttentionFusionGCN, EarlyFusionGCN, LateFusionGCN, PerViewGCN
    from .model import MvCGE

    seed_everything(config.seed)
    C = graph.num_classes
    if config.model == "mvcge":
        return MvCGE(config._mvcge_config(graph.num_features, C, graph.num_views))
    gcn = dict(
        in_dim=graph.num_features,
        hidden_dim=config.hidden_dim,
        num_classes=C,
        num_layers=config.num_layers,
        dropout=config.dropout,
    )
    if config.model == "early_fusion":
        return EarlyFusionGCN(**gcn)
    if config.model == "late_fusion":
        return LateFusionGCN(graph.num_views, **gcn)
    if config.model == "attention_fusion":
        return AttentionFusionGCN(graph.num_views, **gcn)
    if config.model == "mlp":
        return MLP(**gcn)
    view = int(_view_of(config.model))
    if view >= graph.num_views:
        raise ValueError(f"model {config.model}: the graph has {graph.num_views} views")
    return PerViewGCN(view, **gcn)


def run_mvcge(
    config: MvCGETrainConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    *,
    stop_after: int | None = None,
) -> dict:
    """Load or generate the graph, train the model of ``config`` and score it.

    Parameters
    ----------
    config : MvCGETrainConfig
    out_dir : path, optional
        Checkpoint and ``metrics.jsonl`` folder.
    resume : bool
        Continue the run in ``out_dir`` exactly.
    stop_after : int, optional
        Return after this many updates (a deliberate interruption).

    Returns
    -------
    dict
        ``model``, ``graph``, ``result`` (:class:`TrainResult`) and, for the generated
        SBM, ``bayes_accuracy`` (the oracle's expected accuracy on the test nodes).
    """
    from ..io import load_multiview_graph
    from ..sbm import bayes_optimal_accuracy, make_multiview_csbm

    if config.data is not None:
        graph = load_multiview_graph(config.data, allow_empty_views=True)
    else:
        graph = make_multiview_csbm(config.csbm_config(), seed=config.data_seed)
    model = build_node_classifier(config, graph)
    base = TrainConfig(**{k: getattr(config, k) for k in TrainConfig.field_names()})
    res = train_node_classifier(
        model, graph, base, out_dir=out_dir, resume=resume, stop_after=stop_after
    )
    out = {"model": model, "graph": graph, "result": res}
    if config.data is None:
        out["bayes_accuracy"] = bayes_optimal_accuracy(graph).expected
    return out
