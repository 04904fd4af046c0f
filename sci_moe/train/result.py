"""What the training engine reports and writes: its results, the step hooks' view, its files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .._util import previous_path

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_NAME",
    "METRICS_NAME",
    "StepInfo",
    "TrainResult",
    "TrainingDiverged",
    "run_files",
]

CHECKPOINT_NAME = "checkpoint.pt"
METRICS_NAME = "metrics.jsonl"
#: ``format`` key of every engine checkpoint.
CHECKPOINT_FORMAT = "sci-moe-train/1"


class TrainingDiverged(RuntimeError):
    """The loss (or the gradient norm) became NaN or infinite; the message names the step.

    The last good checkpoint is kept (the engine writes none after the failure).
    """


@dataclass
class StepInfo:
    """What a hook sees after an optimiser step.

    Attributes
    ----------
    step : int
        Completed optimiser steps.
    model : torch.nn.Module
    optimizer : torch.optim.Optimizer
    extra : object
        The third element the loss returned, if any (routing infos, ...).
    metrics : dict
        The step's training metrics (``loss`` and what the loss returned).
    epoch : int
        The epoch of the step's batch.
    """

    step: int
    model: nn.Module
    optimizer: torch.optim.Optimizer
    extra: Any
    metrics: dict
    epoch: int


@dataclass
class TrainResult:
    """What a call of :meth:`Trainer.fit` did.

    Attributes
    ----------
    step : int
        Completed optimiser steps of the run (all pieces).
    steps : int
        The run's target.
    reason : str
        ``"completed"``, ``"early_stop"``, ``"flat"`` (the monitored curve was flat:
        ``stop_when_flat``), ``"budget"`` (``max_hours`` spent: resume to continue) or
        ``"interrupted"`` (``stop_after``).
    best_step : int or None
        The step of the best evaluation of ``monitor``.
    best_metric : float or None
    evals : list of dict
        Every evaluation: ``step`` and the metrics.
    train_time_s : float
        Optimisation wall time of the run, evaluations excluded, all pieces.
    resumed_from : int or None
        The checkpoint step this call started from.
    """

    step: int
    steps: int
    reason: str
    best_step: int | None
    best_metric: float | None
    evals: list[dict] = field(default_factory=list)
    train_time_s: float = 0.0
    resumed_from: int | None = None

    @property
    def finished(self) -> bool:
        """Whether the run is over (completed, stopped early or flat), not paused."""
        return self.reason in ("completed", "early_stop", "flat")

    @property
    def last_eval(self) -> dict | None:
        """The latest evaluation, or ``None``."""
        return self.evals[-1] if self.evals else None

    def to_dict(self) -> dict:
        """Plain JSON values."""
        return {
            "step": self.step,
            "steps": self.steps,
            "reason": self.reason,
            "finished": self.finished,
            "best_step": self.best_step,
            "best_metric": self.best_metric,
            "train_time_s": self.train_time_s,
            "resumed_from": self.resumed_from,
            "evals": self.evals,
        }


def run_files(out_dir: str | Path) -> list[Path]:
    """The files the engine writes in ``out_dir`` (what ``--overwrite`` may delete)."""
    out = Path(out_dir)
    ck = out / CHECKPOINT_NAME
    return [ck, previous_path(ck), out / METRICS_NAME]
