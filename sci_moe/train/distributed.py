"""Data parallelism through ``torchrun``: the process group, sharding and gradient sums.

:func:`init_distributed` reads what ``torchrun`` sets (``WORLD_SIZE``, ``RANK``,
``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``) and starts the process group with NCCL
when CUDA is available and gloo otherwise; alone it starts nothing. The engine then gives
rank ``r`` of ``W`` the positions ``r, r + W, ...`` of every global batch and, after the
backward, :func:`average_gradients` replaces every gradient by the example-weighted mean
over the ranks, so an optimiser step equals the single-process step on the global batch
(for a loss that is a mean over examples). Only rank 0 writes files.

One machine, two processes::

    torchrun --standalone --nproc_per_node 2 -m sci_moe.cli.main train fame --out runs/f

Two machines (run on each, ``--node-rank`` 0 and 1; the endpoint is node 0's address)::

    torchrun --nnodes 2 --nproc_per_node 1 --node-rank 0 \\
        --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29500 --rdzv-id run1 \\
        -m sci_moe.cli.main train fame --out runs/f
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from .._util import resolve_device

__all__ = [
    "DistributedContext",
    "all_reduce_sum",
    "average_gradients",
    "barrier",
    "broadcast_object",
    "current_context",
    "init_distributed",
    "run_device",
]


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
    """The context of an already started process group (a single process if none)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return DistributedContext()
    return DistributedContext(
        dist.get_rank(),
        dist.get_world_size(),
        str(dist.get_backend()),
        int(os.environ.get("LOCAL_RANK", 0)),
    )


def run_device(name: str | None, ctx: DistributedContext | None = None) -> torch.device:
    """The device a training run uses: the one rule of the engine and of every method.

    Parameters
    ----------
    name : str or None
        ``TrainConfig.device``: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, or ``None`` for the
        process group's device.
    ctx : DistributedContext, optional
        The run's process group (default: :func:`current_context`).

    Returns
    -------
    torch.device
        ``None``: ``ctx.device`` (``cuda:LOCAL_RANK`` under NCCL, else the CPU). In a
        group on NCCL every CUDA name means the process's own GPU. Otherwise ``name`` on
        this machine.

    Raises
    ------
    ValueError
        ``"cpu"`` in a group on NCCL (GPUs), or a device this machine lacks
        (:func:`sci_moe._util.resolve_device`'s message).
    """
    ctx = current_context() if ctx is None else ctx
    if name is None:
        return ctx.device
    if ctx.enabled and ctx.backend == "nccl":
        if name == "cpu":
            raise ValueError(
                "this torchrun process group uses NCCL (GPUs), but device='cpu'; train "
                "with device='cuda' (--device cuda), or start torchrun on CPUs (gloo)"
            )
        return ctx.device
    return resolve_device(name)


def init_distributed(backend: str | None = None) -> DistributedContext:
    """Start the process group ``torchrun`` asks for (a no-op for a single process).

    Parameters
    ----------
    backend : {"gloo", "nccl"}, optional
        Default: NCCL when CUDA is available, gloo otherwise.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return current_context()
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return DistributedContext()
    if not dist.is_available():
        raise ValueError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    return current_context()


def all_reduce_sum(values: list[float], ctx: DistributedContext) -> list[float]:
    """Sum floats over the ranks (the identity for a single process)."""
    if not ctx.enabled:
        return list(values)
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t)
    return t.tolist()


def barrier(ctx: DistributedContext) -> None:
    """Wait until every rank gets here (a no-op for a single process).

    The trainer calls it after each checkpoint write, so no rank reads the run's files
    (to resume, or to decide whether a run is fresh) while another still writes them.
    """
    if not ctx.enabled:
        return
    import torch.distributed as dist

    dist.barrier()


def broadcast_object(obj, ctx: DistributedContext, src: int = 0):
    """Rank ``src``'s ``obj`` on every rank (the identity for a single process)."""
    if not ctx.enabled:
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def average_gradients(
    params: Iterable[torch.nn.Parameter], local_size: int, ctx: DistributedContext
) -> int:
    """Replace each gradient by the example-weighted mean over the ranks.

    Every rank's gradient is scaled by its ``local_size`` before the sum and the sum is
    divided by the global size, so uneven shards (the short last batch of an epoch)
    average correctly. A parameter no rank has a gradient for keeps ``grad = None``
    (the optimiser skips it, as it would in one process). One flat all-reduce.

    Returns
    -------
    int
        The global number of examples of the step.
    """
    params = [p for p in params if p.requires_grad]
    if not ctx.enabled:
        return local_size
    import torch.distributed as dist

    has = torch.tensor(
        [p.grad is not None for p in params] + [local_size], dtype=torch.float64, device=ctx.device
    )
    dist.all_reduce(has)
    total = int(has[-1].item())
    live = [p for p, h in zip(params, has[:-1].tolist(), strict=True) if h > 0]
    if not live or total == 0:
        return total
    grads = [
        (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).to(torch.float64)
        for p in live
    ]
    flat = torch.cat(grads) * local_size
    dist.all_reduce(flat)
    flat /= total
    offset = 0
    for p in live:
        n = p.numel()
        g = flat[offset : offset + n].view_as(p).to(p.dtype)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        offset += n
    return total
