"""The :class:`Routing` record that every router returns and every expert bank consumes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

__all__ = ["DispatchPlan", "Routing", "make_plan"]


@dataclass
class DispatchPlan:
    """Token assignments sorted by expert, computed once per :class:`Routing`.

    Attributes
    ----------
    order : Tensor, shape (T * k,), int64
        Flat assignment ids ``t * k + slot`` sorted by expert (stable). Dropped
        assignments (expert id ``E``) come last.
    inverse : Tensor, shape (T * k,), int64
        Inverse permutation of ``order``: ``order[inverse] == arange(T * k)``.
    token : Tensor, shape (T * k,), int64
        Source token of each sorted assignment, ``order // k``.
    expert : Tensor, shape (T * k,), int64
        Expert of each sorted assignment (non-decreasing; ``E`` for dropped ones).
    counts : Tensor, shape (E,), int64
        Number of assignments per expert (dropped ones excluded).
    offsets : Tensor, shape (E,), int32
        Inclusive cumulative ``counts`` (the ``offs`` argument of ``torch._grouped_mm``).
    num_kept : int
        ``counts.sum()``; rows ``num_kept:`` of the sorted order are dropped assignments.
    cache : dict
        Derived index tables that kernels build once per plan (e.g. Triton tile maps).
    """

    order: torch.Tensor
    inverse: torch.Tensor
    token: torch.Tensor
    expert: torch.Tensor
    counts: torch.Tensor
    offsets: torch.Tensor
    num_kept: int
    cache: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Routing:
    """Which experts each token uses and with what weight.

    A ``Routing`` is computed once by a :class:`~sci_moe.moe.Router` and can be passed to
    several expert banks (the sort needed for dispatch is cached in :attr:`plan`).

    Attributes
    ----------
    indices : Tensor, shape (T, k), int64
        Selected expert of each (token, slot). The value ``num_experts`` marks a dropped
        slot (expert-choice routing, capacity overflow); it contributes nothing.
    weights : Tensor, shape (T, k)
        Mixing weight of each (token, slot); zero for dropped slots.
    logits : Tensor, shape (T, E), float32
        Router logits (before any bias or noise used only for selection).
    probs : Tensor, shape (T, E), float32
        Router scores (softmax, sigmoid or normalised softplus of ``logits``), used by
        the auxiliary losses.
    num_experts : int
        Number of routed experts ``E``.
    source : Tensor, shape (T,), int64, optional
        A *gather* routing (a tree level, :class:`~sci_moe.moe.RouterConfig`
        ``mode="tree"``): routed row ``t`` reads input row ``source[t]``, so
        :func:`~sci_moe.moe.dispatch` takes the candidate rows and returns one row per
        routed row. ``None`` (every other mode): row ``t`` is input row ``t``.
    single_expert : int, optional
        Set by constructors that know it (:meth:`one_expert`): every token goes to this
        one expert with weight exactly 1 (``top_k == 1``, all ``indices`` equal to it, all
        ``weights`` 1). :func:`~sci_moe.moe.dispatch` then runs that expert on all rows
        directly (no sort, gather or weighted combine) and :attr:`plan` is built without
        a sort; the values are those of the general path. A flag rather than a check of
        the tensors, so that knowing it costs no host sync on any call; an unmarked
        routing (``None``, every router's) always takes the general path. Set by hand it
        is a promise: only ``top_k == 1`` and the expert's range are checked.
    """

    indices: torch.Tensor
    weights: torch.Tensor
    logits: torch.Tensor
    probs: torch.Tensor
    num_experts: int
    _plan: DispatchPlan | None = field(default=None, init=False, repr=False, compare=False)
    source: torch.Tensor | None = field(default=None, kw_only=True)
    single_expert: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        e = self.single_expert
        if e is None:
            return
        if isinstance(e, bool) or not isinstance(e, int) or not 0 <= e < self.num_experts:
            raise ValueError(
                f"single_expert must be an int in [0, {self.num_experts}) or None, got {e!r}"
            )
        if self.indices.dim() != 2 or self.indices.shape[1] != 1:
            raise ValueError(
                "single_expert marks a top-1 routing; got indices of shape "
                f"{tuple(self.indices.shape)}"
            )

    @property
    def num_tokens(self) -> int:
        """Number of tokens ``T``."""
        return self.indices.shape[0]

    @property
    def top_k(self) -> int:
        """Slots per token ``k``."""
        return self.indices.shape[1]

    @property
    def load(self) -> torch.Tensor:
        """Assignments per expert, shape ``(E,)``, float (dropped slots excluded)."""
        return self.plan.counts.to(torch.float32)

    @property
    def kept(self) -> torch.Tensor:
        """Boolean mask of kept (not dropped) slots, shape ``(T, k)``."""
        return self.indices < self.num_experts

    @property
    def plan(self) -> DispatchPlan:
        """The expert-sorted :class:`DispatchPlan` (computed on first use, then cached)."""
        if self._plan is None:
            if self.single_expert is None:
                self._plan = make_plan(self.indices, self.num_experts)
            else:
                self._plan = _single_expert_plan(
                    self.num_tokens, self.num_experts, self.single_expert, self.indices.device
                )
        return self._plan

    @classmethod
    def one_expert(
        cls,
        num_tokens: int,
        num_experts: int,
        expert: int = 0,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> Routing:
        """Every token to expert ``expert`` with weight 1, marked :attr:`single_expert`.

        The routing of a dense mode before upcycling (every token to expert 0) or of a
        fixed one-expert assignment. :func:`~sci_moe.moe.dispatch` runs the expert on
        all rows directly. The tensors are those of :meth:`from_assignments` with
        ``indices`` all ``expert`` and ``weights`` ones (built without its range check,
        so without a host sync).

        Parameters
        ----------
        num_tokens : int
            ``T``.
        num_experts : int
            ``E``.
        expert : int
            The expert, in ``[0, E)``.
        dtype : torch.dtype
            Of ``weights``; ``probs`` and ``logits`` are in at least float32.
        device : torch.device or str, optional

        Returns
        -------
        Routing
            ``indices`` of shape ``(T, 1)`` all ``expert``, ``weights`` ones of shape
            ``(T, 1)``, ``probs`` one-hot on ``expert`` and ``logits`` ``0`` there,
            ``-1e4`` elsewhere, both ``(T, E)``.

        Examples
        --------
        >>> r = Routing.one_expert(3, 4, 2)
        >>> r.single_expert, r.indices.flatten().tolist(), r.load.tolist()
        (2, [2, 2, 2], [0.0, 0.0, 3.0, 0.0])
        """
        if not isinstance(num_experts, int) or num_experts < 1:
            raise ValueError(f"num_experts must be an int >= 1, got {num_experts!r}")
        if not isinstance(num_tokens, int) or num_tokens < 0:
            raise ValueError(f"num_tokens must be an int >= 0, got {num_tokens!r}")
        indices = torch.full((num_tokens, 1), expert, dtype=torch.long, device=device)
        weights = torch.ones(num_tokens, 1, dtype=dtype, device=device)
        pdtype = torch.promote_types(dtype, torch.float32)
        probs = torch.zeros(num_tokens, num_experts, dtype=pdtype, device=device)
        if 0 <= expert < num_experts:
            probs[:, expert] = 1
        logits = probs.log().clamp_min(-1e4)
        return cls(indices, weights, logits, probs, num_experts, single_expert=expert)

    @classmethod
    def from_assignments(
        cls,
        indices: torch.Tensor,
        weights: torch.Tensor,
        num_experts: int,
        *,
        probs: torch.Tensor | None = None,
        logits: torch.Tensor | None = None,
    ) -> Routing:
        """A routing from fixed expert assignments (no learned router needed).

        For hand-made gates: dense mode before upcycling, time ranges of a diffusion
        mixture, a hierarchy's fixed assignment, a routing read from a file.

        Parameters
        ----------
        indices : Tensor, shape (T, k), integer
            Expert of each (token, slot) in ``[0, num_experts]``; ``num_experts`` marks a
            dropped slot.
        weights : Tensor, shape (T, k)
            Mixing weights (kept as given, with their autograd history); dropped slots
            should carry 0.
        num_experts : int
            ``E``.
        probs : Tensor, shape (T, E), optional
            Router scores for the auxiliary losses and Default MoE. Default: the weights
            scattered into ``(T, E)`` (0 for unused experts), in at least float32.
        logits : Tensor, shape (T, E), optional
            Default: ``log(probs)`` clamped at ``-1e4`` (so that ``softmax(logits)``
            gives back normalised ``probs`` and the z-loss stays finite).

        Returns
        -------
        Routing

        Examples
        --------
        >>> r = Routing.from_assignments(torch.zeros(3, 1, dtype=torch.long),
        ...                              torch.ones(3, 1), num_experts=4)
        >>> r.probs[0].tolist(), r.load.tolist()
        ([1.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0])
        """
        if not isinstance(num_experts, int) or num_experts < 1:
            raise ValueError(f"num_experts must be an int >= 1, got {num_experts!r}")
        if indices.dim() != 2 or weights.shape != indices.shape:
            raise ValueError(
                f"indices and weights must both have shape (T, k); got {tuple(indices.shape)} "
                f"and {tuple(weights.shape)}"
            )
        if indices.dtype.is_floating_point or indices.dtype == torch.bool:
            raise TypeError(f"indices must be an integer tensor, got {indices.dtype}")
        indices = indices.to(torch.long)
        if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) > num_experts):
            raise ValueError(
                f"indices must lie in [0, {num_experts}] ({num_experts} = dropped slot); "
                f"got values in [{int(indices.min())}, {int(indices.max())}]"
            )
        T = indices.shape[0]
        if probs is None:
            dtype = torch.promote_types(weights.dtype, torch.float32)
            full = torch.zeros(T, num_experts + 1, dtype=dtype, device=weights.device)
            probs = full.scatter_add(1, indices, weights.to(dtype))[:, :num_experts]
        if probs.shape != (T, num_experts):
            raise ValueError(
                f"probs must have shape ({T}, {num_experts}), got {tuple(probs.shape)}"
            )
        if logits is None:
            logits = probs.log().clamp_min(-1e4)
        if logits.shape != (T, num_experts):
            raise ValueError(
                f"logits must have shape ({T}, {num_experts}), got {tuple(logits.shape)}"
            )
        return cls(indices, weights, logits, probs, num_experts)

    @classmethod
    def concat(cls, routings: Sequence[Routing]) -> Routing:
        """Stack routings of token groups over consecutive blocks of experts.

        Routing ``g`` (``T_g`` tokens over ``E_g`` experts) is shifted to the experts
        ``[o_g, o_g + E_g)`` with ``o_g = \\sum_{h < g} E_h``; the result routes the
        ``T = \\sum_g T_g`` tokens (group 0 first) over ``E = \\sum_g E_g`` experts:

        .. math::
            i'_{t j} = i_{t j} + o_{g(t)}, \\qquad w'_{t j} = w_{t j}, \\qquad
            p'_{t, o_g + e} = p^{(g)}_{t e}\\ (0 \\text{ outside the block})

        So token groups routed over *disjoint* expert banks (the forward and backward
        vector fields of a bidirectional CDE, per-task or per-direction banks) run as one
        grouped GEMM over one stacked bank. Dropped slots (``i = E_g``) stay dropped
        (``i' = E``). Logits outside a token's block are ``-1e4`` (so
        ``softmax(logits)`` is still its block's ``probs``). With a bank whose experts
        ``[o_g, o_g + E_g)`` are bank ``g`` (e.g. stacked with :func:`torch.cat` of their
        weights), ``dispatch(cat(x_g), Routing.concat(r), bank)`` equals
        ``cat(dispatch(x_g, r_g, bank_g))``. The same routing may appear several times.

        Parameters
        ----------
        routings : sequence of Routing
            At least one; slot counts ``k_g`` may differ (shorter ones are padded with
            dropped slots of weight 0).

        Returns
        -------
        Routing
            ``indices``/``weights`` of shape ``(T, max_g k_g)``, ``probs``/``logits`` of
            shape ``(T, E)``, in the dtypes of ``routings[0]``. Weights, probs and logits
            keep their autograd history.

        Examples
        --------
        >>> a = Routing.from_assignments(torch.tensor([[0], [1]]), torch.ones(2, 1), 2)
        >>> b = Routing.from_assignments(torch.tensor([[2]]), torch.ones(1, 1), 3)
        >>> r = Routing.concat([a, b])
        >>> r.indices.flatten().tolist(), r.num_experts
        ([0, 1, 4], 5)
        """
        routings = list(routings)
        if not routings:
            raise ValueError("Routing.concat needs at least one Routing")
        for g, r in enumerate(routings):
            if not isinstance(r, Routing):
                raise TypeError(f"routings[{g}] is a {type(r).__name__}, not a Routing")
            if r.source is not None:
                raise ValueError(
                    f"routings[{g}] is a gather routing (source set, a tree level); "
                    "Routing.concat stacks token routings only"
                )
        E = sum(r.num_experts for r in routings)
        k = max(r.top_k for r in routings)
        dtype = routings[0].weights.dtype
        pdtype = routings[0].probs.dtype
        indices, weights, probs, logits = [], [], [], []
        offset = 0
        for r in routings:
            T, Eg = r.num_tokens, r.num_experts
            idx = torch.where(r.kept, r.indices + offset, torch.full_like(r.indices, E))
            w = r.weights.to(dtype)
            if r.top_k < k:
                pad = k - r.top_k
                idx = torch.cat([idx, idx.new_full((T, pad), E)], 1)
                w = torch.cat([w, w.new_zeros(T, pad)], 1)
            indices.append(idx)
            weights.append(w)
            left, right = offset, E - offset - Eg
            p = r.probs.to(pdtype)
            probs.append(torch.cat([p.new_zeros(T, left), p, p.new_zeros(T, right)], 1))
            lg = r.logits.to(pdtype)
            logits.append(
                torch.cat([lg.new_full((T, left), -1e4), lg, lg.new_full((T, right), -1e4)], 1)
            )
            offset += Eg
        return cls(torch.cat(indices), torch.cat(weights), torch.cat(logits), torch.cat(probs), E)

    def detach(self) -> Routing:
        """Return a copy whose tensors carry no autograd history."""
        out = Routing(
            self.indices,
            self.weights.detach(),
            self.logits.detach(),
            self.probs.detach(),
            self.num_experts,
            source=self.source,
            single_expert=self.single_expert,
        )
        out._plan = self._plan
        return out


def make_plan(indices: torch.Tensor, num_experts: int) -> DispatchPlan:
    """Sort the ``(T, k)`` assignments of ``indices`` by expert.

    Parameters
    ----------
    indices : Tensor, shape (T, k), int64
        Expert ids in ``[0, num_experts]``; ``num_experts`` marks a dropped slot.
    num_experts : int
        Number of experts ``E``.

    Returns
    -------
    DispatchPlan
    """
    k = indices.shape[1]
    flat = indices.reshape(-1)
    # A stable sort keeps slot order inside an expert deterministic.
    expert, order = torch.sort(flat, stable=True)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    counts_all = torch.bincount(flat, minlength=num_experts + 1)
    counts = counts_all[:num_experts]
    offsets = torch.cumsum(counts, 0).to(torch.int32)
    num_kept = int(offsets[-1]) if num_experts > 0 else 0
    return DispatchPlan(order, inverse, order // k, expert, counts, offsets, num_kept)


def _single_expert_plan(
    num_tokens: int, num_experts: int, expert: int, device: torch.device
) -> DispatchPlan:
    """:func:`make_plan` of ``T`` top-1 assignments all to ``expert``, without a sort.

    The stable sort of equal keys is the identity: ``order = inverse = token = arange(T)``.
    """
    ar = torch.arange(num_tokens, device=device)
    expert_ids = torch.full((num_tokens,), expert, dtype=torch.long, device=device)
    counts = torch.zeros(num_experts, dtype=torch.long, device=device)
    counts[expert] = num_tokens
    offsets = torch.cumsum(counts, 0).to(torch.int32)
    return DispatchPlan(ar, ar, ar, expert_ids, counts, offsets, num_tokens)
