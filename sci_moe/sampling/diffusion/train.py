"""Training of energy-based diffusion models on the training engine: DSM + FP, EMA, NaN redraws.

Follows ScoreMD (Plainer et al. 2025): AdamW with a cosine learning rate (3e-4 -> 1e-5) after
element-wise gradient clipping at 1e3, EMA of the weights (0.995) copied into the model at
the end of every epoch, ``t ~ U[t0, t1]`` with the ``equal_weight`` time weights and the FP
term on the perturbed samples of the same batch. A time mixture is trained stage by stage
(high ``t`` first), each stage with its own optimiser and epochs, the other experts frozen.

Each stage is a run of :class:`sci_moe.train.Trainer` (exact resume, checkpoints, budget,
threads, device, data parallelism): the step computes the loss and the gradients itself (eagerly,
or through the functional, optionally compiled steps of :mod:`.compiled`), clips them
element-wise and hands them to the engine's AdamW; the EMA, its copy into the model and
the per-epoch records are hooks. NaN policy: a step whose loss is not finite is redrawn
(new times, noise, probes and rotations) up to ``max_retries`` times, without the FP term
from try ``fp_off_after + 1`` on (ScoreMD retries a whole epoch; a redrawn step needs no
snapshot and keeps the run a function of the seed).

Device (``config.device``): the engine moves the model and each batch; the times, noise,
probes and rotations are drawn from the stage's CPU generator as on the CPU and moved to
the batch's device, and the EMA follows the parameters, so a GPU run draws the same
numbers as a CPU run (its arithmetic rounds differently).
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import torch
from torch import nn

from ...train import (
    CHECKPOINT_NAME,
    Phases,
    ShuffledBatches,
    StepInfo,
    Trainer,
    current_context,
    derive_seed,
)
from .losses import dsm_fp_loss, dsm_loss, fp_loss, time_weight
from .networks import EnergyNet
from .sde import SDE
from .train_config import Stage, TrainConfig

__all__ = ["CHECKPOINT_NAME", "Stage", "TrainConfig", "random_rotations", "stage_name", "train"]


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


def stage_name(index: int) -> str:
    """The subfolder of stage ``index`` (0-based) in a run's folder: ``stage1``, ..."""
    return f"stage{index + 1}"


class _Ema:
    """EMA of the trained parameters (with ScoreMD's warm-up), copied into them at epoch
    ends (``ema_reset``) or at the stage's end; checkpointed. The EMA lives on the
    parameters' device (it follows them when the engine moves the model)."""

    def __init__(self, params, cfg: TrainConfig, bpe: int, steps: int) -> None:
        self.params, self.cfg, self.bpe, self.steps = params, cfg, bpe, steps
        self.ema = [p.detach().clone() for p in params]

    def _follow(self) -> None:
        """Move the EMA to the parameters' device (built before the engine moved them, or
        loaded from a checkpoint's CPU tensors)."""
        if self.ema and self.ema[0].device != self.params[0].device:
            self.ema = [e.to(p.device) for e, p in zip(self.ema, self.params, strict=True)]

    def __call__(self, info: StepInfo) -> None:
        cfg = self.cfg
        if cfg.ema_decay <= 0:
            return
        self._follow()
        k = info.step - 1  # the step of the stage just taken (0-based)
        decay = min(cfg.ema_decay, (1 + k) / (10 + k))
        with torch.no_grad():
            torch._foreach_lerp_(self.ema, [p.detach() for p in self.params], 1 - decay)
            if info.step % self.bpe == 0 and (cfg.ema_reset or info.step == self.steps):
                for p, e in zip(self.params, self.ema, strict=True):
                    p.copy_(e)

    def state_dict(self) -> dict:
        return {"ema": self.ema}

    def load_state_dict(self, state: dict) -> None:
        self.ema = [e.clone() for e in state["ema"]]
        self._follow()


class _Epochs:
    """Per-epoch records (stage, epoch, loss, dsm, fp, retries, seconds); checkpointed."""

    def __init__(self, stage: int, bpe: int) -> None:
        self.stage, self.bpe = stage, bpe
        self.records: list[dict] = []
        self.sums = [0.0, 0.0, 0.0]
        self.retries = 0
        self.t0 = time.perf_counter()

    def __call__(self, info: StepInfo) -> None:
        m = info.metrics
        for i, k in enumerate(("loss", "dsm", "fp")):
            self.sums[i] += m[k]
        self.retries += int(m["retries"])
        if info.step % self.bpe == 0:
            n = self.bpe
            self.records.append(
                {
                    "loss": self.sums[0] / n,
                    "dsm": self.sums[1] / n,
                    "fp": self.sums[2] / n,
                    "stage": self.stage,
                    "epoch": info.step // n - 1,
                    "retries": self.retries,
                    "seconds": time.perf_counter() - self.t0,
                }
            )
            self.sums, self.retries, self.t0 = [0.0, 0.0, 0.0], 0, time.perf_counter()

    def state_dict(self) -> dict:
        return {"records": self.records, "sums": self.sums, "retries": self.retries}

    def load_state_dict(self, state: dict) -> None:
        self.records = [dict(r) for r in state["records"]]
        self.sums, self.retries = list(state["sums"]), int(state["retries"])
        self.t0 = time.perf_counter()


