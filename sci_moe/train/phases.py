"""One run of several training phases (stages, tasks), each on its own :class:`Trainer`.

Some methods train in phases that differ in their parameters, data or loss: MoSES's three
stages, pre-training then fine-tuning of merged graph experts, the tasks of
class-incremental learning. Each phase is one :class:`~sci_moe.train.Trainer` (its own
optimiser and schedule) writing to its own subfolder of the run's folder; :class:`Phases`
holds what spans them:

* resuming: a phase whose folder holds a checkpoint is resumed (a finished one only
  restores its final weights), a phase without one starts fresh;
* the wall-time budget ``max_hours`` of the whole run (a phase gets what is left; when
  nothing is left the run pauses before the next phase);
* a deliberate interruption after ``stop_after`` optimiser steps of this call (tests of
  exact resume);
* one summary of the run (:meth:`Phases.summary`).

Between phases the method may run deterministic work outside the engine (fitting a
memory, re-routing); on resume it repeats that work from the restored weights, so a
resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .._util import previous_path
from .distributed import broadcast_object, current_context
from .result import TrainResult

__all__ = ["Phases"]


class Phases:
    """The phases of one training run, in order.

    Parameters
    ----------
    out_dir : path, optional
        The run's folder; phase ``name`` writes to ``out_dir/name``. Without it nothing is
        written and nothing can be resumed.
    resume : bool
        Resume the phases that have a checkpoint.
    max_hours : float, optional
        Wall-time budget of this call, shared by its phases.
    stop_after : int, optional
        Return after this many optimiser steps of this call, over all phases.
    name : str
        Label of messages.

    Examples
    --------
    >>> import torch
    >>> from sci_moe.train import Phases, ShuffledBatches, TrainConfig, Trainer
    >>> x = torch.randn(16, 2); model = torch.nn.Linear(2, 1)
    >>> data = ShuffledBatches(16, 4, lambda idx: x[idx])
    >>> loss = lambda m, b: m(b).square().mean()
    >>> cfg = TrainConfig(steps=3, batch_size=4, progress=False)
    >>> run = Phases(None)
    >>> for phase in ("first", "second"):
    ...     res = run.fit(phase, Trainer(model, loss, data, run.config(cfg)))
    >>> run.summary()["step"], run.summary()["reason"]
    (6, 'completed')
    """

    def __init__(
        self,
        out_dir: str | Path | None,
        *,
        resume: bool = False,
        max_hours: float | None = None,
        stop_after: int | None = None,
        name: str = "train",
    ) -> None:
        if stop_after is not None and stop_after < 1:
            raise ValueError(f"stop_after must be >= 1, got {stop_after}")
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.resume, self.max_hours, self.stop_after, self.name = (
            resume,
            max_hours,
            stop_after,
            name,
        )
        self.ctx = current_context()
        self.results: dict[str, TrainResult] = {}
        self.reason: str | None = None
        self._ran = 0
        self._t0 = time.perf_counter()

    def folder(self, phase: str) -> Path | None:
        """``out_dir/phase`` (``None`` without ``out_dir``)."""
        return self.out_dir / phase if self.out_dir is not None else None

    def has_checkpoint(self, phase: str) -> bool:
        """Whether ``phase`` has a checkpoint to resume (only with ``resume``)."""
        folder = self.folder(phase)
        if not self.resume or folder is None:
            return False
        ck = folder / "checkpoint.pt"
        return ck.exists() or previous_path(ck).exists()

    def _hours_left(self) -> float | None:
        if self.max_hours is None:
            return None
        return self.max_hours - (time.perf_counter() - self._t0) / 3600

    @property
    def paused(self) -> bool:
        """Whether the run stopped before its end (budget or interruption)."""
        return self.reason is not None

    def can_start(self, phase: str) -> bool:
        """Whether ``phase`` may run now; if not, the run is paused (a message says why).

        A phase with a checkpoint to resume always may (it restores its weights).
        """
        if self.paused:
            return False
        reason = None
        if not self.has_checkpoint(phase):
            left = self._hours_left()
            if self.stop_after is not None and self._ran >= self.stop_after:
                reason = "interrupted"
            elif left is not None and left <= 0:
                reason = "budget"
        reason = broadcast_object(reason, self.ctx)
        if reason is None:
            return True
        self.reason = reason
        if reason == "budget":
            self._say(
                f"the {self.max_hours:g} h budget is spent before phase {phase!r}; the "
                "finished phases are saved. Continue with the same command and --resume"
            )
        return False

    def config(self, cfg, **changes):
        """``cfg`` with ``changes`` and ``max_hours`` set to what is left of the budget."""
        left = self._hours_left()
        if left is not None:
            changes["max_hours"] = max(left, 1e-9)
        return dataclasses.replace(cfg, **changes) if changes else cfg

    def fit(self, phase: str, trainer) -> TrainResult:
        """Run (or resume) ``trainer`` as ``phase``; pauses the run if it did not finish."""
        return self.run(phase, trainer.fit)

    def run(self, phase: str, fit: Callable[..., TrainResult]) -> TrainResult:
        """As :meth:`fit` for a method's own training function.

        Parameters
        ----------
        phase : str
        fit : callable
            ``fit(resume=..., stop_after=...) -> TrainResult``, training with
            ``out_dir=self.folder(phase)`` (for example ``lambda **kw: pretrain(...,
            out_dir=run.folder("pretrain"), **kw)``).

        Returns
        -------
        TrainResult
        """
        left = None if self.stop_after is None else self.stop_after - self._ran
        res = fit(resume=self.has_checkpoint(phase), stop_after=left)
        self._ran += res.step - (res.resumed_from or 0)
        self.results[phase] = res
        if not res.finished:
            self.reason = res.reason
        return res

    def summary(self) -> dict:
        """The run as plain data: ``reason``, ``finished``, ``step``, ``steps`` (of the
        phases reached) and each phase's :meth:`TrainResult.to_dict` under ``phases``."""
        last = next(reversed(self.results.values()), None)
        reason = self.reason or (last.reason if last is not None else "completed")
        return {
            "reason": reason,
            "finished": self.reason is None,
            "step": sum(r.step for r in self.results.values()),
            "steps": sum(r.steps for r in self.results.values()),
            "train_time_s": sum(r.train_time_s for r in self.results.values()),
            "phases": {k: r.to_dict() for k, r in self.results.items()},
        }

    def _say(self, message: str) -> None:
        if self.ctx.is_main:
            print(f"{self.name}: {message}", file=sys.stderr, flush=True)
