"""Wall-clock timing in this process: :func:`time_fn` (repeats after warm-up, CUDA
synchronised) and :func:`interleaved` (contestants in rotating order, so changing load
reaches every one alike)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Timing", "interleaved", "time_fn"]


@dataclass
class Timing:
    """Wall-clock seconds of the timed repeats (warm-up calls excluded)."""

    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """``(max - min) / median``: a quick sign of a noisy measurement."""
        return (max(self.times) - min(self.times)) / self.median


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each closure, interleaved: one warm-up call each, then
    ``repeats`` rounds in which every closure runs once, the order rotated per round (so
    load that changes between rounds reaches every contestant alike)."""
    names = list(fns)
    for n in names:
        fns[n]()
    out = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            fns[n]()
            out[n].append(time.perf_counter() - t0)
    return out


def time_fn(fn: Callable[[], object], repeats: int = 3, warmup: int = 1) -> Timing:
    """Time ``fn()`` ``repeats`` times after ``warmup`` untimed calls.

    Synchronises CUDA (when present) around each call, so asynchronous kernels are
    counted. Report :attr:`Timing.median`.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    _sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return Timing(times)
