"""PyVRP 0.14 as the reference solver ("PyVRP 0.14 ILS"), with RouteFinder's encodings.

PyVRP (Wouda, Lan & Kool 2024) 0.14 solves with Iterated Local Search (not the HGS
genetic algorithm of its earlier releases that RouteFinder/MoSES quote as "HGS-PyVRP"),
so results are labelled "PyVRP 0.14 ILS" with the time limit. PyVRP works in integers:
coordinates are scaled by :data:`SCALE` and every distance, duration, service time and
window opening is rounded **up**, window closings and limits **down**, so a solution
PyVRP finds feasible is feasible for the exact float instance (checked by
:func:`~sci_moe.vrp.check_solution`); costs are re-evaluated in float64.

Encodings: open routes = free (zero distance and duration) return edges; backhauls =
``pickup`` clients with a prohibitive distance on every backhaul -> linehaul edge
(linehauls first); route length limit = ``VehicleType.max_distance``; time windows =
``tw_early``/``tw_late`` with ``service_duration`` and the depot's closing time.
"""

from __future__ import annotations

import math
import time

from .checker import check_solution, solution_cost
from .generator import MTVRPInstance
from .validate import validate_instance

__all__ = ["SCALE", "pyvrp_model", "pyvrp_route_distance", "solve_pyvrp"]

#: Integer units per unit of distance / time in the PyVRP encoding.
SCALE = 10_000
_FORBIDDEN = 10**9


def _pyvrp():
    try:
        import pyvrp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the PyVRP reference solver needs pyvrp 0.14: pip install 'sci-moe[vrp]'"
        ) from exc
    return pyvrp


def _int(x: float, up: bool) -> int:
    if math.isinf(x):
        return 2**62
    return math.ceil(x * SCALE - 1e-9) if up else math.floor(x * SCALE + 1e-9)


def pyvrp_model(instance: MTVRPInstance, b: int):
    """The :class:`pyvrp.Model` of instance ``b`` (depot = PyVRP location 0).

    Raises
    ------
    ValueError
        If the instance is malformed or infeasible (:func:`~sci_moe.vrp.validate_instance`).
    """
    b = range(instance.batch_size)[b]
    validate_instance(instance.index(slice(b, b + 1)), f"instance {b}")
    pyvrp = _pyvrp()
    ins = instance.index(b)
    xy = ins.locs.double().tolist()
    n = len(xy) - 1
    tw = ins.time_windows.double().tolist()
    s = ins.service_time.double().tolist()
    q = ins.demand_linehaul.round().long().tolist()
    p = ins.demand_backhaul.round().long().tolist()
    is_open = bool(ins.open_route)
    m = pyvrp.Model()
    m.add_vehicle_type(
        num_available=n,
        capacity=round(float(ins.capacity)),
        max_distance=_int(float(ins.distance_limit), up=False),
    )
    locs = [m.add_location(*xy[j]) for j in range(n + 1)]
    m.add_depot(locs[0], tw_early=0, tw_late=_int(tw[0][1], False))
    for j in range(1, n + 1):
        (
            m.add_client(
                locs[j],
                delivery=[q[j - 1]],
                pickup=[p[j - 1]],
                service_duration=_int(s[j], True),
                tw_early=_int(tw[j][0], True),
                tw_late=_int(tw[j][1], False),
            ),
        )
    for i in range(n + 1):
        for j in range(n + 1):
            if i == j:
                continue
            d = _int(math.hypot(xy[i][0] - xy[j][0], xy[i][1] - xy[j][1]), True)
            dist, dur = d, d
            if j == 0 and is_open:
                dist = dur = 0
            if i > 0 and j > 0 and p[i - 1] > 0 and p[j - 1] == 0:
                dist = _FORBIDDEN
            m.add_edge(locs[i], locs[j], distance=dist, duration=dur)
    return m


def pyvrp_route_distance(instance: MTVRPInstance, b: int, routes) -> float:
    """PyVRP's own distance of ``routes`` on instance ``b``, in instance units."""
    pyvrp = _pyvrp()
    data = pyvrp_model(instance, b).data()
    sol = pyvrp.Solution(data, [[int(j) - 1 for j in r] for r in routes if r])
    return sol.distance() / SCALE


def solve_pyvrp(instance: MTVRPInstance, b: int, time_limit: float = 1.0, seed: int = 0) -> dict:
    """Solve instance ``b`` with PyVRP 0.14 ILS for ``time_limit`` seconds.

    Returns
    -------
    dict
        ``routes`` (lists of customers), ``cost`` (float64 re-evaluation, ``inf`` when
        infeasible), ``feasible`` (by :func:`~sci_moe.vrp.check_solution`),
        ``pyvrp_feasible`` and ``seconds``.
    """
    _pyvrp()
    from pyvrp.stop import MaxRuntime

    if time_limit <= 0:
        raise ValueError(f"time_limit must be > 0 seconds, got {time_limit}")
    m = pyvrp_model(instance, b)
    t0 = time.perf_counter()
    res = m.solve(stop=MaxRuntime(time_limit), seed=seed, display=False)
    sec = time.perf_counter() - t0
    # PyVRP 0.14 numbers clients from 0 (depots apart); ours from 1.
    routes = [[int(a.idx) + 1 for a in r if a.is_client()] for r in res.best.routes()]
    ok = not check_solution(instance, b, routes)
    cost = solution_cost(instance, b, routes) if ok else math.inf
    return {
        "routes": routes,
        "cost": cost,
        "feasible": ok,
        "pyvrp_feasible": bool(res.is_feasible()),
        "seconds": sec,
    }
