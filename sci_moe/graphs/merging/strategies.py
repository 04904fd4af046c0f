"""Expert merging for MoE graph foundation models: one option, six strategies.

Liu et al., "Enhanced Expert Merging for Mixture-of-Experts in Graph Foundation Models"
(NeurIPS 2025). With the competence router's top-k experts ``i_1..i_k`` of a graph and
their weights ``w`` (:meth:`AnyGraphMoE.route_graphs
<sci_moe.graphs.merging.AnyGraphMoE.route_graphs>`, the core
:class:`~sci_moe.moe.Router` in competence mode):

==================  ==========================================================  =========
strategy            node embeddings                                            cost
==================  ==========================================================  =========
``"top1"``          ``f_{θ_{i_1}}(z)`` (``"rank2"``, ``"rank3"``: one lower        1 x
                    ranked expert alone)
``"ensemble"``      ``Σ_k w_k f_{θ_{i_k}}(z)``                                  k x
``"merge"``         ``f_{Σ_k w_k θ_{i_k}}(z)`` (plain parameter averaging)        ~1 x
``"merge_tuned"``   as ``"merge"`` after fine-tuning the merged expert on the      ~1 x
                    task loss alone (a control for the two below)
``"kdem"``          as ``"merge"`` after fine-tuning with the task loss of the      ~1 x
                    merged expert plus ``λ`` KD to the (stopped) ensemble
``"ppem"``          as ``"merge"`` after fine-tuning with the ensemble's task       ~1 x
                    loss plus ``μ Σ_k w_k ||θ_k - θ̄_w||²``
==================  ==========================================================  =========

The equations of KDEM and PPEM are reconstructed from the abstract (the paper's code is
supplementary material only); see :func:`ensemble_distillation_loss` and
:func:`proximity_loss`. At inference a merged expert is materialised once per
graph by the core's :func:`~sci_moe.moe.merge_experts` (routing is graph-level, so the merge cost is
amortised over the graph's nodes).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch_geometric.data import Data

from sci_moe._util import module_device
from sci_moe.moe import Routing, merge_experts, merged_forward
from sci_moe.train import Trainer, TrainResult

from .ensemble import (
    _ensemble_routing,
    ensemble_distillation_loss,
    ensemble_forward,
    proximity_loss,
)
from .model import AnyGraphMoE, link_loss
from .train import _LinkTrainConfig, link_batches

__all__ = [
    "STRATEGIES",
    "MergeConfig",
    "fine_tune_merging",
    "infer_embeddings",
    "inference_flops",
    "selected_experts",
    "train_merged_experts",
]

STRATEGIES = ("top1", "ensemble", "merge", "merge_tuned", "kdem", "ppem")
_TUNED = ("merge_tuned", "kdem", "ppem")


def _check_strategy(strategy: str) -> int | None:
    if strategy.startswith("rank") and strategy[4:].isdigit() and int(strategy[4:]) >= 1:
        return int(strategy[4:])
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES} or 'rank<r>', got {strategy!r}")
    return None


@dataclass
class _MergeOptions:
    """The merging options that :class:`MergeConfig` and the run's config
    (:class:`~sci_moe.graphs.merging.GraphMergingConfig`) share: a mixin listed before
    their engine config, validated after the engine's options."""

    strategy: str = "merge"
    top_k: int = 2
    temperature: float = 0.1
    kd_weight: float = 1.0
    kd_kind: str = "kl"
    proximity_weight: float = 1e-2

    def __post_init__(self):
        super().__post_init__()
        _check_strategy(self.strategy)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1, got {self.top_k!r}")
        if self.kd_kind not in ("kl", "mse"):
            raise ValueError(f"kd_kind must be 'kl' or 'mse', got {self.kd_kind!r}")
        for name in ("kd_weight", "proximity_weight"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")


@dataclass
class MergeConfig(_MergeOptions, _LinkTrainConfig):
    """Settings of the merging strategies (the engine's options plus the below).

    Parameters
    ----------
    strategy : str
        One of :data:`STRATEGIES` (or ``"rank<r>"`` for inference).
    top_k : int
        Experts merged / ensembled (``<= num_experts``).
    temperature : float
        Of the softmax over the selected competence scores (routing weights).
    kd_weight : float
        ``λ`` of KDEM.
    kd_kind : {"kl", "mse"}
        KD on the candidate link scores (``"kl"``) or on the embeddings (``"mse"``).
    proximity_weight : float
        ``μ`` of PPEM.
    steps : int
        Fine-tuning steps (one batch per graph each), >= 1.
    batch_size : int
        Edges per graph and step.
    lr : float
        Adam's learning rate (constant by default).
    """

    steps: int = 100
    eval_every: int = 25


def selected_experts(routing: Routing, graph: int) -> tuple[list[int], torch.Tensor]:
    """The experts (rank order) and their normalised weights for one graph of a routing.

    Parameters
    ----------
    routing : Routing
        Graph-level, from :meth:`AnyGraphMoE.route_graphs`.
    graph : int

    Returns
    -------
    experts : list of int
    weights : Tensor, shape (k,)
    """
    ids = routing.indices[graph].tolist()
    w = routing.weights[graph].detach()
    return ids, w / w.sum()


@torch.no_grad()
def infer_embeddings(
    model: AnyGraphMoE, z: torch.Tensor, experts: list[int], weights, strategy: str
) -> torch.Tensor:
    """Node embeddings of one graph under a strategy (no gradient).

    Parameters
    ----------
    model : AnyGraphMoE
        Fine-tuned by :func:`fine_tune_merging` for ``"merge_tuned"``, ``"kdem"`` and
        ``"ppem"`` (their inference is the plain merge of that model).
    z : Tensor, shape (n, d)
        Moved to the model's device if it is elsewhere.
    experts : list of int
        The graph's top-k experts, rank order.
    weights : Tensor, shape (k,)
    strategy : str

    Returns
    -------
    Tensor, shape (n, d)
        On the model's device.
    """
    rank = _check_strategy(strategy)
    z = z.to(module_device(model))
    if rank is not None:
        if rank > len(experts):
            raise ValueError(f"{strategy} needs top_k >= {rank}, got {len(experts)} experts")
        return model.experts.forward_expert(experts[rank - 1], z)
    if strategy == "top1":
        return model.experts.forward_expert(experts[0], z)
    if strategy == "ensemble":  # the routed layer's forward: every node to the graph's experts
        return model(z, _ensemble_routing(model.experts, z, experts, weights))
    merged = merge_experts(model.experts, list(experts), weights)
    return merged.forward_expert(0, z)


def _scores(ha, hp, hn):
    return torch.cat([(ha * hp).sum(-1, keepdim=True), ha @ hn.T], 1)


def fine_tune_merging(
    model: AnyGraphMoE,
    graphs: list[Data],
    encoded: list[torch.Tensor],
    routing: Routing,
    config: MergeConfig,
    progress: bool | None = None,
    **train_options,
) -> AnyGraphMoE:
    """Fine-tune a copy of ``model`` for a merging strategy with a fixed graph routing.

    See :func:`train_merged_experts` for the objectives; this function trains a deep copy
    and leaves ``model`` unchanged.

    Parameters
    ----------
    model : AnyGraphMoE
        Pre-trained; left unchanged.
    graphs : list of Data
    encoded : list of Tensor
    routing : Routing
        Graph-level top-k routing of ``graphs`` (held fixed).
    config : MergeConfig
    progress : bool, optional
        Overrides ``config.progress``.
    **train_options
        ``evaluate``, ``out_dir``, ``resume``, ``stop_after`` of
        :func:`train_merged_experts`.

    Returns
    -------
    AnyGraphMoE
        A copy (``model`` itself for strategies that need no fine-tuning).
    """
    if config.strategy not in _TUNED:
        return model
    tuned = copy.deepcopy(model)
    train_merged_experts(tuned, graphs, encoded, routing, config, progress, **train_options)
    return tuned


def train_merged_experts(
    model: AnyGraphMoE,
    graphs: list[Data],
    encoded: list[torch.Tensor],
    routing: Routing,
    config: MergeConfig,
    progress: bool | None = None,
    *,
    evaluate: Callable[[AnyGraphMoE], dict] | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
) -> TrainResult:
    """Fine-tune ``model``'s experts in place for a merging strategy (an engine run).

    Per step and graph (batch of edges ``a, p`` and sampled negatives ``n``):

    * ``"merge_tuned"``: ``L_task(θ_m)``;
    * ``"kdem"``: ``L_task(θ_m) + λ D(s_{θ_m}, sg(Σ_k w_k s_{θ_k}))`` with ``s`` the
      candidate scores (``kd_kind="kl"``) or the embeddings (``"mse"``);
    * ``"ppem"``: ``L_task(ensemble) + μ Σ_k w_k ||θ_k - θ̄_w||²``;

    averaged over the graphs. ``θ_m = Σ_k w_k θ_{i_k}`` is differentiable in every
    ``θ_{i_k}`` (:func:`~sci_moe.moe.merged_forward`), so the merged expert's gradient
    trains the experts. The model trains on ``config.device`` (the encodings and the
    routing weights follow it; the edge batches are drawn on the CPU).

    Parameters
    ----------
    model : AnyGraphMoE
        Trained in place.
    graphs : list of Data
    encoded : list of Tensor
    routing : Routing
        Graph-level top-k routing of ``graphs`` (held fixed).
    config : MergeConfig
        ``strategy`` one of ``"merge_tuned"``, ``"kdem"``, ``"ppem"``.
    progress : bool, optional
        Overrides ``config.progress``.
    evaluate : callable, optional
        ``evaluate(model) -> dict`` holding ``config.monitor``.
    out_dir : path, optional
        Checkpoint and ``metrics.jsonl`` folder.
    resume : bool
    stop_after : int, optional
        Return after this many steps (a deliberate interruption).

    Returns
    -------
    TrainResult
    """
    if config.strategy not in _TUNED:
        raise ValueError(
            f"strategy {config.strategy!r} has nothing to fine-tune; use one of {_TUNED}"
        )
    if routing.num_tokens != len(graphs) or len(encoded) != len(graphs):
        raise ValueError("routing, graphs and encoded must describe the same graphs")
    if progress is not None:
        config = replace(config, progress=bool(progress))
    selected = [selected_experts(routing, g) for g in range(len(graphs))]

    fixed: dict[str, list] = {}  # the encodings on the engine's device

    def loss_fn(m: AnyGraphMoE, batch: list) -> torch.Tensor:
        bank, total = m.experts, []
        for z, (a, p, n), (ids, w) in zip(fixed["encoded"], batch, selected, strict=True):
            B = len(a)
            zb = z[torch.cat([a, p, n])]
            if config.strategy == "ppem":
                h = ensemble_forward(bank, zb, ids, w)
                loss = link_loss(*h.split(B)) + config.proximity_weight * proximity_loss(
                    bank, ids, w
                )
            else:
                h = merged_forward(bank, zb, ids, w)
                loss = link_loss(*h.split(B))
                if config.strategy == "kdem" and config.kd_weight > 0:
                    with torch.no_grad():
                        t = ensemble_forward(bank, zb, ids, w)
                    if config.kd_kind == "kl":
                        s_m, s_e = _scores(*h.split(B)), _scores(*t.split(B))
                        kd = ensemble_distillation_loss(s_m, s_e, "kl")
                    else:
                        kd = ensemble_distillation_loss(h, t, "mse")
                    loss = loss + config.kd_weight * kd
            total.append(loss + m.l2(ids))
        return torch.stack(total).mean()

    trainer = Trainer(
        model,
        loss_fn,
        link_batches(graphs, config.batch_size, config.seed),
        config,
        evaluate=evaluate,
        out_dir=out_dir,
        meta={
            "model": asdict(model.config),
            "routing": [[int(i) for i in ids] for ids, _ in selected],
            "weights": [[float(v) for v in w] for _, w in selected],
        },
        name=config.strategy,
    )
    fixed["encoded"] = [z.to(trainer.device) for z in encoded]
    res = trainer.fit(resume=resume, stop_after=stop_after)
    model.eval()
    return res


def inference_flops(model: AnyGraphMoE, num_nodes: int, strategy: str, top_k: int) -> float:
    """Floating-point operations to embed one graph of ``n`` nodes under a strategy.

    One expert costs ``L (2 d² + 12 d)`` per node (GEMM, bias, activation, residual,
    LayerNorm with affine); the ensemble runs ``k`` experts and combines
    (``2 k d`` per node); a merge adds ``2 k P`` once per graph (``P`` parameters per
    expert).

    Parameters
    ----------
    model : AnyGraphMoE
    num_nodes : int
    strategy : str
    top_k : int

    Returns
    -------
    float
    """
    _check_strategy(strategy)
    c = model.config
    d, L = c.d_model, c.num_layers
    per_node = L * (2 * d * d + 12 * d)
    if strategy == "ensemble":
        return float(num_nodes * (top_k * per_node + 2 * top_k * d))
    if strategy.startswith("rank") or strategy == "top1" or top_k == 1:
        return float(num_nodes * per_node)
    params = sum(p[0].numel() for p in model.experts.parameters())
    return float(num_nodes * per_node + 2 * top_k * params)
