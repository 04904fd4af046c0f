"""Collectives of the expert-parallel layer: a differentiable uneven all-to-all of rows
and the exchange of per-expert counts.

:func:`all_to_all_rows` wraps :func:`torch.distributed.all_to_all_single` in an autograd
function whose backward is the reverse all-to-all. It replaces the deprecated
``torch.distributed.nn.functional.all_to_all_single`` and avoids
``torch.distributed._functional_collectives.all_to_all_single_autograd``, which is exact
but was measured at 6-12 s per step on gloo.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

__all__ = ["all_to_all_rows", "exchange_counts"]


def _all_to_all(
    x: torch.Tensor,
    output_splits: list[int],
    input_splits: list[int],
    group: dist.ProcessGroup | None,
) -> torch.Tensor:
    x = x.contiguous()
    out = x.new_empty((sum(output_splits), *x.shape[1:]))
    dist.all_to_all_single(
        out,
        x,
        output_split_sizes=output_splits,
        input_split_sizes=input_splits,
        group=group,
    )
    return out


class _AllToAllRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, output_splits, input_splits, group, anchor):
        ctx.output_splits, ctx.input_splits, ctx.group = output_splits, input_splits, group
        return _all_to_all(x, output_splits, input_splits, group)

    @staticmethod
    def backward(ctx, grad):
        # Rows go back where they came from: the splits swap roles.
        dx = _all_to_all(grad, ctx.input_splits, ctx.output_splits, ctx.group)
        return dx, None, None, None, None


def all_to_all_rows(
    x: torch.Tensor,
    output_splits: Sequence[int],
    input_splits: Sequence[int],
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Differentiable all-to-all of rows with uneven splits.

    Rank ``r`` sends rows ``x[sum(input_splits[:s]) : sum(input_splits[:s + 1])]`` to
    rank ``s`` and receives ``output_splits[s]`` rows from each rank ``s``, stacked in
    rank order. The backward pass is the reverse all-to-all of the gradient.

    Parameters
    ----------
    x : Tensor, shape (sum(input_splits), ...)
    output_splits : sequence of int, length W
        Rows received from each rank of ``group`` (host integers: every rank must know
        them before the call, see :func:`exchange_counts`).
    input_splits : sequence of int, length W
        Rows sent to each rank.
    group : ProcessGroup, optional
        Default: the world group.

    Returns
    -------
    Tensor, shape (sum(output_splits), ...)

    Notes
    -----
    In grad mode the result always requires grad, even when ``x`` does not, so that
    every rank takes part in the backward all-to-all: a rank that skipped it (because
    none of *its* inputs needed a gradient) would leave the other ranks waiting forever.
    Every rank must therefore call ``backward`` through the result, or none.
    """
    out_s, in_s = [int(n) for n in output_splits], [int(n) for n in input_splits]
    if len(out_s) != len(in_s):
        raise ValueError(
            f"output_splits has {len(out_s)} entries but input_splits has {len(in_s)}; "
            "give one entry per rank of the group"
        )
    if x.shape[0] != sum(in_s):
        raise ValueError(f"x has {x.shape[0]} rows but input_splits sum to {sum(in_s)}")
    if not torch.is_grad_enabled():
        return _all_to_all(x, out_s, in_s, group)
    anchor = torch.empty(0, device=x.device, requires_grad=True)
    return _AllToAllRows.apply(x, out_s, in_s, group, anchor)


def exchange_counts(
    send_counts: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """All-to-all of per-expert counts (no autograd).

    Parameters
    ----------
    send_counts : Tensor, shape (E,), int64
        Rows this rank sends to each global expert; experts ``[s L, (s + 1) L)`` live on
        rank ``s`` (``L = E / W``).
    group : ProcessGroup, optional

    Returns
    -------
    Tensor, shape (E,), int64
        ``recv[s * L + l]``: rows rank ``s`` sends to this rank's local expert ``l``.
    """
    world = dist.get_world_size(group)
    if send_counts.numel() % world:
        raise ValueError(f"{send_counts.numel()} experts cannot be split evenly over {world} ranks")
    send = send_counts.contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv
