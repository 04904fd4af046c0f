"""Learning-rate schedules as a pure function of the optimiser step (nothing to checkpoint)."""

from __future__ import annotations

import math

__all__ = ["lr_factor", "warmup_steps"]


def warmup_steps(steps: int, warmup: float) -> int:
    """Steps of linear warm-up: ``round(warmup * steps)``, at most ``steps - 1``."""
    return max(0, min(steps - 1, round(warmup * steps)))


def lr_factor(
    step: int, steps: int, schedule: str = "cosine", warmup: float = 0.0, min_lr_ratio: float = 0.0
) -> float:
    """Factor of the peak learning rate at optimiser step ``step`` (0-based) of ``steps``.

    Warm-up (``s < W``, :func:`warmup_steps`): ``(s + 1) / (W + 1)``. Then, with
    ``u = (s - W) / max(1, steps - 1 - W)`` going from 0 to 1 at the last step and
    ``m = min_lr_ratio``: cosine ``m + (1 - m) (1 + cos(pi u)) / 2``, linear
    ``1 - (1 - m) u``, constant 1. Every factor lies in ``(0, 1]`` when ``m > 0``.

    Examples
    --------
    >>> [round(lr_factor(s, 4, "linear", warmup=0.5, min_lr_ratio=0.0), 3) for s in range(4)]
    [0.333, 0.667, 1.0, 0.0]
    >>> lr_factor(0, 1, "cosine", warmup=0.5)
    1.0
    """
    if steps < 1 or step < 0:
        raise ValueError(f"need steps >= 1 and step >= 0, got step={step}, steps={steps}")
    warm = warmup_steps(steps, warmup)
    if step < warm:
        return (step + 1) / (warm + 1)
    if schedule == "constant":
        return 1.0
    u = min(1.0, (step - warm) / max(1, steps - 1 - warm))
    if schedule == "cosine":
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * u))
    if schedule == "linear":
        return 1 - (1 - min_lr_ratio) * u
    raise ValueError(f"unknown schedule {schedule!r}; use cosine, linear or constant")
