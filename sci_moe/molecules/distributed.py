"""Data-parallel training of the molecule models (``torchrun`` + DistributedDataParallel).

:func:`init_distributed` reads the environment ``torchrun`` sets (``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``) and starts the process group
with NCCL when CUDA is available and gloo otherwise; without ``WORLD_SIZE > 1`` it
returns a single-process context and starts nothing. :func:`local_order` splits the
global order of an epoch with :class:`torch.utils.data.DistributedSampler` so that the
``k``-th local batches of all ranks together are exactly the ``k``-th global batch of a
single process (rank ``r`` takes the positions ``r, r + W, r + 2W, ...`` of it); with
DDP's gradient averaging the optimiser step equals the single-process step on that
global batch (same loss when every target is finite and the shards have equal sizes;
``tests/molecules/test_distributed.py`` checks the parameters).

Example (two processes on one machine, CPU/gloo or one GPU each)::

    torchrun --standalone --nproc_per_node 2 -m sci_moe.cli.main train spice \\
        --data data/nci_small --out runs/spice_ddp --batch-size 16
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["DistributedContext", "current_context", "init_distributed", "local_order", "wrap_loss"]


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in a data-parallel run.

    Attributes
    ----------
    rank, world_size : int
        ``0`` and ``1`` for a single process.
    backend : str or None
        ``"gloo"``, ``"nccl"`` or ``None`` (not distributed).
    local_rank : int
        GPU index of this process (NCCL).
    """

    rank: int = 0
    world_size: int = 1
    backend: str | None = None
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        """Whether more than one process trains."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the only process that writes checkpoints, results and logs."""
        return self.rank == 0

    @property
    def device(self) -> torch.device:
        """``cuda:LOCAL_RANK`` under NCCL, else the CPU."""
        if self.backend == "nccl":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


def current_context() -> DistributedContext:
    """The context of an already started process group (single process if none)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return DistributedContext()
    backend = str(dist.get_backend())
    return DistributedContext(
        dist.get_rank(), dist.get_world_size(), backend, int(os.environ.get("LOCAL_RANK", 0))
    )


def init_distributed(backend: str | None = None) -> DistributedContext:
    """Start the process group ``torchrun`` asks for (no-op for a single process).

    Parameters
    ----------
    backend : {"gloo", "nccl"}, optional
        Default: NCCL when CUDA is available, gloo otherwise.

    Returns
    -------
    DistributedContext
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return current_context()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistributedContext()
    if not dist.is_available():
        raise ValueError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local)
    dist.init_process_group(backend)
    return current_context()


def local_order(order: list[int], batch_size: int, ctx: DistributedContext):
    """This rank's share of an epoch's order and its local batch size.

    Parameters
    ----------
    order : list of int
        The global order of the training molecules in this epoch (same on every rank).
    batch_size : int
        Global batch size (must be divisible by the world size).
    ctx : DistributedContext

    Returns
    -------
    order : list of int
    batch_size : int
        ``batch_size // world_size``.
    """
    if not ctx.enabled:
        return order, batch_size
    if batch_size % ctx.world_size:
        raise ValueError(
            f"batch_size={batch_size} (global) must be divisible by the {ctx.world_size} "
            "processes; change --batch-size or --nproc_per_node"
        )
    from torch.utils.data import DistributedSampler

    sampler = DistributedSampler(
        order, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=False, drop_last=False
    )
    return [order[i] for i in sampler], batch_size // ctx.world_size


class _Loss(nn.Module):
    """``model.loss`` as a forward, so DDP hooks its backward."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch):
        loss, out = self.model.loss(batch)
        return loss, out.aux_loss.detach()


def wrap_loss(model: nn.Module, ctx: DistributedContext):
    """A callable ``batch -> (loss, aux_loss)``; DDP-wrapped when distributed.

    MoE experts that receive no tokens in a step (and routers of a dense-mode SPiCE) have
    no gradient, so DDP runs with ``find_unused_parameters=True`` for models with MoE
    layers (``config.use_moe``) and without that extra graph traversal otherwise.
    """
    module = _Loss(model)
    if not ctx.enabled:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [ctx.local_rank] if ctx.backend == "nccl" else None
    unused = bool(getattr(getattr(model, "config", None), "use_moe", False))
    return DistributedDataParallel(module, device_ids=ids, find_unused_parameters=unused)


def all_reduce_sum(values: list[float], ctx: DistributedContext) -> list[float]:
    """Sum floats over the ranks (identity for a single process)."""
    if not ctx.enabled:
        return values
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t)
    return t.tolist()
