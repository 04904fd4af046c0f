"""Pre-training, routing and merging of graph experts as one resumable run.

:func:`run_graph_merging` generates a multi-domain link-prediction collection
(:func:`~sci_moe.graphs.make_graph_collection`: SBM, latent-geometry, Barabási-Albert and
Watts-Strogatz graphs), pre-trains an :class:`~sci_moe.graphs.merging.AnyGraphMoE` on the
training graphs (:func:`~sci_moe.graphs.merging.pretrain`, the validation metric being the
zero-shot AUC of the top-1 expert on unseen validation graphs), routes every graph to its
top-k experts and fine-tunes the merged experts for the chosen strategy
(:func:`~sci_moe.graphs.merging.train_merged_experts`), then scores top-1, ensemble, plain merge
and the fine-tuned strategy on unseen test graphs (zero-shot) and on the held-out edges
of the training graphs. The two training phases are engine runs in subfolders
``pretrain/`` and ``finetune/`` of the run's folder (:class:`sci_moe.train.Phases`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields
from pathlib import Path

from sci_moe._util import check_int_attr, module_device
from sci_moe.train import Phases, seed_everything
from sci_moe.train import TrainConfig as _BaseConfig

from ..link_data import make_graph_collection
from ..link_metrics import evaluate_scores
from .model import AnyGraphConfig, AnyGraphMoE
from .strategies import (
    _TUNED,
    MergeConfig,
    _MergeOptions,
    infer_embeddings,
    selected_experts,
    train_merged_experts,
)
from .train import PretrainConfig, pretrain

__all__ = ["BASE_STRATEGIES", "GraphMergingConfig", "mean_link_metrics", "run_graph_merging"]

#: The strategies every run scores besides its own.
BASE_STRATEGIES = ("top1", "ensemble", "merge")


@dataclass
class GraphMergingConfig(_MergeOptions, PretrainConfig):
    """Pre-training, routing and merging on generated graphs (``sci-moe train graph-merging``).

    The engine's options (``steps``, ``lr``, ``batch_size``, ...) are those of the
    pre-training; the fine-tuning of the merged experts takes the same options except
    ``finetune_steps`` and ``finetune_lr``.

    Parameters
    ----------
    steps : int
        Pre-training steps (one edge batch of every training graph each), >= 1.
    strategy : str
        The merging strategy fine-tuned and reported beside top-1, ensemble and plain
        merge: one of top1, ensemble, merge, merge_tuned, kdem, ppem.
    top_k : int
        Experts merged / ensembled per graph.
    temperature : float
        Of the softmax over the selected competence scores.
    kd_weight : float
        ``λ`` of KDEM.
    kd_kind : str
        kl (candidate link scores) or mse (embeddings).
    proximity_weight : float
        ``μ`` of PPEM.
    finetune_steps : int
        Fine-tuning steps of merge_tuned, kdem and ppem, >= 1.
    finetune_lr : float
        Their learning rate.
    d_model : int
        Embedding width of the experts.
    num_experts : int
        Experts in the bank.
    num_layers : int
        Residual layers per expert.
    hops : int
        Propagation steps of the parameter-free encoder.
    train_graphs : int
        Generated graphs to train on (families SBM, latent geometry, Barabási-Albert,
        Watts-Strogatz in turn).
    val_graphs : int
        Unseen graphs whose zero-shot AUC is the validation metric ``val_auc``.
    test_graphs : int
        Unseen graphs of the zero-shot test.
    min_nodes : int
        Smallest graph.
    max_nodes : int
        Largest graph.
    degree : float
        Mean degree of the generated graphs.
    data_seed : int
        Seed of the generated graphs (the data set), apart from the training ``seed``.
    """

    steps: int = 300
    batch_size: int = 128
    reassign_every: int = 25
    eval_every: int = 50
    strategy: str = "kdem"
    finetune_steps: int = 100
    finetune_lr: float = 1e-3
    d_model: int = 32
    num_experts: int = 4
    num_layers: int = 2
    hops: int = 2
    train_graphs: int = 8
    val_graphs: int = 2
    test_graphs: int = 4
    min_nodes: int = 200
    max_nodes: int = 400
    degree: float = 8.0
    data_seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("d_model", "num_experts", "num_layers", "train_graphs", "val_graphs"):
            check_int_attr(self, name, 1)
        for name in ("hops", "test_graphs"):
            check_int_attr(self, name, 0)
        check_int_attr(self, "min_nodes", 10)
        check_int_attr(self, "max_nodes", self.min_nodes)
        check_int_attr(self, "data_seed")
        if not 0 < self.degree < self.min_nodes / 2:
            raise ValueError(
                f"degree must be in (0, min_nodes / 2 = {self.min_nodes / 2:g}), got {self.degree}"
            )
        rank = self.strategy[4:] if self.strategy.startswith("rank") else ""
        if rank.isdigit() and int(rank) > self.top_k:
            raise ValueError(f"strategy {self.strategy} needs top_k >= {rank}, got {self.top_k}")
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k must be <= num_experts = {self.num_experts}, got {self.top_k}")
        self.merge_config()  # validates finetune_steps and finetune_lr
        self.anygraph_config()

    def anygraph_config(self) -> AnyGraphConfig:
        """The model's :class:`AnyGraphConfig`."""
        return AnyGraphConfig(
            d_model=self.d_model,
            num_experts=self.num_experts,
            num_layers=self.num_layers,
            hops=self.hops,
        )

    def pretrain_config(self) -> PretrainConfig:
        """The pre-training's :class:`PretrainConfig`."""
        return PretrainConfig(**{k: getattr(self, k) for k in PretrainConfig.field_names()})

    def merge_config(self) -> MergeConfig:
        """The fine-tuning's :class:`MergeConfig` (``finetune_steps``, ``finetune_lr``)."""
        shared = {k: getattr(self, k) for k in _BaseConfig.field_names()}
        shared.update({f.name: getattr(self, f.name) for f in fields(_MergeOptions)})
        try:
            return MergeConfig(**{**shared, "steps": self.finetune_steps, "lr": self.finetune_lr})
        except ValueError as err:
            msg = str(err)
            for name, field_name in (("steps", "finetune_steps"), ("lr", "finetune_lr")):
                if msg.startswith(name + " "):
                    raise ValueError(field_name + msg[len(name) :]) from None
            raise


