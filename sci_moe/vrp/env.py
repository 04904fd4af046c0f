"""Batched multi-task VRP environment: state, feasibility masks, transitions, cost.

One vehicle builds routes one after the other (unlimited fleet, as in RouteFinder /
MoSES); action ``0`` returns to the depot and starts a new route, action ``j >= 1``
visits customer ``j``. Customer ``j`` is allowed from the current node ``i`` when

* it is unvisited;
* **capacity**: a linehaul fits, ``load_lh + q_j <= Q``, and the route has picked up no
  backhaul yet (**B**: linehauls before backhauls); a backhaul fits,
  ``load_bh + p_j <= Q``;
* **L**: ``length + d_ij + [not open] d_j0 <= L_max``;
* **TW**: the service start ``t_j = max(t + d_ij, e_j) <= l_j`` and, unless the route is
  open, ``t_j + s_j + d_j0 <= l_0`` (back before the depot closes).

The depot is allowed from any customer, and at the depot once every customer is
served (finished rollouts stay there at no cost). Open routes (**O**) pay nothing for
the return to the depot.
"""

from __future__ import annotations

import torch

from .generator import MTVRPInstance
from .validate import validate_instance

__all__ = ["MTVRPEnv", "actions_to_routes", "tour_cost"]


class MTVRPEnv:
    """State of ``B`` rollouts on a batch of instances (one rollout per instance row).

    Parameters
    ----------
    instance : MTVRPInstance
        ``B`` instances; repeat them (:meth:`MTVRPInstance.repeat_interleave`) for several
        rollouts per instance.
    validate : bool
        Check the instances first (:func:`~sci_moe.vrp.validate_instance`; ``ValueError``
        naming the instance, customer and field of a malformed or infeasible one). Only a
        caller that has validated them already passes ``False``.

    Attributes
    ----------
    current : Tensor, shape (B,), int64
        Current node (0 = depot).
    visited : Tensor, shape (B, N + 1), bool
    load_linehaul, load_backhaul, time, length : Tensor, shape (B,)
        Of the current route: delivered / picked-up amount, time after service at the
        current node, travelled distance.
    on_backhaul : Tensor, shape (B,), bool
        The current route has visited a backhaul.
    cost : Tensor, shape (B,)
        Total cost so far (open routes: returns to the depot are free).

    Notes
    -----
    The instance's side of the masks (distances, demands padded with the depot's 0,
    return legs, windows, which constraints the batch has) is computed once here, so
    ``instance`` must not be modified while the environment runs; the state attributes
    may be.
    """

    def __init__(self, instance: MTVRPInstance, validate: bool = True) -> None:
        if validate:
            validate_instance(instance)
        self.instance = instance
        self._dist = instance.distances()  # (B, N+1, N+1), of the rows at construction
        self._src = None  # after keep(): the construction rows of the kept rollouts
        B, n1 = instance.locs.shape[:2]
        dev, dt = instance.locs.device, instance.locs.dtype
        self.current = torch.zeros(B, dtype=torch.long, device=dev)
        self.visited = torch.zeros(B, n1, dtype=torch.bool, device=dev)
        self.visited[:, 0] = True
        z = torch.zeros(B, dtype=dt, device=dev)
        self.load_linehaul, self.load_backhaul = z.clone(), z.clone()
        self.time, self.length, self.cost = z.clone(), z.clone(), z.clone()
        self.on_backhaul = torch.zeros(B, dtype=torch.bool, device=dev)
        self.steps = 0
        # The instance's side of the masks, once per rollout rather than once per step:
        # demands padded with the depot's 0, the return legs (0 on open routes), the
        # window columns, and which constraints the batch has at all (the checks of an
        # absent one, ``<= inf``, are always true and skipped: the same masks).
        zero = torch.zeros_like(instance.demand_linehaul[:, :1])
        self._q = torch.cat([zero, instance.demand_linehaul], 1)  # (B, N+1)
        self._p = torch.cat([zero, instance.demand_backhaul], 1)
        self._is_bh = self._p > 0
        self._has_bh = bool(self._is_bh.any())
        self._cap = instance.capacity[:, None]
        d_back = self._dist[:, :, 0]
        self._open = instance.open_route[:, None]
        self._ret = torch.where(self._open, torch.zeros_like(d_back), d_back)
        self._limit = instance.distance_limit[:, None]
        self._has_limit = bool(torch.isfinite(instance.distance_limit).any())
        tw = instance.time_windows
        self._tw_start, self._tw_end = tw[..., 0].contiguous(), tw[..., 1].contiguous()
        inf = torch.full_like(tw[:, :1, 1], float("inf"))
        self._closing = torch.where(self._open, inf, tw[:, :1, 1])  # (B, 1): back by then
        self._has_tw = bool(torch.isfinite(self._tw_end).any())
        self._index_views()

    def _index_views(self) -> None:
        B, n1 = self.visited.shape
        self.rows = torch.arange(B, device=self.visited.device)
        # Row r (N+1) + i of _dist_rows: the distances from node i of construction row r.
        self._dist_rows = self._dist.reshape(-1, n1)
        self._row0, self._n1 = (self.rows if self._src is None else self._src) * n1, n1
        self._dist_flat = self._dist.reshape(-1)

    @property
    def dist(self) -> torch.Tensor:
        """Distance matrices of the rollouts' instances, shape ``(B, N + 1, N + 1)``."""
        return self._dist if self._src is None else self._dist[self._src]

    _PER_ROLLOUT = (
        "current visited load_linehaul load_backhaul time length cost on_backhaul "
        "_q _p _is_bh _cap _open _ret _limit _tw_start _tw_end _closing"
    ).split()

    def keep(self, rows: torch.Tensor) -> None:
        """Go on with the rollouts ``rows`` only (their order); the others are dropped.

        A caller drops finished rollouts, whose state no longer changes, so that the
        steps of the others cost less. Every per-rollout attribute, :attr:`dist` and
        :attr:`instance` are sliced (the distances are not copied: the kept rollouts read
        their rows of the construction's matrices); the masks and transitions of the kept
        rollouts are unchanged (the absent-constraint shortcuts still hold for a subset).

        Parameters
        ----------
        rows : Tensor, shape (B',), int64
            Indices into the current ``B`` rollouts.
        """
        B = self.visited.shape[0]
        if rows.dtype != torch.long or rows.dim() != 1:
            raise ValueError(
                f"rows must be a 1-D int64 tensor, got {rows.dtype} {tuple(rows.shape)}"
            )
        if rows.numel() and not (0 <= int(rows.min()) and int(rows.max()) < B):
            raise ValueError(f"rows must index the {B} rollouts")
        for name in self._PER_ROLLOUT:
            setattr(self, name, getattr(self, name)[rows])
        self._src = rows if self._src is None else self._src[rows]  # no copy of the distances
        self.instance = self.instance.index(rows)
        self._index_views()

    @property
    def done(self) -> torch.Tensor:
        """All customers served and back at the depot, shape ``(B,)``."""
        return (self.visited.sum(dim=1) == self.visited.shape[1]) & (self.current == 0)

    def action_mask(self) -> torch.Tensor:
        """Feasible actions, shape ``(B, N + 1)``, bool (column 0 = depot)."""
        d_cur = self._dist_rows.index_select(0, self._row0 + self.current)  # (B, N+1)
        cap = self._cap
        # No linehaul after a backhaul: an infinite linehaul load (the same mask as the
        # separate bool test, without its slow broadcast).
        inf = torch.full_like(self.load_linehaul, float("inf"))
        load_lh = torch.where(self.on_backhaul, inf, self.load_linehaul)
        ok = load_lh[:, None] + self._q <= cap  # a linehaul fits
        if self._has_bh:  # else every node is a linehaul
            fits_bh = self.load_backhaul[:, None] + self._p <= cap
            ok = (self._is_bh & fits_bh) | (~self._is_bh & ok)  # a bool where, faster
        ok &= ~self.visited
        if self._has_limit:
            ok &= self.length[:, None] + d_cur + self._ret <= self._limit
        if self._has_tw:
            start = torch.maximum(self.time[:, None] + d_cur, self._tw_start)
            ok &= start <= self._tw_end
            back_time = start + self.instance.service_time + self._ret
            ok &= back_time <= self._closing  # inf on open routes
        served = self.visited[:, 1:].sum(dim=1) == self.visited.shape[1] - 1
        ok[:, 0] = (self.current != 0) | served
        return ok

    def step(self, action: torch.Tensor) -> None:
        """Move every rollout to ``action`` (shape ``(B,)``, int64); no feasibility check."""
        ins = self.instance
        a = action[:, None]
        d = self._dist_flat.index_select(0, (self._row0 + self.current) * self._n1 + action)
        to_depot = action == 0
        free = to_depot & ins.open_route
        self.cost = self.cost + torch.where(free, torch.zeros_like(d), d)
        start = torch.maximum(self.time + d, self._tw_start.gather(1, a).squeeze(1))
        new_time = start + ins.service_time.gather(1, a).squeeze(1)
        q = self._q.gather(1, a).squeeze(1)  # 0 at the depot
        p = self._p.gather(1, a).squeeze(1)
        zero = torch.zeros_like(d)
        self.time = torch.where(to_depot, zero, new_time)
        self.length = torch.where(to_depot, zero, self.length + d)
        self.load_linehaul = torch.where(to_depot, zero, self.load_linehaul + q)
        self.load_backhaul = torch.where(to_depot, zero, self.load_backhaul + p)
        self.on_backhaul = ~to_depot & (self.on_backhaul | (p > 0))
        self.visited.scatter_(1, a, True)
        self.current = action
        self.steps += 1

    def context(self) -> torch.Tensor:
        """Dynamic features for a decoder, shape ``(B, 5)``.

        Remaining linehaul and backhaul capacity (fractions of ``Q``), current time,
        travelled length, remaining length budget (clamped to 3), all of the current route.
        """
        ins = self.instance
        cap = ins.capacity
        budget = (ins.distance_limit - self.length).clamp(max=3.0)
        return torch.stack(
            [
                1 - self.load_linehaul / cap,
                1 - self.load_backhaul / cap,
                self.time,
                self.length,
                budget,
            ],
            dim=-1,
        )


