"""Constructive baselines: nearest neighbour (on the environment) and greedy savings.

* :func:`nearest_neighbour`: from the current node go to the nearest customer the
  :class:`~sci_moe.vrp.MTVRPEnv` mask allows; return to the depot when none is allowed.
* :func:`greedy_savings`: the parallel savings heuristic of Clarke & Wright (1964),
  extended to the 16 variants. Start with one route per customer and greedily apply the
  merges "route ending at ``i``, then route starting at ``j``" in decreasing order of
  the saving

  .. math:: s_{ij} = [\\text{closed}]\\, d_{i0} + d_{0j} - d_{ij}

  (open routes do not pay the return ``d_{i0}``), keeping a merge only when the merged
  route passes every constraint (capacity, linehauls before backhauls, length limit,
  time windows; the checks of :func:`~sci_moe.vrp.check_solution`, exact, no slack).
"""

from __future__ import annotations

import itertools
import math

import torch

from .checker import _one, _route_problems
from .env import MTVRPEnv
from .generator import MTVRPInstance
from .validate import validate_instance

__all__ = ["greedy_savings", "nearest_neighbour", "routes_to_actions"]


@torch.no_grad()
def nearest_neighbour(instance: MTVRPInstance) -> tuple[torch.Tensor, torch.Tensor]:
    """Go to the nearest feasible customer; return to the depot when none is feasible.

    Returns
    -------
    cost : Tensor, shape (B,)
    actions : Tensor, shape (B, T), int64

    Raises
    ------
    ValueError
        If an instance is malformed or infeasible (:func:`~sci_moe.vrp.validate_instance`).
    """
    env = MTVRPEnv(instance)
    N = instance.num_customers
    acts = []
    while not bool(env.done.all()):
        mask = env.action_mask()
        d = env.dist[env.rows, env.current].clone()
        cust = mask.clone()
        cust[:, 0] = False
        d = d.masked_fill(~cust, float("inf"))
        a = d.argmin(1)
        a = torch.where(cust.any(1), a, torch.zeros_like(a))
        acts.append(a)
        env.step(a)
        if env.steps > 2 * N + 2:
            raise RuntimeError("nearest neighbour did not finish; the instance is infeasible")
    return env.cost, torch.stack(acts, 1)


def routes_to_actions(routes_per_instance) -> torch.Tensor:
    """Routes of each instance as 0-separated action rows, shape ``(B, T)`` (zero-padded)."""
    rows = [[a for r in routes for a in (*r, 0)] for routes in routes_per_instance]
    T = max(1, max(len(r) for r in rows))
    return torch.tensor([r + [0] * (T - len(r)) for r in rows], dtype=torch.long)


def _savings_one(c: dict) -> tuple[list[list[int]], float]:
    xy, n = c["xy"], len(c["q"]) - 1
    d = [[math.hypot(a[0] - b[0], a[1] - b[1]) for b in xy] for a in xy]
    ret = [0.0 if c["open"] else d[i][0] for i in range(n + 1)]
    routes = {j: [j] for j in range(1, n + 1)}
    first = {j: j for j in range(1, n + 1)}  # customer -> id of its route
    pairs = sorted(
        ((ret[i] + d[0][j] - d[i][j], i, j) for i in range(1, n + 1) for j in range(1, n + 1)),
        reverse=True,
    )
    for s, i, j in pairs:
        if s <= 0:
            break
        ri, rj = first.get(i), first.get(j)
        if ri is None or rj is None or ri == rj:
            continue
        a, b = routes[ri], routes[rj]
        if a[-1] != i or b[0] != j:
            continue
        merged = a + b
        if _route_problems(c, 0, merged, 0.0):
            continue
        routes[ri] = merged
        del routes[rj]
        for x in b:
            first[x] = ri
    out = list(routes.values())
    cost = 0.0
    for r in out:
        path = [0, *r] + ([] if c["open"] else [0])
        cost += sum(d[p][q] for p, q in itertools.pairwise(path))
    return out, cost


def greedy_savings(instance: MTVRPInstance) -> tuple[torch.Tensor, torch.Tensor]:
    """Clarke-Wright parallel savings for every instance of the batch (pure Python, float64).

    Returns
    -------
    cost : Tensor, shape (B,), float64
    actions : Tensor, shape (B, T), int64
        Routes separated by the depot ``0`` (:func:`~sci_moe.vrp.actions_to_routes` splits
        them), zero-padded.

    Raises
    ------
    ValueError
        If an instance is malformed or infeasible (:func:`~sci_moe.vrp.validate_instance`).

    Examples
    --------
    >>> from sci_moe.vrp import generate_instances, greedy_savings, nearest_neighbour
    >>> ins = generate_instances(4, 20, "CVRP", seed=0)
    >>> bool((greedy_savings(ins)[0] <= nearest_neighbour(ins)[0].double()).all())
    True
    """
    validate_instance(instance)
    sols = [_savings_one(_one(instance, b)) for b in range(instance.batch_size)]
    cost = torch.tensor([c for _, c in sols], dtype=torch.float64)
    return cost, routes_to_actions([r for r, _ in sols])
