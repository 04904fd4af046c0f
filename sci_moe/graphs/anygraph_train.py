"""Pre-training of the AnyGraph-style MoE on a collection of graphs.

AnyGraph's loop (``main.py``): every ``reassign_every`` steps the training-free router
re-assigns each graph to its most competent expert (with the usage recalibration that
gives under-used experts a chance); in between, each graph's assigned expert takes a
gradient step on the link loss of a batch of that graph's edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch_geometric.data import Data

from .anygraph import AnyGraphMoE, link_loss, sample_link_batch

__all__ = ["PretrainConfig", "PretrainResult", "pretrain"]


@dataclass
class PretrainConfig:
    """Settings of :func:`pretrain`.

    Attributes
    ----------
    steps : int
        Optimisation steps (each takes one batch from every graph).
    batch_size : int
        Edges per graph and step (as many negatives).
    lr : float
        Adam learning rate.
    reassign_every : int
        Steps between router re-assignments.
    recalibration : float
        ``ρ`` of the usage recalibration (AnyGraph's ``reca_range``).
    seed : int
    """

    steps: int = 300
    batch_size: int = 256
    lr: float = 1e-3
    reassign_every: int = 50
    recalibration: float = 0.2
    seed: int = 0

    def __post_init__(self):
        if self.steps < 0 or self.batch_size < 1 or self.lr <= 0 or self.reassign_every < 1:
            raise ValueError(
                "need steps >= 0, batch_size >= 1, lr > 0, reassign_every >= 1; got "
                f"{self.steps}, {self.batch_size}, {self.lr}, {self.reassign_every}"
            )


@dataclass
class PretrainResult:
    """What :func:`pretrain` returns.

    Attributes
    ----------
    encoded : list of Tensor
        The fixed input embeddings of each graph, shape ``(n_g, d)``.
    assignments : list of list of int
        The expert of every graph at each re-assignment.
    losses : list of float
        Mean link loss per step.
    """

    encoded: list
    assignments: list = field(default_factory=list)
    losses: list = field(default_factory=list)


def pretrain(
    model: AnyGraphMoE,
    graphs: list[Data],
    config: PretrainConfig | None = None,
    encoded: list[torch.Tensor] | None = None,
    assignment: list[int] | None = None,
    progress: bool = False,
) -> PretrainResult:
    """Train the experts of ``model`` on ``graphs`` with competence routing (in place).

    Parameters
    ----------
    model : AnyGraphMoE
    graphs : list of Data
        Link-split graphs (:func:`~sci_moe.graphs.link_split`).
    config : PretrainConfig, optional
    encoded : list of Tensor, optional
        Precomputed :meth:`AnyGraphMoE.encode` of each graph.
    assignment : list of int, optional
        A fixed expert per graph (no re-assignment; e.g. one expert per family).
    progress : bool
        Show a tqdm bar.

    Returns
    -------
    PretrainResult
    """
    config = config or PretrainConfig()
    if not graphs:
        raise ValueError("give at least one graph to train on")
    if encoded is None:
        encoded = [model.encode(d, seed=config.seed) for d in graphs]
    if assignment is not None and len(assignment) != len(graphs):
        raise ValueError(f"assignment needs one expert per graph ({len(graphs)})")
    gen = torch.Generator().manual_seed(config.seed)
    opt = torch.optim.Adam(model.experts.parameters(), lr=config.lr)
    result = PretrainResult(encoded=encoded)
    steps = range(config.steps)
    if progress:
        from .._util import progress_bar

        steps = progress_bar(steps, desc="pretrain")
    model.train()
    for step in steps:
        if assignment is None and step % config.reassign_every == 0:
            model.eval()
            routing = model.route(
                encoded, graphs, 1, recalibration=config.recalibration, seed=config.seed + step
            )
            model.train()
            current = routing.indices[:, 0].tolist()
            result.assignments.append(current)
        elif assignment is not None:
            current = list(assignment)
        opt.zero_grad()
        total = 0.0
        for z, data, e in zip(encoded, graphs, current, strict=True):
            a, p, n = sample_link_batch(data, config.batch_size, gen)
            h = model.experts.forward_expert(e, z[torch.cat([a, p, n])])
            ha, hp, hn = h.split(config.batch_size)
            loss = link_loss(ha, hp, hn) + model.l2(e)
            loss.backward()
            total += float(loss.detach())
            model.usage[e] += config.batch_size
        opt.step()
        result.losses.append(total / len(graphs))
    model.eval()
    return result