def mean_link_metrics(model, graphs, encoded, routing, strategy: str) -> dict:
    """AUC, Recall@20 and NDCG@20 of a strategy on the held-out edges, averaged over graphs.

    Parameters
    ----------
    model : AnyGraphMoE
    graphs : list of Data
    encoded : list of Tensor
        Moved to the model's device where they are elsewhere (the scores are computed
        on the CPU, with the graphs' held-out edges).
    routing : Routing
        Graph-level top-k routing of ``graphs``.
    strategy : str

    Returns
    -------
    dict
        ``{"auc", "recall", "ndcg"}``.
    """
    totals: dict[str, float] = {}
    for g, (z, data) in enumerate(zip(encoded, graphs, strict=True)):
        ids, w = selected_experts(routing, g)
        h = infer_embeddings(model, z, ids, w, strategy).cpu()  # scored with the CPU graph
        for k, v in evaluate_scores(h, data).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    return {k: v / len(graphs) for k, v in totals.items()}


def run_graph_merging(
    config: GraphMergingConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    *,
    stop_after: int | None = None,
) -> dict:
    """Generate the graphs, pre-train, route, fine-tune the merged experts and score them.

    Parameters
    ----------
    config : GraphMergingConfig
    out_dir : path, optional
        The run's folder (``pretrain/``, ``finetune/``).
    resume : bool
        Continue the run in ``out_dir`` exactly.
    stop_after : int, optional
        Return after this many steps of this call (a deliberate interruption).

    Returns
    -------
    dict
        ``pretrained`` and ``tuned`` (:class:`AnyGraphMoE` on ``config.device``: the
        graphs are generated and encoded on the CPU, the experts train there; ``tuned``
        is ``None`` for a strategy without fine-tuning), ``train``
        (:meth:`sci_moe.train.Phases.summary`) and, when the run finished, ``zero_shot``
        and ``held_out_edges``: per strategy the mean ``auc``, ``recall`` and ``ndcg``
        on the unseen test graphs and on the held-out edges of the training graphs.
    """
    c = config
    col = make_graph_collection(
        c.train_graphs,
        c.val_graphs + c.test_graphs,
        num_nodes=(c.min_nodes, c.max_nodes),
        degree=c.degree,
        seed=c.data_seed,
    )
    sets = {
        "train": col.train,
        "val": col.unseen[: c.val_graphs],
        "test": col.unseen[c.val_graphs :],
    }
    seed_everything(c.seed)
    model = AnyGraphMoE(c.anygraph_config())
    enc = {k: [model.encode(g, seed=c.seed) for g in graphs] for k, graphs in sets.items()}

    def route(m, name):
        return m.route_graphs(
            enc[name], sets[name], c.top_k, temperature=c.temperature, seed=c.seed
        )

    def val_top1(m):
        return {
            "val_auc": mean_link_metrics(m, sets["val"], enc["val"], route(m, "val"), "top1")["auc"]
        }

    run = Phases(
        out_dir, resume=resume, max_hours=c.max_hours, stop_after=stop_after, name="graph-merging"
    )
    out: dict = {"pretrained": model, "tuned": None}
    if run.can_start("pretrain"):
        run.run(
            "pretrain",
            lambda **kw: (
                pretrain(
                    model,
                    sets["train"],
                    run.config(c.pretrain_config()),
                    encoded=enc["train"],
                    evaluate=val_top1,
                    out_dir=run.folder("pretrain"),
                    **kw,
                ).train
            ),
        )
    # encoded on the CPU (the same inputs on every device); the engine has put the model
    # on config.device, and the encodings follow it once
    dev = module_device(model)
    enc = {k: [z.to(dev) for z in zs] for k, zs in enc.items()}
    routings = {k: route(model, k) for k in sets if sets[k]} if not run.paused else {}
    if not run.paused and c.strategy in _TUNED and run.can_start("finetune"):
        tuned = copy.deepcopy(model)
        val_routing = routings["val"]

        def val_merged(m):
            auc = mean_link_metrics(m, sets["val"], enc["val"], val_routing, c.strategy)["auc"]
            return {"val_auc": auc}

        run.run(
            "finetune",
            lambda **kw: train_merged_experts(
                tuned,
                sets["train"],
                enc["train"],
                routings["train"],
                run.config(c.merge_config()),
                evaluate=val_merged,
                out_dir=run.folder("finetune"),
                **kw,
            ),
        )
        out["tuned"] = tuned
    out["train"] = run.summary()
    if run.paused:
        return out
    models = {s: (model, s) for s in BASE_STRATEGIES}
    if out["tuned"] is not None:
        models[c.strategy] = (out["tuned"], c.strategy)
    elif c.strategy not in models:
        models[c.strategy] = (model, c.strategy)
    for key, name in (("zero_shot", "test"), ("held_out_edges", "train")):
        if sets[name]:
            out[key] = {
                s: mean_link_metrics(m, sets[name], enc[name], routings[name], strat)
                for s, (m, strat) in models.items()
            }
    return out
