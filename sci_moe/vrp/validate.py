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

import torch

from .generator import MTVRPInstance
from .variants import variant_name

__all__ = ["instance_problems", "validate_instance"]


def _problem_masks(instance: MTVRPInstance, tol: float) -> dict[str, torch.Tensor]:
    """Every check of :func:`instance_problems` at once, as masks over the whole batch.

    Row checks have shape ``(B,)``, node checks ``(B, N + 1)`` and customer checks
    ``(B, N)``; ``True`` marks a problem. A row with a non-finite coordinate gets no
    other check, a row with a bad capacity no further one, and a customer with bad
    demands, service time or window no further customer check (as the messages say).
    """
    f64 = lambda t: t.detach().to("cpu", torch.float64)  # noqa: E731
    xy, cap, limit = f64(instance.locs), f64(instance.capacity), f64(instance.distance_limit)
    q, p = f64(instance.demand_linehaul), f64(instance.demand_backhaul)
    s, tw = f64(instance.service_time)[:, 1:], f64(instance.time_windows)
    is_open = instance.open_route.detach().cpu().bool()
    flags = instance.flags.detach().cpu().bool()
    m = {"coord": ~torch.isfinite(xy).all(-1)}
    live = ~m["coord"].any(1)
    m["capacity"] = live & ~(torch.isfinite(cap) & (cap > 0))
    live &= ~m["capacity"]
    m["limit"] = live & ~(limit > 0)
    m["open"] = live & (is_open != flags[:, 0])
    m["depot_close"] = live & ~torch.isfinite(tw[:, 0, 1]) & flags[:, 3]
    m["depot_nan"] = live & torch.isnan(tw[:, 0]).any(-1)
    m["depot_empty"] = live & (tw[:, 0, 0] > tw[:, 0, 1])
    d0 = (xy[:, 1:] - xy[:, :1]).square().sum(-1).sqrt()  # (B, N), exact (no cdist)
    cust = live[:, None].expand_as(q)
    m["demand"] = cust & ~(torch.isfinite(q) & torch.isfinite(p) & (q >= 0) & (p >= 0))
    cust = cust & ~m["demand"]
    m["both"] = cust & (q > 0) & (p > 0)
    m["no_backhauls"] = cust & (p > 0) & ~flags[:, 1:2]
    m["linehaul_cap"] = cust & (q > cap[:, None] + tol)
    m["backhaul_cap"] = cust & (p > cap[:, None] + tol)
    trip = d0 * torch.where(is_open, 1.0, 2.0)[:, None].to(d0)
    m["trip"] = cust & (trip > limit[:, None] + tol)
    m["service"] = cust & ~(torch.isfinite(s) & (s >= 0))
    cust = cust & ~m["service"]
    e, l_ = tw[:, 1:, 0], tw[:, 1:, 1]
    m["window_nan"] = cust & (torch.isnan(e) | torch.isnan(l_))
    cust = cust & ~m["window_nan"]
    m["window_empty"] = cust & (e > l_)
    cust = cust & ~m["window_empty"]
    start = torch.maximum(tw[:, :1, 0] + d0, e)
    m["late"] = cust & (start > l_ + tol)
    back = start + s + d0 > tw[:, :1, 1] + tol
    m["no_return"] = cust & ~m["late"] & ~is_open[:, None] & back
    m.update(_start=start, _trip=trip)
    return m


_CUSTOMER_CHECKS = (
    "demand",
    "both",
    "no_backhauls",
    "linehaul_cap",
    "backhaul_cap",
    "trip",
    "service",
    "window_nan",
    "window_empty",
    "late",
    "no_return",
)
_ROW_CHECKS = ("capacity", "limit", "open", "depot_close", "depot_nan", "depot_empty")


