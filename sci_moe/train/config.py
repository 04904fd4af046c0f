"""The options every training run shares: one validated base that methods extend.

A method's config is a dataclass that inherits :class:`TrainConfig` and adds its own
fields (model size, data set, loss weights); the engine reads only the fields below.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from .._util import check_device_name, check_int_attr

__all__ = ["OPTIMIZERS", "RESUMABLE_CHANGES", "SCHEDULES", "TrainConfig"]

#: Learning-rate schedules after the warm-up.
SCHEDULES = ("cosine", "linear", "constant")
#: Optimisers the engine builds.
OPTIMIZERS = ("adamw", "adam", "sgd")
#: Fields that may change when a run is resumed (they do not change the numbers).
RESUMABLE_CHANGES = frozenset(
    {
        "max_hours",
        "threads",
        "device",
        "progress",
        "log_every",
        "checkpoint_every",
        "checkpoint_minutes",
    }
)


@dataclass
class TrainConfig:
    """Options of :class:`~sci_moe.train.Trainer` shared by every method.

    Parameters
    ----------
    seed : int
        Seeds every generator: torch (CPU and CUDA), numpy's and Python's global ones,
        and the data order.
    steps : int
        Optimiser steps of the whole run (also when resuming), >= 1.
    batch_size : int
        Examples per optimiser step (global: split over the processes of a
        data-parallel run).
    lr : float
        Peak learning rate.
    schedule : {"cosine", "linear", "constant"}
        Learning rate after the warm-up: cosine or linear decay to ``min_lr_ratio * lr``
        at the last step, or constant.
    warmup : float
        Fraction of ``steps`` with a linear warm-up, in [0, 1). The warm-up lasts
        ``W = round(warmup * steps)`` steps (at most ``steps - 1``) and step ``s < W``
        uses ``lr * (s + 1) / (W + 1)``, so no step has a zero learning rate and any
        number of steps (including 1) gives a proper schedule.
    min_lr_ratio : float
        Final LR factor of the decaying schedules, in [0, 1].
    optimizer : {"adamw", "adam", "sgd"}
        The optimiser (SGD with ``momentum``).
    weight_decay : float
        Decoupled (AdamW) or L2 (Adam, SGD) decay of the weight matrices (``dim >= 2``);
        none on biases and norms.
    betas : tuple of float
        Adam's moment coefficients.
    momentum : float
        SGD momentum.
    fused : bool
        Adam(W) as one fused kernel per step (the same update rule; several times faster
        optimiser steps for large expert banks on CPU, float rounding may differ).
    grad_clip : float or None
        Clip the global gradient norm to this value.
    eval_every : int
        Evaluate every this many steps (and always after the last); 0: only at the end.
    monitor : str
        The evaluation metric that picks the best weights and drives early stopping.
    mode : {"min", "max"}
        Whether a smaller or a larger ``monitor`` is better.
    patience : int
        Stop after this many evaluations without an improvement of ``monitor`` by more
        than ``min_delta`` (0: never stop early).
    min_delta : float
        The smallest change of ``monitor`` that counts as an improvement.
    stop_when_flat : float or None
        Stop at the first evaluation (at a step >= ``flat_min_steps``) where the curve of
        ``monitor`` so far is flat by :func:`~sci_moe.train.is_flat`: its best value over
        the last ``flat_tail`` of the steps is less than this relative tolerance (>= 0;
        0.01: 1 %) better than its best before, in the direction of ``mode``, over at
        least five evaluations. ``steps`` is then the cap (and still sets the learning
        rate schedule). ``None`` (the default): never.
    flat_tail : float
        The tail of the flat rule as a fraction of the steps run, in (0, 1).
    flat_min_steps : int
        No flat stop at an evaluation before this step (>= 0).
    restore_best : bool
        Load the best evaluated weights into the model when the run ends.
    checkpoint_every : int
        With an output folder, write the checkpoint every this many steps (0: only at
        evaluations, the end and the budget).
    checkpoint_minutes : float
        Also write it when this many minutes passed since the last one (0: never by time).
    log_every : int
        Write a line of averaged training metrics to ``metrics.jsonl`` every this many
        steps.
    max_hours : float or None
        Wall-time budget of this process: when it is spent the run checkpoints and
        returns, to be continued with ``resume=True`` (``--resume``).
    threads : int or None
        CPU threads of torch (``None``: 1; ``0``: every core).
    device : str or None
        Where the model trains: ``"cpu"`` (the reference of every result), ``"cuda"`` or
        ``"cuda:N"``; ``None`` (the default): the process group's device, the GPU
        ``LOCAL_RANK`` under ``torchrun`` with NCCL and the CPU everywhere else. Under
        NCCL, ``"cuda"`` also means each process's own GPU. The engine moves the model
        there and every batch with ``to_device`` (``sci_moe._util``); a method's
        evaluation finds it with ``module_device(model)``. Like ``threads`` it may change
        on resume (a run paused on a CPU continues on a GPU): the arithmetic is the same,
        the rounding is not.
    progress : bool
        A progress bar on a terminal, plain periodic lines in a log.
    """

    seed: int = 0
    steps: int = 1000
    batch_size: int = 32
    lr: float = 1e-3
    schedule: str = "cosine"
    warmup: float = 0.05
    min_lr_ratio: float = 0.1
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    momentum: float = 0.9
    fused: bool = False
    grad_clip: float | None = 1.0
    eval_every: int = 100
    monitor: str = "val_loss"
    mode: str = "min"
    patience: int = 0
    min_delta: float = 0.0
    stop_when_flat: float | None = None
    flat_tail: float = 0.2
    flat_min_steps: int = 0
    restore_best: bool = True
    checkpoint_every: int = 0
    checkpoint_minutes: float = 10.0
    log_every: int = 10
    max_hours: float | None = None
    threads: int | None = None
    device: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        for name in ("steps", "batch_size", "log_every"):
            check_int_attr(self, name, minimum=1)
        check_int_attr(self, "seed")
        for name in ("eval_every", "patience", "checkpoint_every", "flat_min_steps"):
            check_int_attr(self, name, minimum=0)
        _check_positive(self, "lr")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {self.mode!r}")
        _check_range(self, "warmup", 0.0, 1.0, closed_right=False)
        _check_range(self, "min_lr_ratio", 0.0, 1.0)
        _check_range(self, "momentum", 0.0, 1.0, closed_right=False)
        for name in ("weight_decay", "min_delta", "checkpoint_minutes"):
            value = getattr(self, name)
            if not _is_number(value) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if len(self.betas) != 2 or not all(_is_number(b) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        if self.grad_clip is not None:
            _check_positive(self, "grad_clip")
        if self.max_hours is not None:
            _check_positive(self, "max_hours")
        if self.stop_when_flat is not None and not (
            _is_number(self.stop_when_flat) and self.stop_when_flat >= 0
        ):
            raise ValueError(
                "stop_when_flat must be None (off) or a relative tolerance >= 0 (0.01: stop "
                f"when < 1 % better over the last flat_tail of the steps), got "
                f"{self.stop_when_flat!r}"
            )
        _check_open(self, "flat_tail", 0.0, 1.0)
        if self.threads is not None:
            check_int_attr(self, "threads", minimum=0)
        if self.device is not None:
            check_device_name(self.device)
        if not isinstance(self.monitor, str) or not self.monitor:
            raise ValueError(f"monitor must be a metric name, got {self.monitor!r}")
        for name in ("restore_best", "progress", "fused"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")

    def to_dict(self) -> dict:
        """All fields as plain JSON/YAML values (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def resume_signature(self) -> dict:
        """The fields a resumed run must share with the checkpoint (all but the budget,
        threads, device, progress and how often to log and checkpoint)."""
        return {k: v for k, v in self.to_dict().items() if k not in RESUMABLE_CHANGES}

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of every field of this config class (base and method fields)."""
        return tuple(f.name for f in fields(cls))


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_positive(cfg, name: str) -> None:
    value = getattr(cfg, name)
    if not _is_number(value) or not value > 0:
        raise ValueError(f"{name} must be a number > 0, got {value!r}")


def _check_open(cfg, name: str, lo: float, hi: float) -> None:
    value = getattr(cfg, name)
    if not _is_number(value) or not lo < value < hi:
        raise ValueError(f"{name} must be a number in ({lo}, {hi}), got {value!r}")


def _check_range(cfg, name: str, lo: float, hi: float, closed_right: bool = True) -> None:
    value = getattr(cfg, name)
    ok = _is_number(value) and lo <= value and (value <= hi if closed_right else value < hi)
    if not ok:
        right = "]" if closed_right else ")"
        raise ValueError(f"{name} must be a number in [{lo}, {hi}{right}, got {value!r}")
