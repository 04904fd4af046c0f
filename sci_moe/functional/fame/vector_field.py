"""Mixture-of-experts vector fields for neural CDEs, mixed once per path (FAME)."""

from __future__ import annotations

import torch

from sci_moe.moe import MLPExperts, RoutedModule, Router, Routing

__all__ = ["MixtureVectorField"]


class MixtureVectorField(RoutedModule):
    """``G`` groups (e.g. CDE directions) of ``K`` expert vector fields, mixed per path.

    For a path ``j`` with summary ``s_j`` the mixing weights are computed **once**,
    ``pi_j = softmax(W s_j)`` (the core's :class:`~sci_moe.moe.Router` in dense mode),
    and held fixed along the whole solve; the vector field of group ``g`` is

    .. math::
        f^{(j)}_g(z) = \\sum_{k=1}^{K} \\pi_{jk}\\, f_{\\theta_{gk}}(z), \\qquad
        f_{\\theta}(z) = W_2 \\tanh(W_1 z + b_1) + b_2 \\in \\mathbb{R}^{h \\times c}

    (Gao, Chen & Zhang, "FAME", NeurIPS 2025). Every expert is bounded and Lipschitz in
    ``z``, so is the mixture. FAME's routed layer: a :class:`~sci_moe.moe.RoutedModule`
    whose :meth:`route` returns the routing stored by :meth:`set_paths` (the router reads
    the path summaries, not the CDE state) and whose experts, all ``G K`` of them, sit in
    one :class:`~sci_moe.moe.MLPExperts` bank (experts ``[gK, (g+1)K)`` are group
    ``g``'s), so every evaluation is one :func:`~sci_moe.moe.dispatch` (grouped GEMMs)
    with the stored routing (its dispatch plan is computed once per solve). The CDE solver
    calls :meth:`vector_field`.

    Parameters
    ----------
    hidden : int
        CDE state size ``h``.
    channels : int
        Control-path channels ``c``.
    num_experts : int
        ``K``.
    expert_hidden : int
        Width of each expert MLP.
    summary_size : int
        Size of the router input ``s_j``.
    groups : int
        ``G`` (2 for a bidirectional CDE); every group uses the same ``pi_j``.

    Attributes
    ----------
    router : sci_moe.moe.Router
        ``mode="dense"``, ``weight`` of shape ``(K, summary_size)``.
    experts : sci_moe.moe.MLPExperts
        ``G K`` experts ``h -> expert_hidden -> h c`` (``num_experts`` of the layer is
        ``G K``; ``experts_per_group`` is ``K``).
    mixture : Routing or None
        The per-path routing of the last :meth:`set_paths` (``weights`` = ``pi``).
    """

    def __init__(
        self,
        hidden: int,
        channels: int,
        num_experts: int,
        expert_hidden: int,
        summary_size: int,
        groups: int = 2,
    ) -> None:
        super().__init__()
        if min(hidden, channels, num_experts, expert_hidden, summary_size, groups) < 1:
            raise ValueError(
                "hidden, channels, num_experts, expert_hidden, summary_size, "
                "groups must all be >= 1"
            )
        self.hidden, self.channels, self.groups = hidden, channels, groups
        self.d_model = hidden
        self.experts_per_group = num_experts
        self.router = Router(d_model=summary_size, num_experts=num_experts, mode="dense")
        self.experts = MLPExperts(
            groups * num_experts,
            hidden,
            expert_hidden,
            activation="tanh",
            bias=True,
            d_out=hidden * channels,
        )
        self._routing: Routing | None = None
        self.mixture: Routing | None = None

    def set_paths(self, summary: torch.Tensor) -> Routing:
        """Compute the per-path weights once; call before every solve.

        Parameters
        ----------
        summary : Tensor, shape (P, summary_size)
            One summary per path. The CDE state then has ``G P`` rows: group 0's ``P``
            paths first.

        Returns
        -------
        Routing
            The per-path dense routing (``weights`` = ``pi``, shape ``(P, K)``).
        """
        r = self.router(summary)
        self.mixture = r
        self._routing = Routing.concat([r] * self.groups)
        return r

    def route(self, x: torch.Tensor) -> Routing:
        """The routing stored by :meth:`set_paths` for the ``(G P, hidden)`` states ``x``."""
        if self._routing is None or self._routing.num_tokens != x.shape[0]:
            raise ValueError(
                "call set_paths(summary) with one summary per path before solving "
                f"(state has {x.shape[0]} rows)"
            )
        return self._routing

    def vector_field(self, t: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Vector field ``f(z)`` as the CDE solver calls it.

        Parameters
        ----------
        t : Tensor, scalar
            Unused (time enters through the path's time channel).
        z : Tensor, shape (G P, hidden)

        Returns
        -------
        Tensor, shape (G P, hidden, channels)
        """
        return self(z).view(z.shape[0], self.hidden, self.channels)
