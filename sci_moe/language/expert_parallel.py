"""Expert parallelism composed with the engine's data parallelism for the language model.

Replicated parameters are averaged over the ranks and expert slices scaled to the global
mean (:func:`expert_data_parallel_sync`, the engine's ``grad_sync``); replicas sum their
layers' batch statistics over the ranks (``ReplicatedDispatch``); every rank checkpoints
its own expert slices (``ExpertParallelTrainer``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch

from .._util import CheckpointError, previous_path
from ..moe import LocalDispatch
from ..train import (
    CHECKPOINT_NAME,
    Trainer,
    TrainResult,
    all_reduce_sum,
    broadcast_object,
)

__all__ = ["ExpertParallelTrainer", "ReplicatedDispatch", "expert_data_parallel_sync"]


class ReplicatedDispatch(LocalDispatch):
    """Local dispatch in a data-parallel replica: the batch statistics of a layer
    (Default MoE's EMA, the loads of bias balancing) are summed over the ranks, as the
    single-process layer would compute them on the global batch."""

    def reduce_batch(self, t: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        out = t.detach().clone()
        dist.all_reduce(out)
        return out

    def __repr__(self) -> str:
        return "ReplicatedDispatch()"


def expert_data_parallel_sync(model: torch.nn.Module, grad_clip: float | None = None) -> Callable:
    """The engine's ``grad_sync`` for a model with expert-parallel MoE layers.

    Replicated gradients are averaged over the ranks and expert-slice gradients (which
    hold the sum of every rank's loss after ``backward``) divided by the number of ranks
    (:func:`~sci_moe.moe.parallel.sync_replicated_grads` with ``reduction="mean"``): the
    gradient of the mean loss over the global batch when every rank has the same number
    of examples, which the function checks.

    The engine's clipping sees only this rank's parameters, which under expert
    parallelism lack the other ranks' expert slices; with ``grad_clip`` the gradients
    are therefore clipped here, by the norm over the whole model (the replicated
    parameters once, every rank's expert slices), exactly as
    :func:`torch.nn.utils.clip_grad_norm_` on the single-process model. The engine's
    own clipping (by a norm no larger than the clipped global one) then leaves them
    unchanged.

    Parameters
    ----------
    model : torch.nn.Module
    grad_clip : float, optional
        The run's ``grad_clip``.

    Returns
    -------
    callable
        ``grad_sync(params, local_size, ctx) -> global_size`` for
        :class:`~sci_moe.train.Trainer`.
    """
    from ..moe.parallel import sharded_state_names, sync_replicated_grads

    names = set(sharded_state_names(model))
    sharded = [p for n, p in model.named_parameters() if n in names and p.requires_grad]
    replicated = [p for n, p in model.named_parameters() if n not in names and p.requires_grad]

    def sq(params) -> float:
        return float(sum(p.grad.double().pow(2).sum() for p in params if p.grad is not None))

    def grad_sync(params, local_size: int, ctx) -> int:
        sizes = all_reduce_sum([float(local_size), float(local_size) ** 2], ctx)
        total, squares = int(sizes[0]), sizes[1]
        if squares * ctx.world_size != total * total:  # not every share equal
            raise ValueError(
                "expert parallelism needs the same number of examples on every rank; "
                f"make batch_size divisible by the {ctx.world_size} processes"
            )
        sync_replicated_grads(model, reduction="mean")
        if grad_clip is not None:
            experts = all_reduce_sum([sq(sharded)], ctx)[0]
            norm = math.sqrt(sq(replicated) + experts)
            coef = min(1.0, grad_clip / (norm + 1e-6))
            if math.isfinite(norm) and coef < 1.0:
                for p in (*replicated, *sharded):
                    if p.grad is not None:
                        p.grad.mul_(coef)
        return total

    return grad_sync


class ExpertParallelTrainer(Trainer):
    """The engine with one checkpoint per rank (each holds its own expert slices)."""

    @property
    def checkpoint_path(self) -> Path | None:
        if self.out_dir is None:
            return None
        if self.ctx.rank == 0:
            return self.out_dir / CHECKPOINT_NAME
        return self.out_dir / f"expert_rank{self.ctx.rank}" / CHECKPOINT_NAME

    def save_checkpoint(self) -> None:
        if self.checkpoint_path is None:
            return
        from .._util import save_verified

        save_verified(self.checkpoint_path, self._state())

    def fit(self, resume: bool = False, *, stop_after: int | None = None) -> TrainResult:
        path = self.checkpoint_path
        mine = path is not None and (path.exists() or previous_path(path).exists())
        if not resume and all_reduce_sum([float(mine)], self.ctx)[0]:
            raise ValueError(
                f"{self.out_dir} already holds the checkpoints of an expert-parallel run "
                "(checkpoint.pt, expert_rank*/); resume it (resume=True, --resume) or "
                "choose another folder"
            )
        return super().fit(resume, stop_after=stop_after)

    def _restore(self) -> int | None:
        step = super()._restore()
        mine = -1 if step is None else step
        first = broadcast_object(mine, self.ctx)
        if all_reduce_sum([float(mine != first)], self.ctx)[0]:
            raise CheckpointError(
                f"the ranks' checkpoints in {self.out_dir} are not at the same step (rank "
                f"{self.ctx.rank}: {step}, rank 0: {None if first < 0 else first}); resume "
                "with the number of processes that wrote them, or start a new run"
            )
        return step