def _messages(instance: MTVRPInstance, m: dict[str, torch.Tensor], b: int) -> list[str]:
    """The messages of row ``b`` of the masks ``m`` of :func:`_problem_masks`."""
    ins = instance.index(b)
    xy = ins.locs.double().tolist()
    q, p = ins.demand_linehaul.double().tolist(), ins.demand_backhaul.double().tolist()
    cap, limit = float(ins.capacity), float(ins.distance_limit)
    s, tw = ins.service_time.double().tolist(), ins.time_windows.double().tolist()
    is_open = bool(ins.open_route)
    name = variant_name([bool(f) for f in ins.flags.tolist()])
    out = []
    for j in m["coord"][b].nonzero().flatten().tolist():
        who = "the depot" if j == 0 else f"customer {j}"
        bad = " and ".join(
            f"{a} = {v}" for a, v in zip("xy", xy[j], strict=True) if not math.isfinite(v)
        )
        out.append(
            f"NODE_COORD_SECTION: {who} has a non-finite coordinate: {bad} (node ({xy[j][0]}, "
            f"{xy[j][1]})); fix or drop it"
        )
    row = {
        "capacity": f"CAPACITY must be a positive number, got {cap}",
        "limit": f"DISTANCE (route length limit) must be > 0, got {limit}",
        "open": f"open routes ({is_open}) disagree with the variant {name}",
        "depot_close": "TIME_WINDOW_SECTION: the depot's window must close at a finite time",
        "depot_nan": f"TIME_WINDOW_SECTION: the depot's window {tw[0]} contains NaN",
        "depot_empty": f"TIME_WINDOW_SECTION: the depot's window [{tw[0][0]}, {tw[0][1]}] is empty",
    }
    out += [row[k] for k in _ROW_CHECKS if bool(m[k][b])]
    flagged = torch.stack([m[k][b] for k in _CUSTOMER_CHECKS]).any(0)
    start, trip = m["_start"][b].tolist(), m["_trip"][b].tolist()
    for i in flagged.nonzero().flatten().tolist():
        j, who, (e, l_) = i + 1, f"customer {i + 1}", tw[i + 1]
        qj, pj = q[i], p[i]
        msg = {
            "demand": f"{who}: demands must be finite and >= 0, got linehaul {qj}, backhaul {pj}",
            "both": f"{who}: has both a linehaul ({qj:g}) and a backhaul ({pj:g}) demand; a "
            "customer is either a delivery (DEMAND_SECTION) or a pickup (BACKHAUL_SECTION)",
            "no_backhauls": f"{who}: backhaul demand {pj:g} but the variant {name} has no "
            "backhauls",
            "linehaul_cap": f"{who}: linehaul demand {qj:g} exceeds the vehicle CAPACITY {cap:g}; "
            "no vehicle can serve it",
            "backhaul_cap": f"{who}: backhaul demand {pj:g} exceeds the vehicle CAPACITY {cap:g}; "
            "no vehicle can serve it",
            "trip": f"{who}: the trip depot -> customer{'' if is_open else ' -> depot'} is "
            f"{trip[i]:.6g} long, more than the route length limit DISTANCE {limit:.6g}",
            "service": f"SERVICE_TIME_SECTION: {who} has service time {s[j]}, must be >= 0",
            "window_nan": f"TIME_WINDOW_SECTION: {who} has a NaN in its window [{e}, {l_}]",
            "window_empty": f"TIME_WINDOW_SECTION: {who} has an empty window [{e:g}, {l_:g}]",
            "late": f"TIME_WINDOW_SECTION: {who} cannot be reached in time: the earliest arrival "
            f"from the depot is {start[i]:.6g}, after its window closes at {l_:.6g}",
            "no_return": f"TIME_WINDOW_SECTION: {who} served at the earliest at {start[i]:.6g} "
            f"(service {s[j]:.6g}) cannot return before the depot closes at {tw[0][1]:.6g}",
        }
        out += [msg[k] for k in _CUSTOMER_CHECKS if bool(m[k][b, i])]
    return out


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
    b = range(instance.batch_size)[b]
    one = instance.index(slice(b, b + 1))
    return _messages(one, _problem_masks(one, tol), 0)


def validate_instance(instance: MTVRPInstance, source: str = "instance", tol: float = 1e-9) -> None:
    """Raise ``ValueError`` listing the problems of every instance of the batch.

    The one check of the package: :class:`~sci_moe.vrp.MTVRPEnv` (hence the policy and
    :func:`~sci_moe.vrp.nearest_neighbour`), :func:`~sci_moe.vrp.greedy_savings`,
    :func:`~sci_moe.vrp.solve_pyvrp` and :func:`~sci_moe.vrp.read_vrplib` call it. It is
    vectorised over the batch (messages are built only for bad instances).

    Parameters
    ----------
    instance : MTVRPInstance
    source : str
        Named in the message (for example the file name).
    tol : float
        Slack for round-off, as in :func:`instance_problems`.

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
    m = _problem_masks(instance, tol)
    checks = ["coord", *_ROW_CHECKS, *_CUSTOMER_CHECKS]
    # problems per instance, shape (B,)
    counts = sum(m[k].reshape(instance.batch_size, -1).sum(1) for k in checks)
    bad = counts.nonzero().flatten().tolist()
    if not bad:
        return
    msgs = []
    for b in bad:  # the messages of the first few bad instances; the rest only counted
        pre = "" if instance.batch_size == 1 else f"instance {b}: "
        msgs += [pre + msg for msg in _messages(instance, m, b)]
        if len(msgs) >= 5:
            break
    total = int(counts.sum())
    more = f" (and {total - 5} more)" if total > 5 else ""
    raise ValueError(f"{source} is infeasible or malformed: " + "; ".join(msgs[:5]) + more)
