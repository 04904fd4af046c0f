"""Mixture of experts over diffusion time (ScoreMD's ranged models, on ``sci_moe.moe`` gating).

The score (or energy) is :math:`s(x, t) = \\sum_e w_e(t)\\, s_e(x, t)` with gates that depend
on ``t`` only. ``gating="ranged"`` reproduces ScoreMD: expert ``e`` owns the time range
``[lo_e, hi_e]`` and its weight is 1 inside and 0 outside, so only the small-``t`` energy
expert is active near ``t = 0`` and it alone is the MD force field. ``gating="soft"`` uses a
:class:`sci_moe.moe.Router` in ``mode="dense"`` on :func:`~.sde.time_features` (every expert
with its softmax weight), trained jointly. Both return a :class:`sci_moe.moe.Routing`
(``E`` slots with dense ``weights``; ranged gating marks inactive experts as dropped
slots); evaluation skips experts whose weight is zero for every sample.

:class:`TimeMixture` is not a :class:`sci_moe.moe.RoutedModule`: no router chooses
experts per token (ranged gating is a fixed partition of time, soft gating weights every
expert), its experts are whole networks of two inputs (positions and time) whose energy
and score are both mixed with the same gates, and the routed-module contract (experts
read the token row, ``E(x_t)``) has no per-token side input. It exposes its one path
through :meth:`TimeMixture.routed_paths` for the balancing and MoE-CAP tools.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ...moe import RoutedPath, Router, RouterConfig, Routing
from .sde import n_time_features, time_features

__all__ = ["RangeGate", "TimeMixture"]


def _range_index(ranges, t: torch.Tensor) -> torch.Tensor:
    lows = torch.tensor([lo for lo, _ in ranges], dtype=t.dtype, device=t.device)
    # first expert (from high t) whose lo < t; t <= last lo goes to the last expert
    idx = (t.unsqueeze(-1) <= lows).sum(-1)
    return idx.clamp_max(len(ranges) - 1)


class RangeGate(nn.Module):
    """Fixed gate of ranged time experts: expert ``e`` has weight 1 on its ``(lo, hi]``.

    A module (without parameters) so that tools hooking routers, such as MoE-CAP's
    recorder, see its routings.

    Parameters
    ----------
    ranges : sequence of (float, float)
        Contiguous, ordered from high to low ``t`` (see :class:`TimeMixture`).
    """

    def __init__(self, ranges: Sequence[tuple[float, float]]) -> None:
        super().__init__()
        self.ranges = [(float(lo), float(hi)) for lo, hi in ranges]

    @property
    def num_experts(self) -> int:
        """Number of experts ``E``."""
        return len(self.ranges)

    def expert_index(self, t: torch.Tensor) -> torch.Tensor:
        """Index of the expert whose range holds each ``t`` (B,)."""
        return _range_index(self.ranges, t)

    def forward(self, t: torch.Tensor) -> Routing:
        """:class:`~sci_moe.moe.Routing` of times ``t`` (B,): ``E`` slots, one-hot weights.

        Slot ``e`` holds expert ``e`` where it is active and the dropped marker ``E``
        elsewhere, so :attr:`Routing.load <sci_moe.moe.Routing.load>` counts the samples
        each expert serves.
        """
        E = self.num_experts
        weights = nn.functional.one_hot(self.expert_index(t), E).to(t.dtype)
        slots = torch.arange(E, device=t.device).expand(t.shape[0], E)
        # Inactive experts are dropped slots (index E), so the load counts active ones.
        indices = torch.where(weights != 0, slots, torch.full_like(slots, E))
        return Routing.from_assignments(indices, weights, E, probs=weights.float())


class TimeMixture(nn.Module):
    """Experts over diffusion-time ranges.

    Parameters
    ----------
    experts : sequence of nn.Module
        Energy networks (``conservative=True``, with ``energy``/``score``) or score
        networks (with ``score``), ordered from high ``t`` to low ``t``.
    ranges : sequence of (float, float)
        ``(lo, hi)`` per expert; contiguous and descending, e.g. ScoreMD's
        ``[(0.6, 1.0), (0.099, 0.6), (1e-5, 0.099)]``. A ``t`` on a boundary belongs to the
        lower-``t`` expert.
    gating : {"ranged", "soft"}

    Examples
    --------
    >>> from sci_moe.sampling.diffusion import MLPEnergy, MLPScore
    >>> moe = TimeMixture([MLPScore((1, 2)), MLPEnergy((1, 2))], [(0.3, 1.0), (1e-5, 0.3)])
    >>> moe.route(torch.tensor([0.9, 0.1])).weights
    tensor([[1., 0.],
            [0., 1.]])
    """

    def __init__(
        self,
        experts: Sequence[nn.Module],
        ranges: Sequence[tuple[float, float]],
        gating: str = "ranged",
    ) -> None:
        super().__init__()
        if len(experts) < 1 or len(experts) != len(ranges):
            raise ValueError("give one (lo, hi) range per expert (at least one expert)")
        ranges = [(float(lo), float(hi)) for lo, hi in ranges]
        for i, (lo, hi) in enumerate(ranges):
            if not lo < hi:
                raise ValueError(f"range {i} must have lo < hi, got {(lo, hi)}")
            if i and abs(ranges[i - 1][0] - hi) > 1e-12:
                raise ValueError(
                    "ranges must be contiguous and ordered from high to low t, e.g. "
                    "[(0.6, 1.0), (0.099, 0.6), (1e-5, 0.099)]"
                )
        if gating not in ("ranged", "soft"):
            raise ValueError(f"gating must be 'ranged' or 'soft', got {gating!r}")
        self.experts = nn.ModuleList(experts)
        self.ranges = ranges
        self.gating = gating
        self.t_range = (ranges[-1][0], ranges[0][1])
        self.router = None
        self.gate = RangeGate(ranges) if gating == "ranged" else None
        if gating == "soft":
            cfg = RouterConfig(d_model=n_time_features(), num_experts=len(experts), mode="dense")
            self.router = Router(cfg)
        self.conservative = all(getattr(e, "conservative", False) for e in experts)

    @property
    def num_experts(self) -> int:
        """Number of experts ``E``."""
        return len(self.experts)

    def expert_index(self, t: torch.Tensor) -> torch.Tensor:
        """Index of the expert whose range holds each ``t`` (B,) (ranged gating)."""
        return _range_index(self.ranges, t)

    def route(self, t: torch.Tensor) -> Routing:
        """Gates as a dense :class:`~sci_moe.moe.Routing` for times ``t`` (B,)."""
        if self.router is not None:
            return self.router(time_features(t.float()).to(self.router.weight.dtype))
        return self.gate(t)

    def routed_paths(self) -> list[RoutedPath]:
        """One path: the gate (router or :class:`RangeGate`) over the time experts.

        See :func:`sci_moe.moe.routed_paths` (balancing and MoE-CAP tools use it).
        """
        E = self.num_experts
        return [
            RoutedPath(
                self,
                self.router if self.router is not None else self.gate,
                self.experts,
                E,
                E if self.router is not None else 1,
                d_model=n_time_features(),
            )
        ]

    def _combine(self, x, t, fn):
        w = self.route(t).weights.to(x.dtype)  # (B, E)
        one = (w == 1).all(0).nonzero()
        if one.numel() == 1:
            # every sample in one expert with weight 1 (MD at t_eval, a batch of one time
            # range): that expert's output itself, without the gather, scale and scatter
            # (the same numbers; about a fifth of an MD force call)
            return fn(self.experts[int(one)], x, t)
        out = None
        for e, expert in enumerate(self.experts):
            active = (w[:, e] != 0).nonzero().squeeze(-1)
            if active.numel() == 0:
                continue
            y = fn(expert, x[active], t[active])
            y = y * w[active, e].reshape((-1,) + (1,) * (y.dim() - 1))
            if out is None:
                out = y.new_zeros((x.shape[0], *y.shape[1:]))
            out = out.index_add(0, active, y)
        return out

    def score(self, x: torch.Tensor, t: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
        """Mixture score ``sum_e w_e(t) s_e(x, t)``, shape of ``x``."""
        return self._combine(x, t, lambda m, xx, tt: m.score(xx, tt, create_graph=create_graph))

    def energy(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Mixture energy ``sum_e w_e(t) E_e(x, t)`` (B,); every active expert must be an
        energy network."""

        def fn(m, xx, tt):
            if not getattr(m, "conservative", False):
                raise ValueError(
                    "an expert active at these times is a score network and has no energy; "
                    "ask for the energy only in the range of energy experts"
                )
            return m.energy(xx, tt)

        return self._combine(x, t, fn)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Energy if every expert is conservative, otherwise the score."""
        return self.energy(x, t) if self.conservative else self.score(x, t)

    def expert_at(self, t: float) -> nn.Module:
        """The expert that owns time ``t`` (ranged gating), e.g. the MD force field."""
        return self.experts[int(self.expert_index(torch.tensor([t], dtype=torch.float64)))]
