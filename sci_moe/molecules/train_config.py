"""Options of SPiCE training (:func:`sci_moe.molecules.fit`): epochs, batch, optimiser and
the learning-rate schedule as a function of the optimiser step."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TrainConfig"]

_SCHEDULES = ("cosine", "linear", "constant")


@dataclass
class TrainConfig:
    """Options of :func:`fit`.

    Parameters
    ----------
    epochs : int
        Maximum number of epochs (the run's total, also when resuming).
    batch_size : int
        Molecules per optimiser step.
    lr : float
        Peak learning rate (AdamW).
    weight_decay : float
        AdamW decoupled weight decay on matrices (``dim >= 2``); none on biases and norms.
    schedule : {"cosine", "linear", "constant"}
        LR after warm-up: cosine or linear decay from ``lr`` to ``min_lr_ratio * lr`` at
        the last step of ``epochs``, or constant ``lr``.
    warmup_epochs : float
        Linear warm-up from ``warmup_start * lr`` to ``lr`` over this many epochs.
    warmup_start : float
        Starting factor of the warm-up (SPiCE: 0.2).
    min_lr_ratio : float
        Final LR factor of the decaying schedules (SPiCE: 0.01).
    patience : int
        Stop after this many epochs without a better validation MAE (0: never).
    grad_clip : float or None
        Global gradient-norm clip.
    upcycle_epochs : int
        For a SPiCE built with ``upcycle=True``: train the dense expert for this many
        epochs, then copy it into every expert (and its AdamW moments) and continue
        with routing. Early stopping only counts epochs after upcycling; the best
        validation epoch (whose weights are returned) may still be a dense one.
    seed : int
        Seeds the data order and the global torch RNG (router noise).
    eval_batch_size : int, optional
        Molecules per evaluation batch (default ``batch_size``).
    checkpoint_every : int
        With ``out_dir``, write the checkpoint every this many epochs and at the end.
    progress : bool
        tqdm progress bar over epochs (only when stderr is a terminal).
    """

    epochs: int = 100
    batch_size: int = 8
    lr: float = 5e-4
    weight_decay: float = 1e-3
    schedule: str = "cosine"
    warmup_epochs: float = 5.0
    warmup_start: float = 0.2
    min_lr_ratio: float = 0.01
    patience: int = 30
    grad_clip: float | None = 10.0
    upcycle_epochs: int = 0
    seed: int = 0
    eval_batch_size: int | None = None
    checkpoint_every: int = 1
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.schedule not in _SCHEDULES:
            raise ValueError(f"schedule must be one of {_SCHEDULES}, got {self.schedule!r}")
        if self.warmup_epochs < 0 or self.patience < 0 or self.upcycle_epochs < 0:
            raise ValueError("warmup_epochs, patience and upcycle_epochs must be >= 0")
        if not 0 < self.warmup_start <= 1:
            raise ValueError(f"warmup_start must be in (0, 1], got {self.warmup_start}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip}")
        if self.eval_batch_size is None:
            self.eval_batch_size = self.batch_size
        if self.eval_batch_size < 1:
            raise ValueError(f"eval_batch_size must be >= 1, got {self.eval_batch_size}")

    def lr_at(self, step: int, steps_per_epoch: int) -> float:
        """Learning rate of optimiser step ``step`` (0-based).

        Warm-up: ``lr * (s + (1 - s) * step / W)`` for ``step < W`` (``s`` =
        ``warmup_start``, ``W = warmup_epochs * steps_per_epoch``); then ``lr`` times
        ``m + (1 - m) * 0.5 (1 + cos(pi u))`` (cosine), ``1 - (1 - m) u`` (linear) or 1
        (constant), with ``u`` going from 0 after warm-up to 1 at the last step.
        """
        warm = round(self.warmup_epochs * steps_per_epoch)
        if step < warm:
            s = self.warmup_start
            return self.lr * (s + (1 - s) * step / warm)
        if self.schedule == "constant":
            return self.lr
        last = self.epochs * steps_per_epoch - 1
        u = min(1.0, (step - warm) / max(1, last - warm))
        m = self.min_lr_ratio
        if self.schedule == "cosine":
            return self.lr * (m + (1 - m) * 0.5 * (1 + math.cos(math.pi * u)))
        return self.lr * (1 - (1 - m) * u)