class _Batches(ShuffledBatches):
    """Shuffled rows of the data, at most ``cap`` batches per epoch."""

    def __init__(self, data, batch_size, seed, cap) -> None:
        super().__init__(
            len(data), batch_size, lambda idx: data[torch.as_tensor(idx, dtype=torch.long)], seed
        )
        if cap is not None:
            self.batches_per_epoch = min(self.batches_per_epoch, cap)


class _Draws:
    """The generator of the steps' times, noise, probes and rotations (one per stage and
    process, seeded from the seed; its state is checkpointed, so a resumed run draws on
    exactly as an uninterrupted one)."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)

    def state_dict(self) -> dict:
        return {"gen": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.gen.set_state(state["gen"])


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
        Where each stage's engine checkpoint and ``metrics.jsonl`` go (``out_dir/stage1``,
        ... :func:`stage_name`; :class:`sci_moe.train.Phases`).
    resume : bool
        Continue from the checkpoints in ``out_dir``: the result equals an uninterrupted
        run (bitwise, same machine and threads).
    max_epochs : int, optional
        Stop after this many epochs in this call (the checkpoint allows resuming).

    Returns
    -------
    dict
        ``history``: per-epoch records (stage, epoch, loss, dsm, fp, retries, seconds);
        ``done``: whether all stages finished; ``reason``: ``"completed"``,
        ``"interrupted"`` (``max_epochs``) or ``"budget"`` (``max_hours`` spent: resume to
        continue; the budget holds for the whole call); ``stage``: the stage trained last;
        ``ema``: that stage's EMA of its parameters (``None`` without EMA); ``summary``:
        :meth:`sci_moe.train.Phases.summary` of the run.

    Raises
    ------
    sci_moe.train.TrainingDiverged
        A step's loss stayed non-finite through every redraw (the last good checkpoint
        is kept).
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
    if resume and out_dir is None:
        raise ValueError("resume=True needs out_dir (where the checkpoint is)")
    if max_epochs is not None and max_epochs < 1:
        raise ValueError(f"max_epochs must be >= 1, got {max_epochs}")
    dtype = next(model.parameters()).dtype
    data = data.to(dtype)
    for si, stage in enumerate(cfg.stages):
        if stage.epochs and stage.fp_weight > 0:
            target = _target(model, stage)
            if not getattr(target, "conservative", False):
                raise ValueError(
                    f"stage {si} has fp_weight > 0 but trains a score network; "
                    "the FP term needs an energy network"
                )
    bpe = math.ceil(len(data) / cfg.batch_size)  # the same for every stage
    if cfg.max_batches_per_epoch is not None:
        bpe = min(bpe, cfg.max_batches_per_epoch)
    run = Phases(
        out_dir,
        resume=resume,
        max_hours=cfg.max_hours,
        stop_after=None if max_epochs is None else max_epochs * bpe,
        name="diffusion",
    )
    out = {"history": [], "stage": None, "ema": None}
    for si, stage in enumerate(cfg.stages):
        phase = stage_name(si)
        if stage.epochs == 0:
            continue
        if not run.can_start(phase):
            break
        trainer, rec, ema = _stage_trainer(
            model, data, sde, cfg, si, run.config(cfg.for_stage(si, bpe)), run.folder(phase)
        )
        run.fit(phase, trainer)
        out["history"] += rec.records
        out.update(stage=si, ema=ema.ema if cfg.ema_decay > 0 else None)
        if run.paused:
            break
    summary = run.summary()
    return {**out, "done": summary["finished"], "reason": summary["reason"], "summary": summary}


class _StageStep:
    """The engine's loss of a stage.

    Draws the step's times, noise, probes and rotations from the stage's generator
    (:class:`_Draws`), computes the loss and the gradients (eager autograd or the
    functional steps), redraws a non-finite loss (NaN policy), clips the gradients
    element-wise and sets them; returns the detached loss (the engine then skips its
    backward).
    """

    def __init__(self, target, sde: SDE, stage: Stage, cfg, params, dtype, gen) -> None:
        self.target, self.sde, self.stage, self.cfg, self.params = target, sde, stage, cfg, params
        self.gen = gen
        self.zero = torch.zeros((), dtype=dtype)  # moved to the batch's device when used
        self.step_fn = self.fp_step_fn = None
        if cfg.compile:
            from .compiled import make_dsm_fp_step, make_dsm_step  # inductor only when asked

            self.step_fn = make_dsm_step(target, sde, params)
            if stage.fp_weight > 0 and isinstance(target, EnergyNet):
                self.fp_step_fn = make_dsm_fp_step(
                    target,
                    sde,
                    params,
                    stage.fp_weight,
                    sigma=cfg.fp_sigma,
                    hs=cfg.fp_hs,
                    hd=cfg.fp_hd,
                    dim_offset=cfg.fp_dim_offset,
                )

    def __call__(self, _model, batch):
        cfg = self.cfg
        for retry in range(cfg.max_retries + 1):
            use_fp = self.stage.fp_weight > 0 and retry < cfg.fp_off_after
            loss, l_dsm, l_fp, grads = self.draw(batch, self.gen, use_fp)
            if grads is not None:
                break
        else:  # every redraw failed: the engine stops the run as diverged
            return loss.detach(), {"dsm": float("nan"), "fp": float("nan"), "retries": retry}
        for p, g in zip(self.params, grads, strict=True):
            p.grad = g
        if cfg.clip_value is not None:
            torch.nn.utils.clip_grad_value_(self.params, cfg.clip_value)
        return loss.detach(), {"dsm": l_dsm, "fp": l_fp, "retries": retry}

    def draw(self, x0, gen, use_fp):
        """``(loss, dsm, fp, grads)`` of one draw; ``grads`` is ``None`` for a non-finite
        loss."""
        cfg, stage = self.cfg, self.stage
        lo, hi = stage.t_range
        B = len(x0)
        dev = x0.device  # the model's (the engine moved the batch there)
        # every draw from the stage's CPU generator, then moved: the same numbers on
        # every device, and the generator's state is what the checkpoint holds
        if cfg.random_rotation:
            R = random_rotations(B, gen, x0.dtype).to(dev)
            x0 = (x0 - x0.mean(1, keepdim=True)) @ R.transpose(-1, -2)
        t = lo + (hi - lo) * torch.rand(B, generator=gen, dtype=x0.dtype).to(dev)
        noise = torch.randn(x0.shape, generator=gen, dtype=x0.dtype).to(dev)
        w = time_weight(t, stage.mid, lo, hi)
        functional = self.fp_step_fn is not None if use_fp else self.step_fn is not None
        if functional and not use_fp:
            loss, grads = self.step_fn(x0, t, noise, w)
            l_dsm, l_fp = loss, self.zero.to(dev)
        elif functional:
            # the probes drawn as dsm_fp_loss draws them (after the noise, same order)
            xi = torch.stack(
                [torch.randn(x0.shape, generator=gen, dtype=x0.dtype) for _ in range(2)]
            ).to(dev)
            (loss, l_dsm, l_fp), grads = self.fp_step_fn(x0, t, noise, w, xi)
        else:
            loss, l_dsm, l_fp = self._eager_loss(x0, t, noise, w, gen, use_fp)
            grads = None
        if not math.isfinite(float(loss.detach())):
            return loss, l_dsm.detach(), l_fp.detach(), None
        if grads is None:
            grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        return loss, l_dsm.detach(), l_fp.detach(), list(grads)

    def _eager_loss(self, x0, t, noise, w, gen, use_fp):
        cfg, stage, target, sde = self.cfg, self.stage, self.target, self.sde
        fp = dict(sigma=cfg.fp_sigma, hs=cfg.fp_hs, hd=cfg.fp_hd, dim_offset=cfg.fp_dim_offset)
        if use_fp and cfg.fp_batched and isinstance(target, EnergyNet):
            # the DSM score joins the probes' gradient call (same losses, fewer calls)
            l_dsm, l_fp = dsm_fp_loss(target, sde, x0, t, noise, w, gen, **fp)
            return l_dsm + stage.fp_weight * l_fp, l_dsm, l_fp
        l_dsm, xt = dsm_loss(target.score, sde, x0, t, noise, w)
        if not use_fp:
            return l_dsm, l_dsm, self.zero.to(x0.device)
        l_fp = fp_loss(target.energy, sde, xt, t, w, gen, batched=cfg.fp_batched, **fp)
        return l_dsm + stage.fp_weight * l_fp, l_dsm, l_fp


def _stage_trainer(model, data, sde, cfg, si, scfg, out):
    """The engine run of stage ``si`` (options ``scfg``) and its record and EMA hooks."""
    stage = cfg.stages[si]
    target = _target(model, stage)
    params = [p for p in target.parameters() if p.requires_grad]
    source = _Batches(data, cfg.batch_size, derive_seed(cfg.seed, si), cfg.max_batches_per_epoch)
    ema = _Ema(params, cfg, source.batches_per_epoch, scfg.steps)
    rec = _Epochs(si, source.batches_per_epoch)
    draws = _Draws(derive_seed(cfg.seed, si, current_context().rank))
    trainer = Trainer(
        model,
        _StageStep(target, sde, stage, cfg, params, data.dtype, draws.gen),
        source,
        scfg,
        out_dir=out,
        param_groups=[{"params": params, "weight_decay": cfg.weight_decay}],
        hooks=[ema, rec],
        stateful={"ema": ema, "epochs": rec, "draws": draws},
        meta={
            "stage": si,
            "samples": list(data.shape),
            "dtype": str(data.dtype),
            "parameters": sum(p.numel() for p in params),
        },
        name=f"stage {si + 1}/{len(cfg.stages)}",
    )
    return trainer, rec, ema
