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
    """

    def __init__(self, instance: MTVRPInstance, validate: bool = True) -> None:
        if validate:
            validate_instance(instance)
        self.instance = instance
        self.dist = instance.distances()
        B, n1 = instance.locs.shape[:2]
        dev, dt = instance.locs.device, instance.locs.dtype
        self.rows = torch.arange(B, device=dev)
        self.current = torch.zeros(B, dtype=torch.long, device=dev)
        self.visited = torch.zeros(B, n1, dtype=torch.bool, device=dev)
        self.visited[:, 0] = True
        z = torch.zeros(B, dtype=dt, device=dev)
        self.load_linehaul, self.load_backhaul = z.clone(), z.clone()
        self.time, self.length, self.cost = z.clone(), z.clone(), z.clone()
        self.on_backhaul = torch.zeros(B, dtype=torch.bool, device=dev)
        self.steps = 0

    @property
    def done(self) -> torch.Tensor:
        """All customers served and back at the depot, shape ``(B,)``."""
        return self.visited.all(dim=1) & (self.current == 0)

    def action_mask(self) -> torch.Tensor:
        """Feasible actions, shape ``(B, N + 1)``, bool (column 0 = depot)."""
        ins = self.instance
        d_cur = self.dist[self.rows, self.current]  # (B, N+1)
        d_back = self.dist[:, :, 0]  # (B, N+1)
        open_ = ins.open_route[:, None]
        q = torch.cat([torch.zeros_like(ins.demand_linehaul[:, :1]), ins.demand_linehaul], 1)
        p = torch.cat([torch.zeros_like(ins.demand_backhaul[:, :1]), ins.demand_backhaul], 1)
        cap = ins.capacity[:, None]
        is_bh = p > 0
        fits_lh = (self.load_linehaul[:, None] + q <= cap) & ~self.on_backhaul[:, None]
        fits_bh = self.load_backhaul[:, None] + p <= cap
        ok = ~self.visited & torch.where(is_bh, fits_bh, fits_lh)
        ret = torch.where(open_, torch.zeros_like(d_back), d_back)
        ok &= self.length[:, None] + d_cur + ret <= ins.distance_limit[:, None]
        start = torch.maximum(self.time[:, None] + d_cur, ins.time_windows[..., 0])
        ok &= start <= ins.time_windows[..., 1]
        back_time = start + ins.service_time + ret
        ok &= open_ | (back_time <= ins.time_windows[:, :1, 1])
        ok[:, 0] = (self.current != 0) | self.visited[:, 1:].all(dim=1)
        return ok

    def step(self, action: torch.Tensor) -> None:
        """Move every rollout to ``action`` (shape ``(B,)``, int64); no feasibility check."""
        ins = self.instance
        d = self.dist[self.rows, self.current, action]
        to_depot = action == 0
        free = to_depot & ins.open_route
        self.cost = self.cost + torch.where(free, torch.zeros_like(d), d)
        start = torch.maximum(self.time + d, ins.time_windows[self.rows, action, 0])
        new_time = start + ins.service_time[self.rows, action]
        j = (action - 1).clamp(min=0)
        q = torch.where(to_depot, 0.0, ins.demand_linehaul[self.rows, j])
        p = torch.where(to_depot, 0.0, ins.demand_backhaul[self.rows, j])
        zero = torch.zeros_like(d)
        self.time = torch.where(to_depot, zero, new_time)
        self.length = torch.where(to_depot, zero, self.length + d)
        self.load_linehaul = torch.where(to_depot, zero, self.load_linehaul + q)
        self.load_backhaul = torch.where(to_depot, zero, self.load_backhaul + p)
        self.on_backhaul = ~to_depot & (self.on_backhaul | (p > 0))
        self.visited[self.rows, action] = True
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
