"""Gradient synchronisation for models with expert-parallel :class:`~sci_moe.moe.MoE` layers."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..layer import MoE

__all__ = ["sharded_state_names", "sync_replicated_grads"]

_REDUCTIONS = ("sum", "mean")


def _sharded_ids(model: nn.Module) -> set[int]:
    ids = set()
    for m in model.modules():
        if isinstance(m, MoE) and m.dispatcher.shards_experts:
            ids.update(id(t) for t in m.dispatcher.sharded_tensors(m))
    return ids


def sharded_state_names(model: nn.Module) -> list[str]:
    """Names of the parameters and buffers that differ between ranks (expert slices).

    Pass them to ``DistributedDataParallel._set_params_and_buffers_to_ignore_for_model``
    so that DDP neither broadcasts nor averages them (see ``docs/parallel.rst``), or use
    them to split a checkpoint.

    Parameters
    ----------
    model : nn.Module
        Any module containing expert-parallel layers
        (:class:`~sci_moe.moe.MoE` with the :class:`ExpertParallel` dispatcher).

    Returns
    -------
    list of str
        Fully qualified names, as in ``model.state_dict()``.
    """
    ids = _sharded_ids(model)
    names = [n for n, p in model.named_parameters() if id(p) in ids]
    names += [n for n, b in model.named_buffers() if id(b) in ids]
    return names


@torch.no_grad()
def sync_replicated_grads(
    model: nn.Module,
    process_group: dist.ProcessGroup | None = None,
    reduction: str = "sum",
) -> None:
    """All-reduce the gradients of every replicated parameter; call after ``backward``.

    Replicated = every trainable parameter of ``model`` that is not an expert slice of an
    expert-parallel layer (routers, shared experts, and the rest of the model).
    Expert slices already hold the contributions of all ranks after ``backward`` (the
    reverse all-to-all delivers them) and are not communicated. Gradients that are
    ``None`` on a rank count as zero (and are set), so the collective is the same on
    every rank. One flat all-reduce per (device, dtype).

    Parameters
    ----------
    model : nn.Module
    process_group : ProcessGroup, optional
        The group the layers shard their experts over (default: the world group);
        all expert-parallel layers of ``model`` must use it.
    reduction : {"sum", "mean"}
        ``"sum"``: every gradient becomes that of :math:`\\sum_r L_r`, the sum of the
        ranks' losses (equal to the single-process gradient on the concatenated batch
        when each ``L_r`` sums over its tokens). ``"mean"``: that of
        :math:`\\frac{1}{W}\\sum_r L_r` (the DDP convention), i.e. replicated gradients
        are averaged **and expert gradients are divided by** ``W``.
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    world = dist.get_world_size(process_group)
    sharded = _sharded_ids(model)
    buckets: dict[tuple, list[nn.Parameter]] = {}
    for p in model.parameters():
        if p.requires_grad and id(p) not in sharded:
            buckets.setdefault((p.device, p.dtype), []).append(p)
    for params in buckets.values():
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=process_group)
        if reduction == "mean":
            flat /= world
        for p, piece in zip(params, flat.split([p.numel() for p in params]), strict=True):
            if p.grad is None:
                p.grad = piece.view_as(p).clone()
            else:
                p.grad.copy_(piece.view_as(p))
    if reduction == "mean":
        for p in model.parameters():
            if id(p) in sharded and p.grad is not None:
                p.grad /= world
