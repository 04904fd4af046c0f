"""Options of SPiCE training (:func:`sci_moe.molecules.spice.fit`): the engine's options counted in
epochs.

:class:`TrainConfig` extends :class:`sci_moe.train.TrainConfig`: a run lasts ``epochs``
passes over the training molecules, warms up over ``warmup_epochs``, evaluates once per
epoch and stops after ``patience`` epochs without a better validation score. The engine's
step-counted fields (``steps``, ``eval_every``, ``warmup``) follow from these and the
number of batches per epoch (:meth:`TrainConfig.for_batches`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..._util import check_int_attr
from ...train import TrainConfig as EngineConfig

__all__ = ["TrainConfig"]

# engine field -> the epoch-counted option it follows from
_DERIVED = {"steps": "epochs", "eval_every": "epochs", "warmup": "warmup_epochs"}


@dataclass
class TrainConfig(EngineConfig):
    """Options of :func:`~sci_moe.molecules.spice.fit`: the engine's, counted in epochs.

    Parameters
    ----------
    epochs : int
        Maximum number of epochs (the run's total, also when resuming): ``epochs``
        times the batches per epoch optimiser steps.
    warmup_epochs : float
        Linear warm-up of the learning rate over this many epochs (rounded to steps).
    upcycle_epochs : int
        For a SPiCE built with ``upcycle=True``: train the dense expert for this many
        epochs, then copy it into every expert (and its AdamW moments) and continue with
        routing. Early stopping counts only the epochs after the upcycling; the best
        validation epoch (whose weights are returned) may still be a dense one.
    eval_batch_size : int or None
        Molecules per evaluation batch (default ``batch_size``).
    steps : int or None
        Set from ``epochs`` (``epochs`` x batches per epoch) by :meth:`for_batches`;
        leave it unset.
    eval_every : int or None
        Set to the batches per epoch (one evaluation per epoch) by :meth:`for_batches`;
        leave it unset.
    warmup : float or None
        Set from ``warmup_epochs`` by :meth:`for_batches`; leave it unset.
    patience : int
        Stop after this many epochs without a better validation score (0: never).
    monitor : str
        ``val_score``: the mean over targets of the validation MAE divided by the
        training standard deviation of the target.

    Notes
    -----
    The other fields are the engine's (:class:`sci_moe.train.TrainConfig`), with SPiCE's
    defaults: AdamW with peak ``lr=5e-4``, ``weight_decay=1e-3`` on the matrices, cosine
    decay to ``min_lr_ratio=0.01``, ``grad_clip=10``, 8 molecules per step. The warm-up
    is the engine's, ``lr (s + 1) / (W + 1)`` over ``W`` steps; SPiCE's public code starts
    at ``0.2 lr`` instead.
    """

    epochs: int = 100
    warmup_epochs: float = 5.0
    upcycle_epochs: int = 0
    eval_batch_size: int | None = None
    steps: int | None = None
    eval_every: int | None = None
    warmup: float | None = None
    batch_size: int = 8
    lr: float = 5e-4
    weight_decay: float = 1e-3
    min_lr_ratio: float = 0.01
    patience: int = 30
    grad_clip: float | None = 10.0
    monitor: str = "val_score"

    def __post_init__(self) -> None:
        check_int_attr(self, "epochs", 1)
        check_int_attr(self, "upcycle_epochs", 0)
        w = self.warmup_epochs
        if (
            isinstance(w, bool)
            or not isinstance(w, int | float)
            or not (math.isfinite(w) and w >= 0)
        ):
            raise ValueError(f"warmup_epochs must be a number >= 0, got {w!r}")
        # the engine validates its step-counted fields once they are set (for_batches)
        unset = {k: getattr(self, k) is None for k in _DERIVED}
        stand_in = {"steps": 1, "eval_every": 0, "warmup": 0.0}
        for k, missing in unset.items():
            if missing:
                setattr(self, k, stand_in[k])
        try:
            super().__post_init__()
        finally:
            for k, missing in unset.items():
                if missing:
                    setattr(self, k, None)
        if self.eval_batch_size is None:
            self.eval_batch_size = self.batch_size
        if isinstance(self.eval_batch_size, bool) or not isinstance(self.eval_batch_size, int):
            raise ValueError(f"eval_batch_size must be an integer, got {self.eval_batch_size!r}")
        if self.eval_batch_size < 1:
            raise ValueError(f"eval_batch_size must be >= 1, got {self.eval_batch_size}")

    def for_batches(self, batches_per_epoch: int) -> TrainConfig:
        """This config with the engine's step-counted fields set for ``batches_per_epoch``.

        ``steps = epochs * batches_per_epoch``, ``eval_every = batches_per_epoch``, and
        ``warmup`` the fraction of the steps in ``round(warmup_epochs *
        batches_per_epoch)`` steps (at most ``steps - 1``).

        Raises
        ------
        ValueError
            One of those fields was given and differs from what the epochs imply.
        """
        if batches_per_epoch < 1:
            raise ValueError(f"batches_per_epoch must be >= 1, got {batches_per_epoch}")
        steps = self.epochs * batches_per_epoch
        warm = min(steps - 1, round(self.warmup_epochs * batches_per_epoch))
        want = {"steps": steps, "eval_every": batches_per_epoch, "warmup": warm / steps}
        for k, v in want.items():
            given = getattr(self, k)
            if given is not None and not math.isclose(given, v, rel_tol=1e-12):
                raise ValueError(
                    f"{k}={given!r} does not match {_DERIVED[k]}: SPiCE counts its run in "
                    f"epochs ({v!r} here, {batches_per_epoch} batches per epoch); set "
                    f"{_DERIVED[k]} and leave {k} unset"
                )
        return dataclasses.replace(self, **want)
