"""Pre-training of the AnyGraph-style MoE on a collection of graphs.

AnyGraph's loop (``main.py``): every ``reassign_every`` steps the training-free router
re-assigns each graph to its most competent expert (with the usage recalibration that
gives under-used experts a chance); in between, each graph's assigned expert takes a
gradient step on the link loss of a batch of that graph's edges. The loop is a run of the
training engine (:class:`sci_moe.train.Trainer`); the re-assignment is a hook whose state
is checkpointed, so an interrupted pre-training resumes exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch_geometric.data import Data

from sci_moe.train import StepInfo, StreamBatches, Trainer, TrainResult
from sci_moe.train import TrainConfig as _BaseConfig

from .model import AnyGraphMoE, link_loss, sample_link_batch

__all__ = ["PretrainConfig", "PretrainResult", "link_batches", "pretrain"]


@dataclass
class _LinkTrainConfig(_BaseConfig):
    """The engine's defaults of every AnyGraph link-prediction run (pre-training and the
    merged experts' fine-tuning): Adam at a constant rate without warm-up or clipping,
    256 edges per graph and step, the best validation AUC kept, no progress bar."""

    batch_size: int = 256
    lr: float = 1e-3
    optimizer: str = "adam"
    schedule: str = "constant"
    warmup: float = 0.0
    grad_clip: float | None = None
    monitor: str = "val_auc"
    mode: str = "max"
    progress: bool = False


@dataclass
class PretrainConfig(_LinkTrainConfig):
    """Settings of :func:`pretrain` (the engine's options plus the below).

    Parameters
    ----------
    steps : int
        Optimisation steps (each takes one batch from every graph), >= 1.
    batch_size : int
        Edges per graph and step (as many negatives).
    lr : float
        Adam learning rate (constant by default, as AnyGraph's).
    reassign_every : int
        Steps between router re-assignments.
    recalibration : float
        ``ρ`` of the usage recalibration (AnyGraph's ``reca_range``).
    """

    steps: int = 300
    eval_every: int = 50
    reassign_every: int = 50
    recalibration: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.reassign_every, bool) or not isinstance(self.reassign_every, int):
            raise ValueError(f"reassign_every must be an integer, got {self.reassign_every!r}")
        if self.reassign_every < 1:
            raise ValueError(f"reassign_every must be >= 1, got {self.reassign_every}")
        if not 0 <= self.recalibration:
            raise ValueError(f"recalibration must be >= 0, got {self.recalibration}")


@dataclass
class PretrainResult:
    """What :func:`pretrain` returns.

    Attributes
    ----------
    encoded : list of Tensor
        The fixed input embeddings of each graph, shape ``(n_g, d)``, on the model's
        device.
    assignments : list of list of int
        The expert of every graph at each re-assignment (all pieces of a resumed run).
    losses : list of float
        Mean link loss over the graphs of each step run by this call.
    train : TrainResult or None
        The engine's account of the run.
    """

    encoded: list
    assignments: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    train: TrainResult | None = None


def link_batches(graphs: list[Data], batch_size: int, seed: int) -> StreamBatches:
    """Per step, one link batch ``(anchors, positives, negatives)`` of every graph."""

    def sample(gen: torch.Generator, n: int) -> list:
        return [sample_link_batch(d, n, gen) for d in graphs]

    return StreamBatches(sample, batch_size, seed=seed)


class _Assignments:
    """The expert of every graph, re-assigned by the competence router (checkpointed)."""

    def __init__(self, model, encoded, graphs, config, fixed) -> None:
        self.model, self.encoded, self.graphs, self.config = model, encoded, graphs, config
        self.fixed = list(fixed) if fixed is not None else None
        self.current: list[int] | None = self.fixed
        self.history: list[list[int]] = []

    def get(self) -> list[int]:
        if self.current is None:  # the first step of a fresh run
            self.reassign(0)
        return self.current

    def reassign(self, step: int) -> None:
        was = self.model.training
        self.model.eval()
        routing = self.model.route_graphs(
            self.encoded,
            self.graphs,
            1,
            recalibration=self.config.recalibration,
            seed=self.config.seed + step,
        )
        self.model.train(was)
        self.current = routing.indices[:, 0].tolist()
        self.history.append(list(self.current))

    def after_step(self, info: StepInfo) -> None:
        with torch.no_grad():
            for e in self.current:
                self.model.usage[e] += self.config.batch_size
        if self.fixed is None and info.step % self.config.reassign_every == 0:
            if info.step < self.config.steps:
                self.reassign(info.step)

    def state_dict(self) -> dict:
        return {"current": self.current, "history": self.history}

    def load_state_dict(self, state: dict) -> None:
        self.current = None if state["current"] is None else list(state["current"])
        self.history = [list(h) for h in state["history"]]


def pretrain(
    model: AnyGraphMoE,
    graphs: list[Data],
    config: PretrainConfig | None = None,
    encoded: list[torch.Tensor] | None = None,
    assignment: list[int] | None = None,
    progress: bool | None = None,
    *,
    evaluate: Callable[[AnyGraphMoE], dict] | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
) -> PretrainResult:
    """Train the experts of ``model`` on ``graphs`` with competence routing (in place).

    One engine run (:class:`sci_moe.train.Trainer`): per step, each graph's assigned
    expert takes the link loss of a fresh batch of that graph's edges (the mean over the
    graphs is minimised); every ``reassign_every`` steps the router re-assigns the
    graphs (a hook; the assignment is checkpointed, so ``resume`` continues exactly).
    The model trains on ``config.device``; the encodings follow it, the edge batches are
    drawn on the CPU and moved by the engine (the same draws on every device).

    Parameters
    ----------
    model : AnyGraphMoE
    graphs : list of Data
        Link-split graphs (:func:`~sci_moe.graphs.link_split`).
    config : PretrainConfig, optional
    encoded : list of Tensor, optional
        Precomputed :meth:`AnyGraphMoE.encode` of each graph (any device: they are moved
        to ``config.device`` with the model).
    assignment : list of int, optional
        A fixed expert per graph (no re-assignment; e.g. one expert per family).
    progress : bool, optional
        Overrides ``config.progress``.
    evaluate : callable, optional
        ``evaluate(model) -> dict`` holding ``config.monitor`` (for example the AUC on
        validation graphs), every ``eval_every`` steps.
    out_dir : path, optional
        Checkpoint and ``metrics.jsonl`` folder.
    resume : bool
        Continue the run in ``out_dir``.
    stop_after : int, optional
        Return after this many steps (a deliberate interruption).

    Returns
    -------
    PretrainResult
    """
    config = config or PretrainConfig()
    if progress is not None:
        config = replace(config, progress=bool(progress))
    if not graphs:
        raise ValueError("give at least one graph to train on")
    if encoded is None:
        encoded = [model.encode(d, seed=config.seed) for d in graphs]
    if assignment is not None and len(assignment) != len(graphs):
        raise ValueError(f"assignment needs one expert per graph ({len(graphs)})")
    assign = _Assignments(model, [], graphs, config, assignment)
    losses: list[float] = []

    def loss_fn(m: AnyGraphMoE, batch: list) -> tuple[torch.Tensor, dict]:
        total = []
        for z, (a, p, n), e in zip(assign.encoded, batch, assign.get(), strict=True):
            h = m.experts.forward_expert(e, z[torch.cat([a, p, n])])
            total.append(link_loss(*h.split(len(a))) + m.l2(e))
        return torch.stack(total).mean(), {}

    trainer = Trainer(
        model,
        loss_fn,
        link_batches(graphs, config.batch_size, config.seed),
        config,
        evaluate=evaluate,
        out_dir=out_dir,
        hooks=[assign.after_step, lambda info: losses.append(info.metrics["loss"])],
        stateful={"assignments": assign},
        meta={"model": _model_meta(model), "graphs": [_graph_meta(d) for d in graphs]},
        name="pretrain",
    )
    # the engine has put the model on config.device: the fixed inputs follow it
    encoded = [z.to(trainer.device) for z in encoded]
    assign.encoded = encoded
    res = trainer.fit(resume=resume, stop_after=stop_after)
    model.eval()
    return PretrainResult(encoded, assign.history, losses, res)


def _model_meta(model: AnyGraphMoE) -> dict:
    return asdict(model.config)


def _graph_meta(data: Data) -> list:
    return [str(getattr(data, "name", "")), int(data.num_nodes), int(data.edge_index.shape[1])]
