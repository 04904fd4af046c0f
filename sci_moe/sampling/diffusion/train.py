"""Training of energy-based diffusion models: DSM + FP regulariser, EMA, NaN retry, exact resume.

Follows ScoreMD (Plainer et al. 2025): AdamW with a cosine learning rate (3e-4 -> 1e-5) after
element-wise gradient clipping at 1e3, EMA of the weights (0.995) copied into the model at
the end of every epoch, ``t ~ U[t0, t1]`` with the ``equal_weight`` time weights, the FP
term on the perturbed samples of the same batch, and a NaN policy that retries an epoch
(up to 20 times, with the FP term switched off after 10 failed tries). A time mixture is
trained stage by stage (high ``t`` first), each stage with its own optimiser and epochs,
the other experts frozen.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..._util import atomic_torch_save, progress_bar
from .losses import dsm_fp_loss, dsm_loss, fp_loss, time_weight
from .networks import EnergyNet
from .sde import SDE

__all__ = ["CHECKPOINT_NAME", "Stage", "TrainConfig", "random_rotations", "train"]

CHECKPOINT_NAME = "diffusion_checkpoint.pt"


@dataclass
class Stage:
    """One training stage (a whole model, or one expert of a :class:`~.time_moe.TimeMixture`).

    Parameters
    ----------
    epochs : int
        Passes over the data.
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
        self.t_range = (float(lo), float(hi))


@dataclass
class TrainConfig:
    """Options of :func:`train`.

    Parameters
    ----------
    stages : list of Stage
    batch_size : int
    ema_decay : float
        EMA factor (ScoreMD 0.995), with the warm-up ``min(decay, (1 + k)/(10 + k))`` at
        step ``k`` of a stage; 0 disables the EMA.
    ema_reset : bool
        Copy the EMA into the model at the end of every epoch (ScoreMD; slows learning
        when epochs have few steps) instead of only at the end of each stage.
    weight_decay : float
        AdamW weight decay (optax's default 1e-4).
    grad_clip : float or None
        Element-wise gradient clip (ScoreMD ``optax.clip(1e3)``).
    max_retries, fp_off_after : int
        NaN policy: retry an epoch up to ``max_retries`` times, without the FP term from
        try ``fp_off_after + 1`` on.
    random_rotation : bool
        Rotate each molecule of a batch randomly (augmentation for non-invariant nets).
    fp_sigma, fp_hs, fp_hd : float
        Probe scale and time stencil of the FP estimator.
    fp_dim_offset : float or None
        ``c`` of the residual (None: exact ``D``; 1: ScoreMD's code).
    max_batches_per_epoch : int or None
        Cap on optimiser steps per epoch (for quick runs).
    fp_batched : bool
        Batched FP estimator (one forward + one gradient for both probes and the time
        stencil, :func:`~.losses.fp_residual_probe`); ``False`` is the reference loop
        (same loss, slower).
    fused_optimizer : bool
        ``torch.optim.AdamW(fused=True)`` (one fused kernel per step; equal to the
        unfused update to float rounding).
    compile : bool
        Functional ``torch.func`` steps, ``torch.compile``-d: plain (DSM-only) steps through
        :func:`~.compiled.make_dsm_step`, FP steps of an energy network through
        :func:`~.compiled.make_dsm_fp_step` (the vectorised two-probe estimator; same
        probes from the same generator, same loss), with gradient clipping, the AdamW
        update and the EMA inside the same compiled call (the optimiser's own state
        tensors; equal to its ``step`` to rounding). Faster per step on CPU for ScoreMD's
        MLP, but compiling costs CPU-seconds per stage: worth it for long runs only;
        eager fallback if compiling fails. Default off (measured:
        ``benchmarks/energy_diffusion_speed.py``).
    compile_update : bool
        With ``compile``: clip, AdamW and EMA inside the compiled step (default);
        ``False``: the compiled step returns gradients and ``torch.optim.AdamW.step``
        updates (the earlier path, kept for the speed comparison).
    compile_cpp_wrapper : bool
        With ``compile``: the inductor's C++ wrapper around the compiled graph's kernels
        (``torch._inductor.config.cpp_wrapper``, set for this call only) instead of its
        Python wrapper. Off by default: two same-host A/Bs disagreed (faster per step
        under heavy load, slower when the machine was quiet;
        ``benchmarks/results/energy_diffusion_speed_scoremd*.json``), and a cold inductor
        cache compiles it more slowly. Same kernels, same results.
    check_every : int
        Steps between host reads of the running losses (the non-finite check of the NaN
        policy and the logged sums; no per-step ``.item()``). A non-finite loss is
        caught at the next check or at the epoch end and the epoch is retried from its
        snapshot, so the NaN never survives.
    seed : int
        Seeds the generator behind batches, times, noise, probes and rotations.
    progress : bool
        tqdm progress bar over epochs.
    """

    stages: list[Stage] = field(default_factory=lambda: [Stage(epochs=10)])
    batch_size: int = 1024
    ema_decay: float = 0.995
    ema_reset: bool = True
    weight_decay: float = 1e-4
    grad_clip: float | None = 1e3
    max_retries: int = 20
    fp_off_after: int = 10
    random_rotation: bool = False
    fp_sigma: float = 1e-4
    fp_hs: float = 1e-3
    fp_hd: float = 5e-4
    fp_dim_offset: float | None = None
    max_batches_per_epoch: int | None = None
    fp_batched: bool = True
    fused_optimizer: bool = True
    compile: bool = False
    compile_update: bool = True
    compile_cpp_wrapper: bool = False
    check_every: int = 50
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        self.stages = [s if isinstance(s, Stage) else Stage(**s) for s in self.stages]
        if not self.stages:
            raise ValueError("give at least one Stage")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if self.max_retries < 0 or self.fp_off_after < 0:
            raise ValueError("max_retries and fp_off_after must be >= 0")
        if self.max_batches_per_epoch is not None and self.max_batches_per_epoch < 1:
            raise ValueError("max_batches_per_epoch must be >= 1 or None")
        if self.check_every < 1:
            raise ValueError(f"check_every must be >= 1, got {self.check_every}")


