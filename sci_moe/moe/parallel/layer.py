"""Expert-parallel layers: :func:`expert_parallel` and the deprecated :class:`ExpertParallelMoE`.

There is one MoE forward (:class:`~sci_moe.moe.MoE`); expert parallelism is its
:class:`ExpertParallel` dispatch strategy. This module converts a single-process layer,
moves whole-model checkpoints between the sharded and the single-process layout, and
keeps the old class name as a thin subclass for a release.
"""

from __future__ import annotations

import copy
import warnings

import torch
import torch.distributed as dist
from torch import nn

from ..expert_ops import slice_experts, stacked_names
from ..experts import ExpertBank
from ..layer import MoE
from ..router import Router
from .dispatcher import ExpertParallel, _require_dist

__all__ = [
    "ExpertParallelMoE",
    "expert_parallel",
    "full_state_dict",
    "load_full_state_dict",
    "slice_experts",
]


def expert_parallel(
    moe: MoE, process_group: dist.ProcessGroup | None = None, *, cls: type | None = None
) -> MoE:
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
    cls : type, optional
        Class of the result (a subclass of :class:`~sci_moe.moe.MoE`; default ``MoE``).

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
    if cls is not None:
        out.__class__ = cls
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


class ExpertParallelMoE(MoE):
    """Deprecated: an :class:`~sci_moe.moe.MoE` with the :class:`ExpertParallel` dispatcher.

    Use ``MoE(..., dispatcher=ExpertParallel(group))``, :func:`expert_parallel` or
    ``MoE.from_modules(..., dispatcher=ExpertParallel(group))`` instead. This subclass
    adds only the old constructor and helper names; its forward is ``MoE.forward``, so
    every layer option (Default MoE, specialisation losses, expert choice, capacity...)
    works.

    Parameters
    ----------
    router : Router
        Routes over all ``E`` experts; identical on every rank.
    experts : ExpertBank
        This rank's ``E / W`` experts (see :func:`slice_experts`) or the full bank.
    shared : nn.Module, optional
    process_group : ProcessGroup, optional
    load_balance_coef, z_loss_coef, global_batch_balance, check_finite
        As in :class:`~sci_moe.moe.MoEConfig`.
    """

    def __init__(
        self,
        router: Router,
        experts: ExpertBank,
        shared: nn.Module | None = None,
        process_group: dist.ProcessGroup | None = None,
        *,
        load_balance_coef: float = 0.01,
        z_loss_coef: float = 0.0,
        global_batch_balance: bool = False,
        check_finite: bool = True,
    ) -> None:
        warnings.warn(
            "ExpertParallelMoE is deprecated: use MoE(..., dispatcher=ExpertParallel(group)) "
            "or expert_parallel(moe, group)",
            DeprecationWarning,
            stacklevel=2,
        )
        nn.Module.__init__(self)
        self._from_parts(
            router,
            experts,
            shared,
            load_balance_coef,
            z_loss_coef,
            global_batch_balance,
            None,
            0.0,
            0.0,
            check_finite,
            ExpertParallel(process_group),
        )

    @classmethod
    def from_moe(
        cls, moe: MoE, process_group: dist.ProcessGroup | None = None
    ) -> ExpertParallelMoE:
        """Deprecated alias of :func:`expert_parallel` (keeps every option of ``moe``)."""
        warnings.warn(
            "ExpertParallelMoE.from_moe is deprecated: use expert_parallel(moe, group)",
            DeprecationWarning,
            stacklevel=2,
        )
        return expert_parallel(moe, process_group, cls=cls)

    @property
    def process_group(self):
        """The expert-parallel group."""
        return self.dispatcher.process_group

    @property
    def rank(self) -> int:
        """Position in :attr:`process_group`."""
        return self.dispatcher.rank

    @property
    def world_size(self) -> int:
        """Size of :attr:`process_group`."""
        return self.dispatcher.world_size

    @property
    def num_local_experts(self) -> int:
        """Experts held by this rank, ``E / W``."""
        return self.experts.num_experts

    @property
    def expert_range(self) -> tuple[int, int]:
        """Global ids ``(start, stop)`` of the local experts."""
        return self.dispatcher.expert_range(self)

    def extra_repr(self) -> str:
        start, stop = self.expert_range
        return (
            f"rank={self.rank}, world_size={self.world_size}, "
            f"experts=[{start}, {stop}) of {self.num_experts}"
        )

    def expert_parameters(self):
        """The sharded (per-rank) parameters: the local bank's stacked weights."""
        for t in self.dispatcher.sharded_tensors(self):
            if isinstance(t, nn.Parameter):
                yield t

    def expert_buffers(self):
        """The sharded buffers of the local bank (none for the built-in banks)."""
        for t in self.dispatcher.sharded_tensors(self):
            if not isinstance(t, nn.Parameter):
                yield t

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """:func:`full_state_dict` of this layer (a collective)."""
        return full_state_dict(self)

    def load_full_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """:func:`load_full_state_dict` into this layer."""
        load_full_state_dict(self, state_dict)
