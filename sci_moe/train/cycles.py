"""Training until flat, in cycles: :func:`until_flat` and :func:`concat`.

A model that must train until flat trains in *cycles*: each a fresh warm-up + cosine
schedule of a fixed number of steps from the previous cycle's weights, its batches drawn
with the seed ``seed + CYCLE_SEED * c`` in cycle ``c`` (cycle 0 is the plain run), until
the validation curve of all cycles on one step axis is flat by the caller's rule (usually
:func:`~sci_moe.train.is_flat`) or a cap of cycles is spent (:func:`until_flat`). Every
curve is so judged at the end of an annealed schedule, never in the middle of one at a high
learning rate (what stopping inside one long schedule, ``TrainConfig.stop_when_flat``,
does). A run that resumes cycle by cycle (one unit per cycle) drives :func:`concat` itself.
The benchmarks use it through ``benchmarks/_common``.

Examples
--------
>>> from sci_moe.train.cycles import until_flat
>>> curves = {0: [[0, 3.0], [10, 2.0]], 1: [[0, 2.0], [10, 1.99]]}
>>> flat = lambda curve: curve[-1][1] > 0.99 * curve[-2][1]  # < 1 % better at the end
>>> until_flat(lambda c, seed: curves[c], flat, max_cycles=3)
([[0, 3.0], [10, 2.0], [20, 1.99]], 2, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["CYCLE_SEED", "concat", "split_cycles", "until_flat"]


CYCLE_SEED = 100  # cycle c draws its batches with seed + CYCLE_SEED * c


def concat(curves: Sequence[Sequence[Sequence[float]]], cycle_steps: int | None = None) -> list:
    """The validation curves of consecutive training cycles on one step axis.

    Parameters
    ----------
    curves : sequence of curves
        Cycle ``c``'s curve at index ``c``: ``[[step, value], ...]``, the steps counted from
        that cycle's start (its evaluation before its first step at step 0).
    cycle_steps : int, optional
        Steps of every cycle: cycle ``c``'s steps are shifted by ``c * cycle_steps``. None
        (default): by the sum of the earlier cycles' last steps (each cycle ends at its last
        evaluation).

    Returns
    -------
    list of [step, value]
        The joined curve. A later cycle's evaluation at its step 0 repeats the previous
        cycle's end and is left out; steps and values are kept as given (ints stay ints).
    """
    out: list = []
    offset = 0
    for c, curve in enumerate(curves):
        if cycle_steps is not None:
            offset = c * cycle_steps
        out += [[offset + s, v] for s, v in curve if not (c and s == 0)]
        if cycle_steps is None:
            offset += curve[-1][0]
    return out


def split_cycles(curve: Sequence[Sequence[float]], cycle_steps: int) -> list:
    """The per-cycle curves of a joined one: the inverse of :func:`concat` with ``cycle_steps``.

    Cycle ``c`` gets the points with steps in ``(c * cycle_steps, (c + 1) * cycle_steps]``
    (cycle 0 its step-0 point too), counted from its own start; a later cycle's step-0
    point, which :func:`concat` leaves out, is the previous cycle's end. So
    ``concat(split_cycles(curve, n), n) == curve`` for a curve :func:`concat` made.

    Parameters
    ----------
    curve : sequence of [step, value]
        A joined curve, steps ascending, ending at the end of its last cycle.
    cycle_steps : int
        Steps of every cycle (>= 1).

    Returns
    -------
    list of curves
        ``[[[step, value], ...], ...]``, one per cycle.

    Raises
    ------
    ValueError
        When ``cycle_steps`` is below 1 or the curve does not end at a cycle's end.
    """
    if cycle_steps < 1:
        raise ValueError(f"cycle_steps must be >= 1, got {cycle_steps}")
    if not curve or curve[-1][0] % cycle_steps:
        raise ValueError(
            f"the curve must end at the end of a cycle of {cycle_steps} steps "
            f"(last step {curve[-1][0] if curve else None})"
        )
    out: list = [[] for _ in range(int(curve[-1][0]) // cycle_steps)]
    for s, v in curve:
        c = 0 if s == 0 else (int(s) - 1) // cycle_steps
        if c and not out[c]:
            out[c].append([0, out[c - 1][-1][1]])
        out[c].append([s - c * cycle_steps, v])
    return out


def until_flat(
    cycle: Callable[[int, int], Sequence[Sequence[float]]],
    judge: Callable[[list], bool],
    max_cycles: int,
    seed: int = 0,
    cycle_steps: int | None = None,
    min_cycles: int = 1,
    done: Sequence[Sequence[Sequence[float]]] = (),
) -> tuple[list, int, bool]:
    """Train in cycles until the joined validation curve is flat or ``max_cycles`` ran.

    Calls ``cycle(c, seed + CYCLE_SEED * c)`` for ``c = 0, 1, ...`` in order; after each
    cycle from the ``min_cycles``-th on, ``judge`` sees the curves so far joined by
    :func:`concat`, and a flat one ends the run.

    ``min_cycles=2`` asks that one more annealed cycle gain too little before a curve
    counts as flat: the end of a single warm-up + cosine schedule always looks flat (the
    learning rate decays to its floor), also when a restart would still gain several per
    cent (measured on the Routing Mamba benchmark's language models: every run given a
    second cycle ended it 3-5 % lower).

    Parameters
    ----------
    cycle : callable
        ``cycle(c, cycle_seed)`` trains cycle ``c`` (from the previous cycle's weights when
        ``c > 0``) with batch seed ``cycle_seed`` and returns its validation curve
        ``[[step, value], ...]`` (steps from the cycle's own start).
    judge : callable
        ``judge(curve)``: whether a joined curve ``[[step, value], ...]`` is flat.
    max_cycles : int
        The most cycles to run (>= 1).
    seed : int
        The seed of cycle 0.
    cycle_steps : int, optional
        Steps per cycle, passed to :func:`concat` (None: each cycle ends at its last
        evaluation).
    min_cycles : int
        The fewest cycles before the curve is judged (1 to ``max_cycles``).
    done : sequence of curves
        The curves of cycles already trained (cycle ``c`` at index ``c``; default none):
        a run stopped at an earlier, smaller cap continues at cycle ``len(done)``, its
        ``cycle`` starting from the weights the last of them ended with. They count
        towards ``max_cycles`` and are judged with the new ones.

    Returns
    -------
    curve : list of [step, value]
        The joined validation curve of the cycles run.
    cycles : int
        How many cycles ran (1 to ``max_cycles``).
    converged : bool
        ``judge(curve)``: False when the cap was reached with the curve not flat.

    Raises
    ------
    ValueError
        When ``max_cycles`` is below 1 or ``min_cycles`` outside 1 to ``max_cycles``.
    """
    if max_cycles < 1:
        raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
    if not 1 <= min_cycles <= max_cycles:
        raise ValueError(f"min_cycles must be in 1..max_cycles={max_cycles}, got {min_cycles}")
    curves: list = [list(c) for c in done]
    if len(curves) > max_cycles:
        raise ValueError(
            f"{len(curves)} cycles are done, more than max_cycles={max_cycles}: a run "
            "continues only under a cap at least as large as the one it stopped at"
        )
    if curves and len(curves) >= min_cycles and judge(concat(curves, cycle_steps)):
        curve = concat(curves, cycle_steps)
        return curve, len(curves), True
    while len(curves) < max_cycles:
        c = len(curves)
        curves.append(cycle(c, seed + CYCLE_SEED * c))
        if len(curves) >= min_cycles and judge(concat(curves, cycle_steps)):
            break
    curve = concat(curves, cycle_steps)
    return curve, len(curves), judge(curve)