def random_rotations(
    n: int, generator: torch.Generator | None = None, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``n`` uniformly random rotation matrices (det +1), shape (n, 3, 3)."""
    q = torch.randn(n, 4, generator=generator, dtype=dtype or torch.get_default_dtype())
    q = q / q.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - z * w),
            2 * (x * z + y * w),
            2 * (x * y + z * w),
            1 - 2 * (x * x + z * z),
            2 * (y * z - x * w),
            2 * (x * z - y * w),
            2 * (y * z + x * w),
            1 - 2 * (x * x + y * y),
        ],
        -1,
    ).view(n, 3, 3)


def _target(model: nn.Module, stage: Stage) -> nn.Module:
    if stage.expert is None:
        return model
    experts = getattr(model, "experts", None)
    if experts is None or not 0 <= stage.expert < len(experts):
        raise ValueError(f"stage.expert={stage.expert} needs a TimeMixture with that expert")
    return experts[stage.expert]


def train(
    model: nn.Module,
    data: torch.Tensor,
    sde: SDE,
    config: TrainConfig | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    max_epochs: int | None = None,
) -> dict:
    """Train a diffusion model on clean samples ``data``.

    Parameters
    ----------
    model : nn.Module
        An energy/score network (``.score``; ``.energy`` when the FP term is used) or a
        :class:`~.time_moe.TimeMixture`.
    data : Tensor, shape (n, ...)
        Training samples in model units (e.g. ``(n, N, 3)`` scaled positions).
    sde : SDE
    config : TrainConfig
    out_dir : path, optional
        Where ``diffusion_checkpoint.pt`` is written after every epoch (atomically).
    resume : bool
        Continue from ``out_dir``'s checkpoint: model, EMA, optimiser, schedule, generator
        state and history are restored, so the result equals an uninterrupted run.
    max_epochs : int, optional
        Stop after this many epochs in this call (the checkpoint allows resuming).

    Returns
    -------
    dict
        ``history``: per-epoch records (stage, epoch, loss, dsm, fp, retries, seconds);
        ``done``: whether all stages finished.
    """
    cfg = config or TrainConfig()
    opts = contextlib.nullcontext()
    if cfg.compile and cfg.compile_cpp_wrapper:
        import torch._inductor.config as inductor_config  # inductor only when asked

        opts = inductor_config.patch(cpp_wrapper=True)
    with opts:  # every step compiled in this call gets the C++ wrapper
        return _train(model, data, sde, cfg, out_dir, resume, max_epochs)


def _train(model, data, sde, cfg, out_dir, resume, max_epochs) -> dict:
    if data.dim() < 2 or len(data) < 1:
        raise ValueError(f"data must have shape (n, ...) with n >= 1, got {tuple(data.shape)}")
    if not torch.isfinite(data).all():
        raise ValueError("data contains NaN or inf; clean it first")
    if cfg.random_rotation and data.shape[-1] != 3:
        raise ValueError("random_rotation needs positions of shape (n, N, 3)")
    dtype = next(model.parameters()).dtype
    data = data.to(dtype)
    gen = torch.Generator().manual_seed(cfg.seed)
    history: list[dict] = []
    start_stage, start_epoch, ck = 0, 0, None
    ckpt = Path(out_dir) / CHECKPOINT_NAME if out_dir is not None else None
    if ckpt is not None:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
    if resume:
        if ckpt is None:
            raise ValueError("resume=True needs out_dir (where the checkpoint is)")
        if ckpt.exists():
            ck = torch.load(ckpt, weights_only=True)
            model.load_state_dict(ck["model"])
            gen.set_state(ck["generator"])
            history = list(ck["history"])
            start_stage, start_epoch = ck["stage"], ck["epoch"]
    n, bs = len(data), cfg.batch_size
    steps_per_epoch = math.ceil(n / bs)
    if cfg.max_batches_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, cfg.max_batches_per_epoch)
    epochs_run = 0
    for si in range(start_stage, len(cfg.stages)):
        stage = cfg.stages[si]
        target = _target(model, stage)
        if stage.fp_weight > 0 and not getattr(target, "conservative", False):
            raise ValueError(
                f"stage {si} has fp_weight > 0 but trains a score network; "
                "the FP term needs an energy network"
            )
        params = [p for p in target.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(
            params,
            lr=stage.lr,
            weight_decay=cfg.weight_decay,
            fused=cfg.fused_optimizer or None,
        )
        ema = [p.detach().clone() for p in params]
        step_fn = fp_step_fn = None
        if cfg.compile:
            from .compiled import make_dsm_fp_step, make_dsm_step  # inductor only when asked

            # the AdamW update and the EMA inside the compiled step (same rule, in place)
            upd = {"optimizer": opt, "grad_clip": cfg.grad_clip} if cfg.compile_update else {}
            step_fn = make_dsm_step(target, sde, params, **upd)
            if stage.fp_weight > 0 and isinstance(target, EnergyNet):
                fp_step_fn = make_dsm_fp_step(
                    target,
                    sde,
                    params,
                    stage.fp_weight,
                    sigma=cfg.fp_sigma,
                    hs=cfg.fp_hs,
                    hd=cfg.fp_hd,
                    dim_offset=cfg.fp_dim_offset,
                    **upd,
                )
        e0 = 0
        if ck is not None and si == start_stage and start_epoch > 0:
            opt.load_state_dict(ck["optimizer"])
            ema = [e.to(dtype) for e in ck["ema"]]
            e0 = start_epoch
        total = max(1, stage.epochs * steps_per_epoch)
        bar = progress_bar(
            range(e0, stage.epochs),
            disable=not cfg.progress,
            desc=f"stage {si + 1}/{len(cfg.stages)}",
            initial=e0,
            total=stage.epochs,
        )
        for epoch in bar:
            if max_epochs is not None and epochs_run >= max_epochs:
                return {"history": history, "done": False}
            snap = (
                [p.detach().clone() for p in params],
                [e.clone() for e in ema],
                copy.deepcopy(opt.state_dict()),
            )
            t_start = time.perf_counter()
            for retry in range(cfg.max_retries + 1):
                use_fp = stage.fp_weight > 0 and retry < cfg.fp_off_after
                rec = _run_epoch(
                    target,
                    data,
                    sde,
                    stage,
                    cfg,
                    opt,
                    params,
                    ema,
                    gen,
                    epoch * steps_per_epoch,
                    steps_per_epoch,
                    total,
                    use_fp,
                    step_fn,
                    fp_step_fn,
                )
                if rec is not None:
                    break
                with torch.no_grad():
                    for p, s in zip(params, snap[0], strict=True):
                        p.copy_(s)
                ema = [e.clone() for e in snap[1]]
                opt.load_state_dict(snap[2])
            else:
                raise RuntimeError(
                    f"stage {si} epoch {epoch}: non-finite loss in {cfg.max_retries + 1} tries; "
                    "lower the learning rate or the FP weight"
                )
            if cfg.ema_decay > 0 and (cfg.ema_reset or epoch + 1 == stage.epochs):
                with torch.no_grad():
                    for p, e in zip(params, ema, strict=True):
                        p.copy_(e)
            rec.update(stage=si, epoch=epoch, retries=retry, seconds=time.perf_counter() - t_start)
            history.append(rec)
            bar.set_postfix(loss=f"{rec['loss']:.4f}", fp=f"{rec['fp']:.3g}")
            epochs_run += 1
            if ckpt is not None:
                atomic_torch_save(
                    ckpt,
                    {
                        "model": model.state_dict(),
                        "ema": ema,
                        "optimizer": opt.state_dict(),
                        "stage": si if epoch + 1 < stage.epochs else si + 1,
                        "epoch": epoch + 1 if epoch + 1 < stage.epochs else 0,
                        "generator": gen.get_state(),
                        "history": history,
                        "config": _plain(asdict(cfg)),
                    },
                    fsync=False,
                )
        ck = None  # only the first stage after a resume continues from the checkpoint
    return {"history": history, "done": True}


def _plain(obj):
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def _run_epoch(
    target,
    data,
    sde,
    stage,
    cfg,
    opt,
    params,
    ema,
    gen,
    step0,
    n_steps,
    total,
    use_fp,
    step_fn,
    fp_step_fn,
):
    n, bs = len(data), cfg.batch_size
    perm = torch.randperm(n, generator=gen)
    # the epoch's batches gathered once (one index call, then views): same rows, same order
    shuffled = data[perm[: n_steps * bs]]
    lo, hi = stage.t_range
    # loss, dsm, fp summed in float64 as the old per-step float() sums were; read on the
    # host only every check
    sums = torch.zeros(3, dtype=torch.float64)
    zero = torch.zeros((), dtype=data.dtype)
    for b in range(n_steps):
        x0 = shuffled[b * bs : (b + 1) * bs]
        B = len(x0)
        if cfg.random_rotation:
            R = random_rotations(B, gen, x0.dtype)
            x0 = (x0 - x0.mean(1, keepdim=True)) @ R.transpose(-1, -2)
        t = lo + (hi - lo) * torch.rand(B, generator=gen, dtype=x0.dtype)
        noise = torch.randn(x0.shape, generator=gen, dtype=x0.dtype)
        w = time_weight(t, stage.mid, lo, hi)
        l_fp = zero
        joint = use_fp and cfg.fp_batched and isinstance(target, EnergyNet)
        functional = fp_step_fn is not None if use_fp else step_fn is not None
        k = step0 + b
        lr = stage.min_lr + 0.5 * (stage.lr - stage.min_lr) * (1 + math.cos(math.pi * k / total))
        # warm-up (as tf.train.ExponentialMovingAverage with num_updates): without it a
        # short stage's EMA would still hold a large share of the initial weights
        decay = min(cfg.ema_decay, (1 + k) / (10 + k))
        upd = {"lr": lr, "ema": ema if cfg.ema_decay > 0 else None, "decay": decay}
        updated = functional and cfg.compile_update  # clip, AdamW, EMA done in the step
        if functional and not use_fp:
            # functional (compiled) DSM loss and gradient (and the update): no backward
            if updated:
                loss = l_dsm = step_fn(x0, t, noise, w, **upd)
            else:
                loss, grads = step_fn(x0, t, noise, w)
                l_dsm = loss
        elif functional:
            # the probes drawn as dsm_fp_loss draws them (after the noise, same order)
            xi = torch.stack(
                [torch.randn(x0.shape, generator=gen, dtype=x0.dtype) for _ in range(2)]
            )
            if updated:
                loss, l_dsm, l_fp = fp_step_fn(x0, t, noise, w, xi, **upd)
            else:
                (loss, l_dsm, l_fp), grads = fp_step_fn(x0, t, noise, w, xi)
        elif joint:
            # the DSM score joins the probes' gradient call (same losses, fewer calls)
            l_dsm, l_fp = dsm_fp_loss(
                target,
                sde,
                x0,
                t,
                noise,
                w,
                gen,
                sigma=cfg.fp_sigma,
                hs=cfg.fp_hs,
                hd=cfg.fp_hd,
                dim_offset=cfg.fp_dim_offset,
            )
            loss = l_dsm + stage.fp_weight * l_fp
        else:
            l_dsm, xt = dsm_loss(target.score, sde, x0, t, noise, w)
            loss = l_dsm
        if use_fp and not joint and not functional:
            l_fp = fp_loss(
                target.energy,
                sde,
                xt,
                t,
                w,
                gen,
                sigma=cfg.fp_sigma,
                hs=cfg.fp_hs,
                hd=cfg.fp_hd,
                dim_offset=cfg.fp_dim_offset,
                batched=cfg.fp_batched,
            )
            loss = loss + stage.fp_weight * l_fp
        if not updated:
            if functional:
                for p, g in zip(params, grads, strict=True):
                    p.grad = g
            else:
                opt.zero_grad(set_to_none=True)
                loss.backward()
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_value_(params, cfg.grad_clip)
            for g in opt.param_groups:
                g["lr"] = lr
            opt.step()
            if cfg.ema_decay > 0:
                with torch.no_grad():
                    torch._foreach_lerp_(ema, [p.detach() for p in params], 1 - decay)
        sums += torch.stack([loss.detach(), l_dsm.detach(), l_fp.detach()])
        if ((b + 1) % cfg.check_every == 0 or b + 1 == n_steps) and not torch.isfinite(sums).all():
            return None  # the caller restores the epoch's snapshot and retries
    return dict(zip(("loss", "dsm", "fp"), (sums / n_steps).tolist(), strict=True))
