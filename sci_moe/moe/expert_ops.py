"""Expert surgery on stacked banks: slice, copy, merge and upcycle experts.

Every built-in :class:`~sci_moe.moe.ExpertBank` keeps its per-expert weights as *direct*
parameters and buffers stacked over experts (leading dimension ``E``); nested modules
(e.g. the frozen base layer of :class:`~sci_moe.moe.LoRAExperts`) are shared by all
experts. The functions here act on exactly those stacked tensors, so they work for any
bank that follows the convention (also field banks such as SPiCE's vector experts).

* :func:`copy_expert` — overwrite experts with one expert, in place (sparse upcycling,
  Komatsuzaki et al. 2023; the parameters stay the same objects, so an optimiser keeps
  training them); optionally the optimiser moments too.
* :func:`upcycle` — a new bank of ``E`` copies of a dense layer or a one-expert bank.
* :func:`merge_experts` — weighted parameter averages of groups of experts (the basis
  of graph expert merging and of FedLEASE-style clustering of LoRA experts); the
  differentiable form of the same map is in :mod:`sci_moe.moe.merging`.
* :func:`slice_experts` — the experts ``[start, stop)`` as a smaller bank (expert
  parallelism keeps each rank's slice).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from .experts import ExpertBank, LinearExperts

__all__ = [
    "copy_expert",
    "merge_experts",
    "slice_experts",
    "stacked_names",
    "upcycle",
]


def stacked_names(bank: nn.Module, num_experts: int | None = None) -> list[str]:
    """Names of the direct parameters and buffers of ``bank`` stacked over experts.

    Parameters
    ----------
    bank : ExpertBank
    num_experts : int, optional
        Default ``bank.num_experts``.

    Returns
    -------
    list of str
        Attribute names (``"weight"``, ``"gate_up"``, ``"lora_a"``...), ``None`` entries
        (absent biases) left out.

    Raises
    ------
    TypeError
        If a direct parameter or buffer is not stacked over the experts (leading
        dimension ``E``): the surgery would be ill-defined.
    """
    E = bank.num_experts if num_experts is None else num_experts
    names = [n for n, _ in bank.named_parameters(recurse=False)]
    names += [n for n, _ in bank.named_buffers(recurse=False)]
    for name in names:
        t = getattr(bank, name)
        if t.dim() == 0 or t.shape[0] != E:
            raise TypeError(
                f"{type(bank).__name__}.{name} has shape {tuple(t.shape)}, not "
                f"({E}, ...): expert surgery needs every direct parameter and buffer of "
                "the bank stacked over experts (put shared tensors in a nested module)"
            )
    return names


def _rebuild(bank: nn.Module, tensors: dict[str, torch.Tensor], num_experts: int) -> nn.Module:
    """A deep copy of ``bank`` whose stacked tensors are replaced by ``tensors``."""
    memo = {}
    for name, piece in tensors.items():
        t = getattr(bank, name)
        if isinstance(t, nn.Parameter):
            piece = nn.Parameter(piece, requires_grad=t.requires_grad)
        # deepcopy returns memo[id(obj)] for obj: the new tensor takes the old one's place.
        memo[id(t)] = piece
    out = copy.deepcopy(bank, memo)
    out.num_experts = num_experts
    return out


def slice_experts(bank: ExpertBank, start: int, stop: int) -> ExpertBank:
    """A bank holding experts ``[start, stop)`` of ``bank`` (a copy; ``bank`` is unchanged).

    Every stacked tensor (:func:`stacked_names`) is sliced along dim 0; nested modules
    are copied whole. The full stacked tensors are not copied.

    Parameters
    ----------
    bank : ExpertBank
        With ``E`` experts.
    start, stop : int
        ``0 <= start < stop <= E``.

    Returns
    -------
    ExpertBank
        Same class, ``stop - start`` experts.
    """
    E = bank.num_experts
    if not 0 <= start < stop <= E:
        raise ValueError(f"need 0 <= start < stop <= {E}, got start={start}, stop={stop}")
    names = stacked_names(bank)
    pieces = {n: getattr(bank, n).detach()[start:stop].clone() for n in names}
    return _rebuild(bank, pieces, stop - start)


def _expert_ids(ids: int | Iterable[int] | None, E: int, what: str) -> list[int]:
    if ids is None:
        return list(range(E))
    if isinstance(ids, torch.Tensor):
        ids = ids.reshape(-1).tolist()
    out = [int(ids)] if isinstance(ids, int) else [int(i) for i in ids]
    bad = [i for i in out if not 0 <= i < E]
    if bad:
        raise ValueError(
            f"{what} {bad} out of range for a bank of {E} experts (they must lie in [0, {E}))"
        )
    return out


@torch.no_grad()
def copy_expert(
    bank: ExpertBank,
    src: int,
    dst: int | Iterable[int] | None = None,
    *,
    source: ExpertBank | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> None:
    """Overwrite experts ``dst`` of ``bank`` with expert ``src`` of ``source``, in place.

    Parameters
    ----------
    bank : ExpertBank
        Modified in place; its parameters stay the same objects.
    src : int
        Expert to copy, in ``source``.
    dst : int or iterable of int, optional
        Experts to overwrite (default: every expert of ``bank``).
    source : ExpertBank, optional
        Bank to copy from (default ``bank``); same class and per-expert shapes, e.g. the
        one-expert bank of a dense model.
    optimizer : Optimizer, optional
        Also copy the per-parameter optimiser state tensors stacked like the parameter
        (AdamW's ``exp_avg``/``exp_avg_sq``); only for ``source is bank``.

    Examples
    --------
    >>> from sci_moe.moe import MLPExperts
    >>> bank = MLPExperts(4, 8, 16)
    >>> copy_expert(bank, 0)  # sparse upcycling: every expert = expert 0
    >>> bool((bank.up[3] == bank.up[0]).all())
    True
    """
    source = bank if source is None else source
    if optimizer is not None and source is not bank:
        raise ValueError("optimizer state can only be copied inside one bank (source=None)")
    names = stacked_names(bank)
    src_names = stacked_names(source)
    if sorted(names) != sorted(src_names) or type(source) is not type(bank):
        raise ValueError(
            f"source {type(source).__name__} {sorted(src_names)} does not match bank "
            f"{type(bank).__name__} {sorted(names)}; copy between banks of one kind"
        )
    (s,) = _expert_ids(src, source.num_experts, "src")
    targets = _expert_ids(dst, bank.num_experts, "dst")
    for name in names:
        t, q = getattr(bank, name), getattr(source, name)
        if t.shape[1:] != q.shape[1:]:
            raise ValueError(
                f"{name}: per-expert shapes differ ({tuple(q.shape[1:])} vs {tuple(t.shape[1:])})"
            )
        # clone: inside one bank q[s] is a view of t (index_put_ refuses overlapping memory)
        t[targets] = q[s].to(t.dtype).clone().expand(len(targets), *t.shape[1:])
        if optimizer is not None:
            for value in optimizer.state.get(t, {}).values():
                if isinstance(value, torch.Tensor) and value.shape == t.shape:
                    value[targets] = value[s].clone().expand(len(targets), *t.shape[1:])


def _merge_weights(weights, n: int, *, normalise: bool = True, dtype=torch.float64, device=None):
    """Validated merge weights of ``n`` experts, shape ``(n,)``; autograd history is kept.

    The one validation (and normalisation ``a_i = w_i / Σ_j w_j``) of the no-grad
    :func:`merge_experts` and of the differentiable merges of :mod:`sci_moe.moe.merging`.
    ``None`` gives uniform weights.
    """
    if weights is None:
        return torch.full((n,), 1.0 / n, dtype=dtype, device=device)
    if isinstance(weights, torch.Tensor):
        w = weights.to(dtype=dtype, device=device).reshape(-1)
    else:
        w = torch.as_tensor(weights, dtype=dtype, device=device).reshape(-1)
    if w.numel() != n:
        raise ValueError(
            f"got {w.numel()} weights for {n} experts; give one weight per selected expert"
        )
    if not normalise:
        return w
    if bool((w < 0).any()) or not float(w.sum()) > 0:
        raise ValueError("merge weights must be >= 0 with a positive sum")
    return w / w.sum()


def _weighted_sum(t: torch.Tensor, ids: list[int] | torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``Σ_k a_k t[ids_k]`` accumulated in at least float32, returned in ``t``'s dtype.

    The one parameter-space merge map of :func:`merge_experts` (no grad) and
    :func:`~sci_moe.moe.merged_parameters` (differentiable in ``t`` and ``a``).
    """
    acc = torch.promote_types(t.dtype, torch.float32)
    a = a.to(t.device, acc)
    return torch.tensordot(a, t[ids].to(acc), dims=1).to(t.dtype)


@torch.no_grad()
def merge_experts(
    bank: ExpertBank,
    groups: Sequence[int] | Sequence[Sequence[int]],
    weights: Sequence[float] | Sequence[Sequence[float]] | torch.Tensor | None = None,
) -> ExpertBank:
    """Weighted parameter averages of groups of experts, as a new bank.

    .. math:: \\theta^{\\mathrm{merged}}_g = \\sum_{i \\in G_g} a_{gi}\\,\\theta_i, \\qquad
       a_{gi} = \\frac{w_{gi}}{\\sum_{j \\in G_g} w_{gj}}

    for every stacked tensor ``θ`` of the bank (nested, shared modules are copied).

    Parameters
    ----------
    bank : ExpertBank
        Left unchanged.
    groups : sequence of int, or sequence of sequences of int
        One group (a flat list of expert ids) gives a one-expert bank; ``G`` groups give
        ``G`` experts, expert ``g`` the average of group ``g``.
    weights : optional
        Non-negative weights per expert of each group (same nesting as ``groups``),
        normalised to sum to one per group; default uniform.

    Returns
    -------
    ExpertBank
        Same class, ``len(groups)`` experts (1 for a flat group), same dtype and device.

    Examples
    --------
    >>> bank = LinearExperts(4, 3, 2)
    >>> merged = merge_experts(bank, [[0, 1], [2, 3]], [[1, 3], [1, 1]])
    >>> torch.allclose(merged.weight[0], 0.25 * bank.weight[0] + 0.75 * bank.weight[1])
    True
    """
    if len(groups) == 0:
        raise ValueError("give at least one group of experts to merge")
    g0 = groups[0]
    flat = isinstance(g0, int) or (isinstance(g0, torch.Tensor) and g0.dim() == 0)
    group_list = [list(groups)] if flat else [list(g) for g in groups]
    if weights is None:
        weight_list = [None] * len(group_list)
    else:
        weight_list = [weights] if flat else list(weights)
        if len(weight_list) != len(group_list):
            raise ValueError(f"got {len(weight_list)} weight lists for {len(group_list)} groups")
    names = stacked_names(bank)
    coefs = []
    for g, w in zip(group_list, weight_list, strict=True):
        ids = _expert_ids(g, bank.num_experts, "expert ids")
        if not ids:
            raise ValueError("every group needs at least one expert")
        coefs.append((ids, _merge_weights(w, len(ids))))
    pieces = {}
    for name in names:
        t = getattr(bank, name).detach()
        pieces[name] = torch.stack([_weighted_sum(t, ids, a) for ids, a in coefs])
    return _rebuild(bank, pieces, len(group_list))


@torch.no_grad()
def upcycle(
    dense: nn.Module,
    num_experts: int,
    noise: float = 0.0,
    generator: torch.Generator | None = None,
) -> ExpertBank:
    """A bank of ``num_experts`` copies of a dense layer (sparse upcycling).

    Komatsuzaki et al. 2023: every expert starts as the trained dense layer; a router
    trained afterwards specialises them. With ``noise > 0`` each copy gets independent
    Gaussian noise ``noise * rms(θ) * N(0, 1)`` per stacked tensor ``θ`` so the copies
    can diverge even under identical gradients.

    Parameters
    ----------
    dense : nn.Linear or ExpertBank
        An ``nn.Linear`` becomes :class:`~sci_moe.moe.LinearExperts`; an expert bank
        with one expert becomes the same class with ``num_experts`` (nested modules
        are copied).
    num_experts : int
    noise : float
        Relative noise scale (0: exact copies).
    generator : torch.Generator, optional
        For the noise.

    Returns
    -------
    ExpertBank
        New parameters; ``dense`` is unchanged.

    Examples
    --------
    >>> bank = upcycle(torch.nn.Linear(8, 4), num_experts=6)
    >>> bank.weight.shape
    torch.Size([6, 4, 8])
    """
    if num_experts < 1:
        raise ValueError(f"num_experts must be >= 1, got {num_experts}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if isinstance(dense, nn.Linear):
        w = dense.weight
        one = LinearExperts(1, dense.in_features, dense.out_features, bias=dense.bias is not None)
        one = one.to(device=w.device, dtype=w.dtype)
        one.weight.copy_(w.unsqueeze(0))
        if dense.bias is not None:
            one.bias.copy_(dense.bias.unsqueeze(0))
        dense = one
    if not isinstance(dense, ExpertBank):
        raise TypeError(
            f"upcycle takes an nn.Linear or a one-expert ExpertBank, got {type(dense).__name__}"
        )
    if dense.num_experts != 1:
        raise ValueError(
            f"upcycle needs a one-expert bank, got {dense.num_experts} experts; use "
            "copy_expert(bank, src) to copy one expert of a larger bank"
        )
    pieces = {}
    for name in stacked_names(dense):
        t = getattr(dense, name).detach()
        rep = t.expand(num_experts, *t.shape[1:]).clone()
        if noise > 0 and t.is_floating_point():
            rms = t.double().square().mean().sqrt().item()
            eps = torch.randn(rep.shape, generator=generator, dtype=torch.float64)
            rep += (noise * rms * eps).to(rep.dtype).to(rep.device)
        pieces[name] = rep
    return _rebuild(dense, pieces, num_experts)
