"""Independent feasibility checker and cost of a VRP solution (pure Python, float64).

Written from the constraint definitions, not from :class:`~sci_moe.vrp.MTVRPEnv`'s masks,
so tests can check that the masks never allow an infeasible move.
"""

from __future__ import annotations

import itertools
import math

from .generator import MTVRPInstance

__all__ = ["check_solution", "solution_cost"]


def _one(instance: MTVRPInstance, b: int) -> dict:
    ins = instance.index(b)
    return {
        "xy": ins.locs.double().tolist(),
        "q": [0.0, *ins.demand_linehaul.double().tolist()],
        "p": [0.0, *ins.demand_backhaul.double().tolist()],
        "Q": float(ins.capacity),
        "s": ins.service_time.double().tolist(),
        "tw": ins.time_windows.double().tolist(),
        "L": float(ins.distance_limit),
        "open": bool(ins.open_route),
    }


def _d(xy, i, j) -> float:
    return math.hypot(xy[i][0] - xy[j][0], xy[i][1] - xy[j][1])


def solution_cost(instance: MTVRPInstance, b: int, routes) -> float:
    """Total travelled distance of ``routes`` (lists of customers 1..N) on instance ``b``.

    Each route starts at the depot; it returns to it unless the instance has open routes.
    """
    c = _one(instance, b)
    total = 0.0
    for r in routes:
        path = [0, *r] + ([] if c["open"] else [0])
        total += sum(_d(c["xy"], i, j) for i, j in itertools.pairwise(path))
    return total


def _route_problems(c: dict, k: int, r, tol: float) -> list[str]:
    """Violations of route ``k`` (customers ``r``) on the instance dict ``c`` of :func:`_one`."""
    out = []
    lh = sum(c["q"][j] for j in r)
    bh = sum(c["p"][j] for j in r)
    if lh > c["Q"] + tol:
        out.append(f"route {k}: linehaul load {lh} exceeds capacity {c['Q']}")
    if bh > c["Q"] + tol:
        out.append(f"route {k}: backhaul load {bh} exceeds capacity {c['Q']}")
    kinds = "".join("b" if c["p"][j] > 0 else "l" for j in r)
    if "bl" in kinds:
        out.append(f"route {k}: a linehaul customer follows a backhaul customer")
    path = [0, *r] + ([] if c["open"] else [0])
    length = sum(_d(c["xy"], i, j) for i, j in itertools.pairwise(path))
    if length > c["L"] + tol:
        out.append(f"route {k}: length {length:.6f} exceeds the limit {c['L']:.6f}")
    t, prev = c["tw"][0][0], 0
    for j in r:
        t = max(t + _d(c["xy"], prev, j), c["tw"][j][0])
        if t > c["tw"][j][1] + tol:
            out.append(
                f"route {k}: customer {j} served at {t:.6f}, after its window closes "
                f"at {c['tw'][j][1]:.6f}"
            )
        t += c["s"][j]
        prev = j
    if not c["open"] and r:
        t += _d(c["xy"], prev, 0)
        if t > c["tw"][0][1] + tol:
            out.append(f"route {k}: back at the depot at {t:.6f}, after it closes")
    return out


def check_solution(instance: MTVRPInstance, b: int, routes, tol: float = 1e-5) -> list[str]:
    """Constraint violations of ``routes`` on instance ``b`` (empty list = feasible).

    Parameters
    ----------
    instance : MTVRPInstance
    b : int
        Which instance of the batch.
    routes : list of list of int
        Customers of each route in visiting order (depot omitted).
    tol : float
        Slack for floating-point round-off.

    Returns
    -------
    list of str
        One message per violation, naming the route and customer.
    """
    c = _one(instance, b)
    n = len(c["q"]) - 1
    out = []
    seen = [x for r in routes for x in r]
    if sorted(seen) != list(range(1, n + 1)):
        missing = sorted(set(range(1, n + 1)) - set(seen))
        dup = sorted({x for x in seen if seen.count(x) > 1})
        out.append(f"customers must be visited exactly once: missing {missing}, repeated {dup}")
    for k, r in enumerate(routes):
        out += _route_problems(c, k, r, tol)
    return out
