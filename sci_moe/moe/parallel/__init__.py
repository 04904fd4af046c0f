"""Expert parallelism over :mod:`torch.distributed` (gloo on CPU, NCCL on GPUs).

:class:`ExpertParallel` is a dispatch strategy of the one :class:`~sci_moe.moe.MoE`
layer: ``MoE(..., dispatcher=ExpertParallel(group))`` or :func:`expert_parallel` shards
the routed experts over the ranks of a process group and moves token rows to them with
a differentiable all-to-all (:func:`all_to_all_rows`); the router and shared experts are
replicated and their gradients are all-reduced by :func:`sync_replicated_grads`. See
``docs/parallel.rst`` for a ``torchrun`` training script.
"""

from .comm import all_to_all_rows, exchange_counts
from .dispatcher import ExpertParallel
from .grads import sharded_state_names, sync_replicated_grads
from .layer import expert_parallel, full_state_dict, load_full_state_dict

__all__ = [
    "ExpertParallel",
    "all_to_all_rows",
    "exchange_counts",
    "expert_parallel",
    "full_state_dict",
    "load_full_state_dict",
    "sharded_state_names",
    "sync_replicated_grads",
]