def tour_cost(instance: MTVRPInstance, actions: torch.Tensor) -> torch.Tensor:
    """Cost of action sequences, shape ``(B,)``: the tour ``0, a_1, ..., a_T, 0``.

    Parameters
    ----------
    instance : MTVRPInstance
        ``B`` instances.
    actions : Tensor, shape (B, T), int64
        Visited nodes (0 = depot); trailing zeros are free.
    """
    B = actions.shape[0]
    zero = torch.zeros(B, 1, dtype=actions.dtype, device=actions.device)
    tour = torch.cat([zero, actions, zero], dim=1)
    dist = instance.distances()
    rows = torch.arange(B, device=actions.device)[:, None]
    legs = dist[rows, tour[:, :-1], tour[:, 1:]]
    free = (tour[:, 1:] == 0) & instance.open_route[:, None]
    return torch.where(free, torch.zeros_like(legs), legs).sum(dim=1)


def actions_to_routes(actions) -> list[list[int]]:
    """Split one action sequence (1-D tensor or list) at the depot into routes."""
    routes, cur = [], []
    for a in actions.tolist() if torch.is_tensor(actions) else actions:
        if a == 0:
            if cur:
                routes.append(cur)
            cur = []
        else:
            cur.append(int(a))
    if cur:
        routes.append(cur)
    return routes
