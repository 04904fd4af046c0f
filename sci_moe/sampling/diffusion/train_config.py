"""Options of the diffusion training: a :class:`Stage` per trained model or expert, and the
:class:`TrainConfig` of :func:`~sci_moe.sampling.diffusion.train` (the engine's options with
ScoreMD's recipe; the engine's steps and learning rate are set per stage by
:meth:`TrainConfig.for_stage`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...train import TrainConfig as EngineConfig

__all__ = ["Stage", "TrainConfig"]


@dataclass
class Stage:
    """One training stage (a whole model, or one expert of a :class:`~.time_moe.TimeMixture`).

    Parameters
    ----------
    epochs : int
        Passes over the data (0 skips the stage).
    t_range : (float, float)
        ``t`` is drawn uniformly from this range (ScoreMD: the model's or expert's range).
    mid : float or None
        Midpoint of :func:`~.losses.time_weight` (ScoreMD: 0.3 single model, 0.5 for
        Mueller-Brown; experts 0.8 / 0.35 / 0.03); ``None`` for uniform weights.
    fp_weight : float
        Weight of the FP regulariser (ScoreMD's ``beta``; 0 disables it).
    expert : int or None
        Train only this expert of a time mixture (the others are frozen).
    lr, min_lr : float
        Cosine schedule from ``lr`` to ``min_lr`` over the stage.
    """

    epochs: int
    t_range: tuple[float, float] = (1e-5, 1.0)
    mid: float | None = 0.3
    fp_weight: float = 0.0
    expert: int | None = None
    lr: float = 3e-4
    min_lr: float = 1e-5

    def __post_init__(self) -> None:
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        lo, hi = self.t_range
        if not 0 <= lo < hi <= 1:
            raise ValueError(f"t_range must satisfy 0 <= lo < hi <= 1, got {self.t_range}")
        if self.mid is not None and not lo < self.mid < hi:
            raise ValueError(f"mid={self.mid} must lie inside t_range {self.t_range}")
        if self.fp_weight < 0 or self.lr <= 0 or self.min_lr < 0:
            raise ValueError("fp_weight and min_lr must be >= 0 and lr > 0")
        if self.min_lr > self.lr:
            raise ValueError(f"min_lr={self.min_lr} must not exceed lr={self.lr}")
        self.t_range = (float(lo), float(hi))


# engine fields set per stage (the stage's steps, peak lr and final lr ratio)
_PER_STAGE = {"steps": 1, "lr": 1.0, "min_lr_ratio": 0.0}


@dataclass
class TrainConfig(EngineConfig):
    """Options of :func:`train`: the engine's, per stage, with ScoreMD's recipe.

    Parameters
    ----------
    stages : list of Stage
    batch_size : int
        Samples per optimiser step.
    ema_decay : float
        EMA factor (ScoreMD 0.995), with the warm-up ``min(decay, (1 + k)/(10 + k))`` at
        step ``k`` of a stage; 0 disables the EMA.
    ema_reset : bool
        Copy the EMA into the model at the end of every epoch (ScoreMD; slows learning
        when epochs have few steps) instead of only at the end of each stage.
    weight_decay : float
        AdamW weight decay of every trained parameter (optax's default 1e-4).
    clip_value : float or None
        Element-wise gradient clip (ScoreMD ``optax.clip(1e3)``); the engine's
        ``grad_clip`` (global norm) is off by default.
    max_retries : int
        NaN policy: redraw a step whose loss is not finite up to this many times (then
        the run stops as diverged).
    fp_off_after : int
        Redraws from this try on leave the FP term out.
    random_rotation : bool
        Rotate each molecule of a batch randomly (augmentation for non-invariant nets).
    fp_sigma, fp_hs, fp_hd : float
        Probe scale and time stencil of the FP estimator.
    fp_dim_offset : float or None
        ``c`` of the residual (None: exact ``D``; 1: ScoreMD's code).
    max_batches_per_epoch : int or None
        Cap on optimiser steps per epoch (the first batches of each epoch's shuffle).
    fp_batched : bool
        Batched FP estimator (one forward + one gradient for both probes and the time
        stencil, :func:`~.losses.fp_residual_probe`); ``False`` is the reference loop
        (same loss, slower).
    fused : bool
        The engine's AdamW as one fused kernel per step (equal to the unfused update to
        float rounding; default on).
    compile : bool
        Functional ``torch.func`` loss-and-gradient steps, ``torch.compile``-d: plain
        (DSM-only) steps through :func:`~.compiled.make_dsm_step`, FP steps of an energy
        network through :func:`~.compiled.make_dsm_fp_step` (the vectorised two-probe
        estimator; same probes from the same generator, same loss); their gradients go to
        the engine's AdamW. Faster per step on CPU for ScoreMD's MLP, but compiling costs
        CPU-seconds per stage: worth it for long runs only; eager fallback if compiling
        fails. Default off (measured: ``benchmarks/energy_diffusion/speed.py``).
    compile_cpp_wrapper : bool
        With ``compile``: the inductor's C++ wrapper around the compiled graph's kernels
        (``torch._inductor.config.cpp_wrapper``, set for this call only) instead of its
        Python wrapper. Same kernels, same results.
    steps : int or None
        Set per stage (its epochs times the batches per epoch); leave it unset.
    lr : float or None
        Set per stage (``Stage.lr``); leave it unset.
    min_lr_ratio : float or None
        Set per stage (``Stage.min_lr / Stage.lr``); leave it unset.
    seed : int
        Seeds the batches, times, noise, probes and rotations of every step.
    progress : bool
        A progress bar per stage.
    """

    stages: list[Stage] = field(default_factory=lambda: [Stage(epochs=10)])
    batch_size: int = 1024
    ema_decay: float = 0.995
    ema_reset: bool = True
    weight_decay: float = 1e-4
    clip_value: float | None = 1e3
    max_retries: int = 20
    fp_off_after: int = 10
    random_rotation: bool = False
    fp_sigma: float = 1e-4
    fp_hs: float = 1e-3
    fp_hd: float = 5e-4
    fp_dim_offset: float | None = None
    max_batches_per_epoch: int | None = None
    fp_batched: bool = True
    fused: bool = True
    compile: bool = False
    compile_cpp_wrapper: bool = False
    steps: int | None = None
    lr: float | None = None
    min_lr_ratio: float | None = None
    warmup: float = 0.0
    grad_clip: float | None = None
    eval_every: int = 0

    def __post_init__(self) -> None:
        self.stages = [s if isinstance(s, Stage) else Stage(**s) for s in self.stages]
        if not self.stages:
            raise ValueError("give at least one Stage")
        unset = [k for k in _PER_STAGE if getattr(self, k) is None]
        for k in unset:  # the engine checks them once a stage sets them
            setattr(self, k, _PER_STAGE[k])
        try:
            super().__post_init__()
        finally:
            for k in unset:
                setattr(self, k, None)
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if self.max_retries < 0 or self.fp_off_after < 0:
            raise ValueError("max_retries and fp_off_after must be >= 0")
        if self.max_batches_per_epoch is not None and self.max_batches_per_epoch < 1:
            raise ValueError("max_batches_per_epoch must be >= 1 or None")
        if self.clip_value is not None and not self.clip_value > 0:
            raise ValueError(f"clip_value must be > 0 or None, got {self.clip_value}")

    def for_stage(self, index: int, batches_per_epoch: int) -> TrainConfig:
        """The engine options of stage ``index`` (its steps, peak and final learning rate)."""
        st = self.stages[index]
        want = {
            "steps": st.epochs * batches_per_epoch,
            "lr": st.lr,
            "min_lr_ratio": st.min_lr / st.lr,
        }
        for k, v in want.items():
            given = getattr(self, k)
            if given is not None and given != v:
                raise ValueError(
                    f"{k}={given!r} is set per stage (stage {index}: {v!r}); leave {k} unset "
                    "and set the stages' epochs, lr and min_lr"
                )
        return dataclasses.replace(self, **want)
