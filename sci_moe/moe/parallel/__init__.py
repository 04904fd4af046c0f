"""Expert parallelism over :mod:`torch.distributed` (gloo on CPU, NCCL on GPUs).

:class:`ExpertParallelMoE` shards the routed experts of an :class:`~sci_moe.moe.MoE`
over the ranks of a process group and moves token rows to them with a differentiable
all-to-all (:func:`all_to_all_rows`); the router and shared experts are replicated and
their gradients are all-reduced by :func:`sync_replicated_grads`. See
``docs/parallel.rst`` for a ``torchrun`` training script.
"""

from .comm import all_to_all_rows, exchange_counts
from .grads import sharded_state_names, sync_replicated_grads
from .layer import ExpertParallelMoE, slice_experts

__all__ = [
    "ExpertParallelMoE",
    "all_to_all_rows",
    "exchange_counts",
    "sharded_state_names",
    "slice_experts",
    "sync_replicated_grads",
]
