"""Expert-parallel layers: :func:`expert_parallel` and whole-model checkpoints.

There is one MoE forward (:class:`~sci_moe.moe.MoE`); expert parallelism is its
:class:`ExpertParallel` dispatch strategy. This module converts a single-process layer,
and moves whole-model checkpoints between the sharded and the single-process layout.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

from ..expert_ops import slice_experts, stacked_names
from ..layer import MoE
from .dispatcher import ExpertParallel, _require_dist

__all__ = ["expert_parallel", "full_state_dict", "load_full_state_dict"]


def expert_parallel(moe: MoE, process_group: dist.ProcessGroup | None = None) -> MoE:
    """Shard a single-process layer: a copy that keeps this rank's slice of the experts.

    Everything else (router, shared experts, Default-MoE EMA, loss coefficients, the
    config) is copied; the bank of the copy holds experts ``[r E/W, (r + 1) E/W)``
    (:func:`slice_experts`, the full stacked tensors are not copied) and its dispatcher is
    :class:`ExpertParallel`. ``moe`` must be identical on all ranks (same seed or a
    broadcast state dict) and is left unchanged.

    Parameters
    ----------
    moe : MoE
    process_group : ProcessGroup, optional
        Default: the world group.

    Returns
    -------
    MoE
    """
    if not isinstance(moe, MoE):
        raise TypeError(f"expert_parallel needs an MoE, got {type(moe).__name__}")
    _require_dist()
    W, r = dist.get_world_size(process_group), dist.get_rank(process_group)
    E = moe.num_experts
    if E % W:
        raise ValueError(
            f"num_experts={E} is not divisible by the {W} ranks of the process group; "
            "choose E as a multiple of the expert-parallel world size"
        )
    L = E // W
    memo = {id(moe.experts): slice_experts(moe.experts, r * L, (r + 1) * L)}
    out = copy.deepcopy(moe, memo)
    out._adopt(ExpertParallel(process_group))
    return out


def _sharded_layers(model: nn.Module):
    for prefix, m in model.named_modules():
        if isinstance(m, MoE) and m.dispatcher.shards_experts:
            yield prefix, m


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """State dict of ``model`` with every expert-parallel bank all-gathered (a collective).

    The result is the state dict of the equivalent single-process model; call it on
    every rank (e.g. save it from rank 0).
    """
    sd = model.state_dict()
    for prefix, m in _sharded_layers(model):
        d = m.dispatcher
        for name in stacked_names(m.experts):
            key = f"{prefix}.experts.{name}" if prefix else f"experts.{name}"
            if key not in sd:
                continue
            local = sd[key].contiguous()
            parts = [torch.empty_like(local) for _ in range(d.world_size)]
            dist.all_gather(parts, local, group=d.process_group)
            sd[key] = torch.cat(parts)
    return sd


def load_full_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
    """Load a single-process state dict into a model with expert-parallel layers.

    Each rank keeps its slice of every stacked expert tensor (no communication).
    """
    sd = dict(state_dict)
    for prefix, m in _sharded_layers(model):
        start, stop = m.dispatcher.expert_range(m)
        for name in stacked_names(m.experts):
            key = f"{prefix}.experts.{name}" if prefix else f"experts.{name}"
            if key in sd:
                full = sd[key]
                if full.shape[0] != m.num_experts:
                    raise ValueError(f"{key} has {full.shape[0]} experts, expected {m.num_experts}")
                sd[key] = full[start:stop]
    model.load_state_dict(sd)
