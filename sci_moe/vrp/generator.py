"""Batched multi-task VRP instances and RouteFinder's instance distribution.

Re-implements the MTVRP generator of RouteFinder (Berto et al. 2024, arXiv 2406.15007,
MIT licence; the distribution MoSES trains and tests on): locations uniform in
``[0, 1]^2`` (depot included), integer demands uniform in ``{1, ..., 9}``, vehicle
capacity 30 / 40 / 50 for ``N`` = 20 / 50 / 100, each customer a backhaul with
probability 0.2 (variants with B), a route length limit uniform in
``[2 max_i d_{0i}, 2.8]`` (L), and time windows with service times (TW):

.. math::

    s_i \\sim U(0.15, 0.18),\\quad \\ell_i \\sim U(0.18, 0.2),\\quad
    h_i = \\frac{T_{\\max} - s_i - \\ell_i}{d_{0i}} - 1,\\quad
    e_i = (1 + (h_i - 1) u_i)\\, d_{0i},\\quad l_i = e_i + \\ell_i

with :math:`T_{\\max} = 4.6` the depot closing time, unit speed and
:math:`u_i \\sim U(0, 1)`; so every customer can be served on a route of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from .variants import VARIANTS, flags_tensor

__all__ = ["CAPACITIES", "MAX_TIME", "MTVRPInstance", "generate_instances"]

#: Vehicle capacity by number of customers (RouteFinder's table).
CAPACITIES = {10: 20, 20: 30, 50: 40, 100: 50}
#: Depot closing time of the time-window variants.
MAX_TIME = 4.6
_MAX_DISTANCE_LIMIT = 2.8


@dataclass
class MTVRPInstance:
    """A batch of ``B`` instances with ``N`` customers each (node 0 is the depot).

    Absent constraints take neutral values (no backhaul demand, time windows
    ``[0, inf]``, service 0, length limit ``inf``), so one environment serves all
    16 variants.

    Attributes
    ----------
    locs : Tensor, shape (B, N + 1, 2)
        Coordinates; distances are Euclidean and travel takes unit speed.
    demand_linehaul, demand_backhaul : Tensor, shape (B, N)
        Delivery / pickup amount of each customer (a customer has one or the other).
    capacity : Tensor, shape (B,)
    service_time : Tensor, shape (B, N + 1)
    time_windows : Tensor, shape (B, N + 1, 2)
        Earliest and latest start of service; row 0 is the depot's opening hours.
    distance_limit : Tensor, shape (B,)
        Maximum route length (``inf`` without L); open routes do not count the return.
    open_route : Tensor, shape (B,), bool
    flags : Tensor, shape (B, 4), bool
        The variant's constraints ``(O, B, L, TW)``.
    """

    locs: torch.Tensor
    demand_linehaul: torch.Tensor
    demand_backhaul: torch.Tensor
    capacity: torch.Tensor
    service_time: torch.Tensor
    time_windows: torch.Tensor
    distance_limit: torch.Tensor
    open_route: torch.Tensor
    flags: torch.Tensor

    @property
    def batch_size(self) -> int:
        """Number of instances ``B``."""
        return self.locs.shape[0]

    @property
    def num_customers(self) -> int:
        """Customers per instance ``N``."""
        return self.locs.shape[1] - 1

    def distances(self) -> torch.Tensor:
        """Euclidean distance matrix, shape ``(B, N + 1, N + 1)``.

        Computed as the norm of the differences (``cdist``'s default switches to the
        matrix-product formula above 25 points, off by up to 5e-4 in float32 and with a
        nonzero diagonal, so finished rollouts would pay for their padding steps).
        """
        return torch.cdist(self.locs, self.locs, compute_mode="donot_use_mm_for_euclid_dist")

    def index(self, idx) -> MTVRPInstance:
        """The sub-batch ``idx`` (an index, slice or index tensor along ``B``)."""
        return MTVRPInstance(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def repeat_interleave(self, k: int) -> MTVRPInstance:
        """Every instance repeated ``k`` times in place (``B -> B k``), for multi-start."""
        return MTVRPInstance(
            **{f.name: getattr(self, f.name).repeat_interleave(k, 0) for f in fields(self)}
        )

    def to(self, *args, **kwargs) -> MTVRPInstance:
        """Float tensors cast/moved like ``Tensor.to``; bool tensors only moved.

        Takes ``Tensor.to``'s arguments, the device positional (``ins.to("cuda")``, as
        :func:`sci_moe._util.to_device` calls it) or by keyword; the bool tensors go to
        the device the float tensors went to.
        """
        moved = {
            f.name: getattr(self, f.name).to(*args, **kwargs)
            for f in fields(self)
            if getattr(self, f.name).is_floating_point()
        }
        device = moved["locs"].device
        non_blocking = bool(kwargs.get("non_blocking", False))
        out = {
            f.name: moved[f.name]
            if f.name in moved
            else getattr(self, f.name).to(device=device, non_blocking=non_blocking)
            for f in fields(self)
        }
        return MTVRPInstance(**out)

    @staticmethod
    def cat(parts) -> MTVRPInstance:
        """Concatenate batches with the same ``N``."""
        parts = list(parts)
        return MTVRPInstance(
            **{f.name: torch.cat([getattr(p, f.name) for p in parts]) for f in fields(parts[0])}
        )


def generate_instances(
    batch_size: int,
    num_customers: int,
    variants="CVRP",
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    backhaul_ratio: float = 0.2,
) -> MTVRPInstance:
    """Sample instances from RouteFinder's multi-task distribution.

    Parameters
    ----------
    batch_size, num_customers : int
        ``B`` and ``N``; the capacity is :data:`CAPACITIES` [N] (or ``N + 10`` capped to 50
        for other sizes).
    variants : str or sequence of str
        One variant name for all, or a list of names used in turn (instance ``b`` gets
        ``variants[b % len(variants)]``).
    seed, generator
        Randomness (one of them; ``seed`` builds a fresh generator).
    dtype : torch.dtype
    backhaul_ratio : float
        Probability that a customer is a backhaul in the B variants.

    Returns
    -------
    MTVRPInstance
    """
    if batch_size < 1 or num_customers < 1:
        raise ValueError(
            f"batch_size and num_customers must be >= 1, got {batch_size}, {num_customers}"
        )
    names = [variants] if isinstance(variants, str) else list(variants)
    for n in names:
        if n not in VARIANTS:
            raise ValueError(f"unknown VRP variant {n!r}; choose one of {', '.join(VARIANTS)}")
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
    g = generator
    B, N = batch_size, num_customers
    flags = flags_tensor([names[b % len(names)] for b in range(B)])

    def u(*shape):
        return torch.rand(*shape, generator=g, dtype=torch.float64)

    locs = u(B, N + 1, 2)
    lh = torch.randint(1, 10, (B, N), generator=g).double()
    bh = torch.randint(1, 10, (B, N), generator=g).double()
    is_bh = (u(B, N) < backhaul_ratio) & flags[:, 1:2]
    demand_linehaul = torch.where(is_bh, 0.0, lh)
    demand_backhaul = torch.where(is_bh, bh, 0.0)
    capacity = torch.full((B,), float(CAPACITIES.get(N, min(50, N + 10))), dtype=torch.float64)

    d0 = (locs[:, 1:] - locs[:, :1]).norm(dim=-1)  # (B, N)
    lo = 2 * d0.max(dim=1).values + 1e-6
    hi = torch.maximum(torch.full_like(lo, _MAX_DISTANCE_LIMIT), lo + 1e-6)
    limit = lo + (hi - lo) * u(B)
    distance_limit = torch.where(flags[:, 2], limit, torch.inf)

    service = 0.15 + 0.03 * u(B, N)
    length = 0.18 + 0.02 * u(B, N)
    h_max = (MAX_TIME - service - length) / d0 - 1
    start = (1 + (h_max - 1) * u(B, N)) * d0
    tw = torch.stack([start, start + length], dim=-1)
    depot_tw = torch.tensor([0.0, MAX_TIME], dtype=torch.float64).expand(B, 1, 2)
    tw = torch.cat([depot_tw, tw], dim=1)
    service = torch.cat([torch.zeros(B, 1, dtype=torch.float64), service], dim=1)
    has_tw = flags[:, 3]
    neutral = torch.tensor([0.0, torch.inf], dtype=torch.float64)
    time_windows = torch.where(has_tw[:, None, None], tw, neutral)
    service_time = torch.where(has_tw[:, None], service, 0.0)
    return MTVRPInstance(
        locs=locs.to(dtype),
        demand_linehaul=demand_linehaul.to(dtype),
        demand_backhaul=demand_backhaul.to(dtype),
        capacity=capacity.to(dtype),
        service_time=service_time.to(dtype),
        time_windows=time_windows.to(dtype),
        distance_limit=distance_limit.to(dtype),
        open_route=flags[:, 0].clone(),
        flags=flags,
    )
