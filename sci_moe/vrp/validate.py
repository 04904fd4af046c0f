"""Checks that a (user's) instance is well-formed and feasible, naming the customer/field.

With an unlimited fleet (the setting of RouteFinder / MoSES and of this package) an
instance is feasible exactly when every customer can be served on a route of its own:
its demand fits the capacity, the out-and-back trip fits the length limit, and its time
window can be reached from the depot (and left in time to return before the depot
closes, unless routes are open). :func:`instance_problems` checks precisely these
conditions, so an instance without problems always has a solution (and every rollout
of :class:`~sci_moe.vrp.MTVRPEnv` finishes).
"""

from __future__ import annotations

import math

from .generator import MTVRPInstance
from .variants import variant_name

__all__ = ["instance_problems", "validate_instance"]


def instance_problems(instance: MTVRPInstance, b: int = 0, tol: float = 1e-9) -> list[str]:
    """Every reason why instance ``b`` is malformed or infeasible (empty list: none).

    Parameters
    ----------
    instance : MTVRPInstance
    b : int
        Which instance of the batch.
    tol : float
        Slack for round-off, in the instance's distance/time units.

    Returns
    -------
    list of str
        One message per problem, naming the field (``CAPACITY``, ``DISTANCE``, ...) and the
        customer (numbered 1..N; the depot is node 0 here and node 1 in a VRPLIB file).
    """
    ins = instance.index(b)
    out = []
    xy = ins.locs.double().tolist()
    n = len(xy) - 1
    q = ins.demand_linehaul.double().tolist()
    p = ins.demand_backhaul.double().tolist()
    cap = float(ins.capacity)
    s = ins.service_time.double().tolist()
    tw = ins.time_windows.double().tolist()
    limit = float(ins.distance_limit)
    is_open = bool(ins.open_route)
    flags = [bool(f) for f in ins.flags.tolist()]
    name = variant_name(flags)
    for j, (x, y) in enumerate(xy):
        if not (math.isfinite(x) and math.isfinite(y)):
            who = "the depot" if j == 0 else f"customer {j}"
            out.append(f"NODE_COORD_SECTION: {who} has a non-finite coordinate ({x}, {y})")
    if out:
        return out
    if not (math.isfinite(cap) and cap > 0):
        out.append(f"CAPACITY must be a positive number, got {cap}")
        return out
    if not (limit > 0):
        out.append(f"DISTANCE (route length limit) must be > 0, got {limit}")
    if bool(ins.open_route) != flags[0]:
        out.append(f"open routes ({is_open}) disagree with the variant {name}")
    d0 = [math.hypot(xy[j][0] - xy[0][0], xy[j][1] - xy[0][1]) for j in range(n + 1)]
    if not math.isfinite(tw[0][1]) and flags[3]:
        out.append("TIME_WINDOW_SECTION: the depot's window must close at a finite time")
    if tw[0][0] > tw[0][1]:
        out.append(f"TIME_WINDOW_SECTION: the depot's window [{tw[0][0]}, {tw[0][1]}] is empty")
    for j in range(1, n + 1):
        qj, pj = q[j - 1], p[j - 1]
        who = f"customer {j}"
        if not (math.isfinite(qj) and math.isfinite(pj)) or qj < 0 or pj < 0:
            out.append(f"{who}: demands must be finite and >= 0, got linehaul {qj}, backhaul {pj}")
            continue
        if qj > 0 and pj > 0:
            out.append(
                f"{who}: has both a linehaul ({qj:g}) and a backhaul ({pj:g}) demand; a customer "
                "is either a delivery (DEMAND_SECTION) or a pickup (BACKHAUL_SECTION)"
            )
        if pj > 0 and not flags[1]:
            out.append(f"{who}: backhaul demand {pj:g} but the variant {name} has no backhauls")
        for kind, dem in (("linehaul", qj), ("backhaul", pj)):
            if dem > cap + tol:
                out.append(
                    f"{who}: {kind} demand {dem:g} exceeds the vehicle CAPACITY {cap:g}; no "
                    "vehicle can serve it"
                )
        trip = d0[j] * (1 if is_open else 2)
        if trip > limit + tol:
            out.append(
                f"{who}: the trip depot -> customer{'' if is_open else ' -> depot'} is "
                f"{trip:.6g} long, more than the route length limit DISTANCE {limit:.6g}"
            )
        e, l_ = tw[j]
        if not (math.isfinite(s[j]) and s[j] >= 0):
            out.append(f"SERVICE_TIME_SECTION: {who} has service time {s[j]}, must be >= 0")
            continue
        if e > l_:
            out.append(f"TIME_WINDOW_SECTION: {who} has an empty window [{e:g}, {l_:g}]")
            continue
        start = max(tw[0][0] + d0[j], e)
        if start > l_ + tol:
            out.append(
                f"TIME_WINDOW_SECTION: {who} cannot be reached in time: the earliest arrival "
                f"from the depot is {start:.6g}, after its window closes at {l_:.6g}"
            )
        elif not is_open and start + s[j] + d0[j] > tw[0][1] + tol:
            out.append(
                f"TIME_WINDOW_SECTION: {who} served at the earliest at {start:.6g} (service "
                f"{s[j]:.6g}) cannot return before the depot closes at {tw[0][1]:.6g}"
            )
    return out


def validate_instance(instance: MTVRPInstance, source: str = "instance") -> None:
    """Raise ``ValueError`` listing the problems of every instance of the batch.

    Parameters
    ----------
    instance : MTVRPInstance
    source : str
        Named in the message (for example the file name).

    Raises
    ------
    ValueError
        If any instance is malformed or infeasible (see :func:`instance_problems`).

    Examples
    --------
    >>> import torch
    >>> from sci_moe.vrp import generate_instances, validate_instance
    >>> ins = generate_instances(1, 5, "CVRP", seed=0)
    >>> validate_instance(ins)
    >>> ins.demand_linehaul[0, 2] = 99
    >>> try:
    ...     validate_instance(ins, "my.vrp")
    ... except ValueError as err:
    ...     print(str(err)[:68])
    my.vrp is infeasible or malformed: customer 3: linehaul demand 99 ex
    """
    msgs = []
    for b in range(instance.batch_size):
        pre = "" if instance.batch_size == 1 else f"instance {b}: "
        msgs += [pre + m for m in instance_problems(instance, b)]
    if msgs:
        more = f" (and {len(msgs) - 5} more)" if len(msgs) > 5 else ""
        raise ValueError(f"{source} is infeasible or malformed: " + "; ".join(msgs[:5]) + more)
