"""Instances and solutions in VRPLIB format, for all 16 variants (extra ``vrp``: ``vrplib``).

Fields (the conventions of CVRPLIB and PyVRP's reader; node 1 is the depot)::

    NAME: ...            TYPE: one of the 16 variant names (CVRP, OVRPBLTW, ...)
    DIMENSION: N + 1     CAPACITY: Q          DISTANCE: route length limit (L only)
    EDGE_WEIGHT_TYPE: EUC_2D (Euclidean, not rounded, unit speed)
    NODE_COORD_SECTION   node x y
    DEMAND_SECTION       node linehaul demand (delivery)
    BACKHAUL_SECTION     node backhaul demand (pickup; B only)
    SERVICE_TIME_SECTION node service time (TW only; optional there, default 0)
    TIME_WINDOW_SECTION  node earliest latest (TW only; row 1 = the depot's hours)
    DEPOT_SECTION        1  -1

Open routes (O) are given by the TYPE only; ``VEHICLES`` is ignored (the fleet is
unlimited, as in RouteFinder and MoSES). Reading checks the file's structure and the
instance's feasibility (:func:`~sci_moe.vrp.instance_problems`) and raises a
``ValueError`` naming the file, the field and the customer.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from sci_moe._util import atomic_write_text

from .generator import MTVRPInstance
from .validate import validate_instance
from .variants import VARIANTS, flags_tensor, variant_flags, variant_name

__all__ = ["read_vrplib", "to_unit_square", "write_solution", "write_vrplib"]


def _num(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)


def _section(name: str, rows) -> list[str]:
    return [f"{name}_SECTION"] + [
        " ".join([str(i)] + [_num(v) for v in row]) for i, row in enumerate(rows, 1)
    ]


def write_vrplib(
    path: str | os.PathLike, instance: MTVRPInstance, b: int = 0, name: str | None = None
) -> Path:
    """Write instance ``b`` of a batch as a VRPLIB file (atomically).

    Parameters
    ----------
    path : path-like
    instance : MTVRPInstance
    b : int
        Which instance of the batch.
    name : str, optional
        The ``NAME`` field (default: the file stem).

    Returns
    -------
    Path
    """
    ins = instance.index(b)
    flags = [bool(f) for f in ins.flags.tolist()]
    _, bh, lim, tw = flags
    n1 = ins.locs.shape[0]
    lines = [
        f"NAME: {name or Path(path).stem}",
        "COMMENT: written by sci_moe.vrp (unlimited fleet, Euclidean distances, unit speed)",
        f"TYPE: {variant_name(flags)}",
        f"DIMENSION: {n1}",
        f"CAPACITY: {_num(ins.capacity)}",
    ]
    if lim:
        lines.append(f"DISTANCE: {_num(ins.distance_limit)}")
    lines.append("EDGE_WEIGHT_TYPE: EUC_2D")
    lines += _section("NODE_COORD", ins.locs.double().tolist())
    zero = [0.0]
    lines += _section("DEMAND", [[v] for v in zero + ins.demand_linehaul.double().tolist()])
    if bh:
        lines += _section("BACKHAUL", [[v] for v in zero + ins.demand_backhaul.double().tolist()])
    if tw:
        lines += _section("SERVICE_TIME", [[v] for v in ins.service_time.double().tolist()])
        lines += _section("TIME_WINDOW", ins.time_windows.double().tolist())
    lines += ["DEPOT_SECTION", "1", "-1", "EOF", ""]
    return atomic_write_text(path, "\n".join(lines))


def _parse(path: Path) -> dict:
    try:
        import vrplib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("reading VRPLIB files needs vrplib: pip install 'sci-moe[vrp]'") from exc
    if not path.is_file():
        raise ValueError(f"VRPLIB file {path} does not exist")
    try:
        return vrplib.read_instance(path, compute_edge_weights=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the VRPLIB file {path}: {exc}") from exc
    except Exception as exc:  # vrplib raises RuntimeError/ValueError/IndexError on bad text
        raise ValueError(
            f"{path} is not a valid VRPLIB file ({type(exc).__name__}: {exc}); expect "
            "'KEY: value' lines, then sections such as NODE_COORD_SECTION with one "
            "'node value...' row per node, and EOF"
        ) from exc


def _column(data: dict, key: str, dim: int, width: int, path: Path) -> list:
    """Section ``key`` as ``dim`` rows of ``width`` floats, or a ValueError naming the row."""
    field = f"{key.upper()}_SECTION"
    raw = data[key]
    rows = raw.tolist() if hasattr(raw, "tolist") else list(raw)
    if len(rows) != dim:
        raise ValueError(f"{path}: {field} has {len(rows)} rows, DIMENSION is {dim}")
    out = []
    for i, row in enumerate(rows, 1):
        vals = row if isinstance(row, list) else [row]
        who = "the depot (node 1)" if i == 1 else f"customer {i - 1} (node {i})"
        if len(vals) != width:
            raise ValueError(
                f"{path}: {field} row {i} ({who}) has {len(vals)} values after the node "
                f"number, expected {width}"
            )
        try:
            out.append([float(v) for v in vals])
        except (TypeError, ValueError):
            raise ValueError(f"{path}: {field} row {i} ({who}) is not numeric: {vals}") from None
    return out


def read_vrplib(path: str | os.PathLike) -> MTVRPInstance:
    """Read a VRPLIB file (see the module docstring) as a batch of one instance (float64).

    Values keep the file's units; :func:`to_unit_square` rescales them for a policy.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    MTVRPInstance

    Raises
    ------
    ValueError
        Naming the file, field and customer: a malformed file, a TYPE that is not one of
        the 16 variants, a section the TYPE does not allow (or a missing one), a demand
        above the capacity, a time window that cannot be met, or a customer no route can
        serve within the length limit.
    """
    path = Path(path)
    data = _parse(path)
    if "dimension" not in data or not isinstance(data["dimension"], int) or data["dimension"] < 2:
        raise ValueError(f"{path}: DIMENSION (number of nodes, depot included) must be an int >= 2")
    dim = data["dimension"]
    if "edge_weight" in data or data.get("edge_weight_type", "EUC_2D") != "EUC_2D":
        raise ValueError(
            f"{path}: only Euclidean instances are supported (EDGE_WEIGHT_TYPE: EUC_2D with a "
            f"NODE_COORD_SECTION), got EDGE_WEIGHT_TYPE {data.get('edge_weight_type')!r}"
        )
    present = {k for k in ("backhaul", "time_window", "service_time") if k in data}
    if "type" in data:
        vtype = str(data["type"]).upper()
        if vtype not in VARIANTS:
            raise ValueError(f"{path}: TYPE {vtype!r} is not supported; use one of {VARIANTS}")
        o, b, lim, tw = variant_flags(vtype)
    else:
        o, b, lim, tw = False, "backhaul" in data, "distance" in data, "time_window" in data
        vtype = variant_name((o, b, lim, tw))
    for key, flag, field, what in (
        ("backhaul", b, "BACKHAUL_SECTION", "backhauls (B)"),
        ("distance", lim, "DISTANCE", "a route length limit (L)"),
        ("time_window", tw, "TIME_WINDOW_SECTION", "time windows (TW)"),
    ):
        if flag and key not in data:
            raise ValueError(f"{path}: TYPE {vtype} has {what} but the file has no {field}")
        if not flag and key in data:
            raise ValueError(
                f"{path}: the file has a {field} but TYPE {vtype} has no {what}; "
                "set TYPE to the variant with that constraint"
            )
    if "service_time" in present and not tw:
        raise ValueError(f"{path}: SERVICE_TIME_SECTION without time windows (TYPE {vtype})")
    for key in ("node_coord", "demand"):
        if key not in data:
            raise ValueError(f"{path}: missing {key.upper()}_SECTION")
    if "capacity" not in data or not isinstance(data["capacity"], int | float):
        raise ValueError(f"{path}: CAPACITY (one number) is missing or not a number")
    depot = data.get("depot")
    if depot is not None and [int(d) for d in list(depot)] != [0]:
        raise ValueError(f"{path}: DEPOT_SECTION must name exactly node 1 as the depot")
    xy = _column(data, "node_coord", dim, 2, path)
    q = [r[0] for r in _column(data, "demand", dim, 1, path)]
    p = [r[0] for r in _column(data, "backhaul", dim, 1, path)] if b else [0.0] * dim
    if q[0] != 0 or p[0] != 0:
        raise ValueError(f"{path}: the depot (node 1) must have demand 0, got {q[0]:g}/{p[0]:g}")
    if tw:
        windows = _column(data, "time_window", dim, 2, path)
        service = (
            [r[0] for r in _column(data, "service_time", dim, 1, path)]
            if "service_time" in data
            else [0.0] * dim
        )
    else:
        windows, service = [[0.0, math.inf]] * dim, [0.0] * dim
    limit = float(data["distance"]) if lim else math.inf
    f64 = torch.float64
    ins = MTVRPInstance(
        locs=torch.tensor([xy], dtype=f64),
        demand_linehaul=torch.tensor([q[1:]], dtype=f64),
        demand_backhaul=torch.tensor([p[1:]], dtype=f64),
        capacity=torch.tensor([float(data["capacity"])], dtype=f64),
        service_time=torch.tensor([service], dtype=f64),
        time_windows=torch.tensor([windows], dtype=f64),
        distance_limit=torch.tensor([limit], dtype=f64),
        open_route=torch.tensor([o]),
        flags=flags_tensor([vtype]),
    )
    if service[0] != 0:
        raise ValueError(f"{path}: SERVICE_TIME_SECTION: the depot (node 1) must have 0")
    validate_instance(ins, str(path))
    return ins


def to_unit_square(instance: MTVRPInstance) -> tuple[MTVRPInstance, torch.Tensor]:
    """Translate and scale every instance so that its nodes fit in ``[0, 1]^2``.

    Distances, service times, time windows and the length limit are divided by the same
    factor (unit speed), so feasibility is unchanged and costs scale by it.

    Returns
    -------
    instance : MTVRPInstance
    scale : Tensor, shape (B,)
        Multiply a cost of the rescaled instance by ``scale`` for the original units.
    """
    lo = instance.locs.amin(1, keepdim=True)
    scale = (instance.locs.amax(1) - instance.locs.amin(1)).amax(-1).clamp(min=1e-12)
    cp = instance.index(slice(None))
    cp.locs = (instance.locs - lo) / scale[:, None, None]
    cp.service_time = instance.service_time / scale[:, None]
    cp.time_windows = (instance.time_windows - instance.time_windows[:, :1, :1]) / scale[
        :, None, None
    ]
    cp.distance_limit = instance.distance_limit / scale
    return cp, scale


def write_solution(path: str | os.PathLike, routes, cost: float | None = None, **fields) -> Path:
    """Write routes in the VRPLIB solution format (``Route #k: c1 c2 ...``, then ``Cost``).

    Parameters
    ----------
    path : path-like
    routes : list of list of int
        Customers 1..N of each route, depot omitted (the CVRPLIB ``.sol`` numbering).
    cost : float, optional
    **fields
        More ``Key: value`` lines (for example ``Model``, ``Seconds``).
    """
    lines = [f"Route #{k}: " + " ".join(str(int(c)) for c in r) for k, r in enumerate(routes, 1)]
    if cost is not None:
        lines.append(f"Cost: {cost:.6f}")
    lines += [f"{k}: {v}" for k, v in fields.items()]
    return atomic_write_text(path, "\n".join(lines) + "\n")
