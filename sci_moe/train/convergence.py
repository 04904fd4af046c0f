"""Whether a validation curve is flat: the convergence criterion of the benchmarks.

A run is *flat* (trained to convergence) when the best value of its last ``tail`` of the
steps is less than ``tol`` (relative) better than the best value before them: with the
defaults, "< 1 % better over the last 20 % of the steps" (issue 43). A metric counted
over a few items (a top-1 accuracy over 150 validation sentences moves in steps of 1/150)
gives ``atol``, its resolution: a gain below it does not count either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["is_flat", "tail_gain"]


def is_flat(
    steps: Sequence[float],
    values: Sequence[float],
    *,
    tail: float = 0.2,
    tol: float = 0.01,
    mode: str = "min",
    min_points: int = 5,
    atol: float = 0.0,
) -> bool:
    """Whether the curve ``values`` over ``steps`` improved by less than ``tol`` in its tail.

    Parameters
    ----------
    steps : sequence of float, shape (n,)
        Increasing steps (or epochs, tokens) of the evaluations.
    values : sequence of float, shape (n,)
        The validation metric at each step.
    tail : float
        Fraction of the last step that is the tail, in (0, 1): the evaluations after step
        ``(1 - tail) * steps[-1]``.
    tol : float
        Relative improvement below which the curve counts as flat, >= 0.
    mode : {"min", "max"}
        Whether a smaller (a loss) or a larger (an accuracy) value is better.
    min_points : int
        Fewer evaluations than this are never flat (nor a tail or a head without one).
    atol : float
        Absolute gain below which the curve counts as flat too, >= 0, in the metric's
        units: the metric's resolution (a fraction of ``n`` items moves in steps of
        ``1 / n``); 0 (the default) leaves the relative rule alone.

    Returns
    -------
    bool
        Whether ``gain = best(head) - best(tail)`` is ``<= 0``, ``< tol * |best(head)|`` or
        ``< atol`` for ``"min"`` (mirrored for ``"max"``); false when a value is not
        finite.

    Examples
    --------
    >>> is_flat([1, 2, 3, 4, 5], [5.0, 2.0, 1.0, 0.999, 0.998])
    True
    >>> is_flat([1, 2, 3, 4, 5], [5.0, 4.0, 3.0, 2.0, 1.0])
    False

    A top-1 accuracy over 150 items, one item better in the tail (2 % relative):

    >>> steps, top1 = [1, 2, 3, 4, 5], [0.1, 0.3, 0.32, 0.3333, 0.34]
    >>> is_flat(steps, top1, mode="max"), is_flat(steps, top1, mode="max", atol=0.01)
    (False, True)
    """
    if not tol >= 0.0:
        raise ValueError(f"tol must be >= 0, got {tol!r}")
    if not atol >= 0.0:
        raise ValueError(f"atol must be >= 0, got {atol!r}")
    split = _head_tail(steps, values, tail, mode, min_points)
    if split is None:
        return False
    head, rest = split
    gain = min(head) - min(rest)
    return gain <= 0.0 or gain < tol * abs(min(head)) or gain < atol


def tail_gain(
    steps: Sequence[float],
    values: Sequence[float],
    *,
    tail: float = 0.2,
    mode: str = "min",
    min_points: int = 5,
) -> float:
    """The relative gain that :func:`is_flat` compares with its ``tol``.

    Parameters
    ----------
    steps, values, tail, mode, min_points
        As in :func:`is_flat`.

    Returns
    -------
    float
        ``(best(head) - best(tail)) / |best(head)|`` for ``"min"`` (mirrored for
        ``"max"``): positive when the tail still improved, <= 0 when it did not; NaN when
        :func:`is_flat` could not judge the curve (too few points, a value not finite, an
        empty head or tail, a best head value of 0).

    Examples
    --------
    >>> round(tail_gain([1, 2, 3, 4, 5], [5.0, 4.0, 3.0, 2.0, 1.0]), 6)
    0.5
    """
    split = _head_tail(steps, values, tail, mode, min_points)
    if split is None or min(split[0]) == 0.0:
        return math.nan
    head, rest = split
    return (min(head) - min(rest)) / abs(min(head))


def _head_tail(steps, values, tail, mode, min_points):
    """The (sign-adjusted) values before and after the tail's cut; ``None`` when either is
    empty or the curve cannot be judged."""
    if not 0.0 < tail < 1.0:
        raise ValueError(f"tail must be in (0, 1), got {tail!r}")
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    if len(steps) != len(values):
        raise ValueError(f"{len(steps)} steps but {len(values)} values")
    if len(values) < max(min_points, 2) or not all(math.isfinite(float(v)) for v in values):
        return None
    cut = (1.0 - tail) * float(steps[-1])
    sign = 1.0 if mode == "min" else -1.0
    head = [sign * float(v) for s, v in zip(steps, values, strict=True) if s <= cut]
    rest = [sign * float(v) for s, v in zip(steps, values, strict=True) if s > cut]
    return (head, rest) if head and rest else None
