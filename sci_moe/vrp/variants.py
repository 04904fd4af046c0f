"""The 16 multi-task VRP variants: CVRP combined with any subset of {O, B, L, TW}.

Names follow RouteFinder (Berto et al. 2024) and MoSES (Pan et al., NeurIPS 2025,
arXiv 2510.21453): ``"O"`` open routes (no return to the depot), ``"B"`` backhauls
(linehaul customers before backhaul customers on every route), ``"L"`` a route
length (duration) limit, ``"TW"`` time windows with service times.
"""

from __future__ import annotations

import itertools

import torch

__all__ = ["BASIS", "HELD_OUT", "SEEN", "VARIANTS", "flags_tensor", "variant_flags", "variant_name"]

#: The basis constraints, in the order of the experts and of :func:`variant_flags`.
BASIS: tuple[str, ...] = ("O", "B", "L", "TW")


def variant_name(flags) -> str:
    """Name of the variant with constraint ``flags`` (4 booleans in :data:`BASIS` order).

    >>> variant_name([True, True, False, True])
    'OVRPBTW'
    """
    o, b, l_, tw = (bool(f) for f in flags)
    return (
        ("O" if o else "")
        + ("" if (b or l_ or tw or o) else "C")
        + "VRP"
        + ("B" if b else "")
        + ("L" if l_ else "")
        + ("TW" if tw else "")
    )


#: All 16 variant names, ordered by the number of constraints.
VARIANTS: tuple[str, ...] = tuple(
    variant_name(f)
    for f in sorted(itertools.product([False, True], repeat=4), key=lambda f: (sum(f), f[::-1]))
)


def variant_flags(name: str) -> tuple[bool, bool, bool, bool]:
    """Constraint flags ``(O, B, L, TW)`` of a variant name such as ``"OVRPBLTW"``.

    Raises
    ------
    ValueError
        For a name that is not one of :data:`VARIANTS`.
    """
    for f in itertools.product([False, True], repeat=4):
        if variant_name(f) == name:
            return f
    raise ValueError(f"unknown VRP variant {name!r}; choose one of {', '.join(VARIANTS)}")


#: Variants with at most two constraints: the training mixture of the benchmark.
SEEN: tuple[str, ...] = tuple(v for v in VARIANTS if sum(variant_flags(v)) <= 2)
#: Variants with three or four constraints: never trained on (zero-shot composition).
HELD_OUT: tuple[str, ...] = tuple(v for v in VARIANTS if sum(variant_flags(v)) >= 3)


def flags_tensor(names, device=None) -> torch.Tensor:
    """Boolean tensor of shape ``(len(names), 4)`` with the flags of each variant."""
    return torch.tensor([variant_flags(n) for n in names], dtype=torch.bool, device=device)
