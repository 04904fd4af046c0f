"""The training engine: one loop for every method of the package.

A method gives a model, a loss, its data as a :class:`~sci_moe.train.BatchSource` and an
evaluation; :class:`Trainer` gives everything else, with no per-method code: seeding,
optimiser, learning-rate schedule, gradient clipping, evaluation every ``eval_every``
steps, the best weights, early stopping and the flat stop (``stop_when_flat``), a
progress bar (plain lines in a log), a ``metrics.jsonl`` log, verified atomic checkpoints
with exact resume, a wall-time budget, the thread count, the device (``config.device``:
the model and every batch moved there) and data parallelism under ``torchrun``.

Exact resume: the batch of step ``s`` is a function of ``(seed, s)``, the learning rate a
function of ``s``, and the checkpoint holds the model, the optimiser, every global
generator, the best weights and the state of each ``stateful`` object. A run killed at
any point (SIGKILL included) and resumed with ``resume=True`` therefore ends with
bitwise the same weights as an uninterrupted run on the same machine and thread count.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .._util import (
    CheckpointError,
    load_latest,
    previous_path,
    progress_bar,
    remove_stale_temps,
    save_verified,
    set_threads,
    to_device,
)
from .config import RESUMABLE_CHANGES, TrainConfig
from .convergence import is_flat
from .data import BatchSource, as_source
from .distributed import (
    DistributedContext,
    all_reduce_sum,
    average_gradients,
    barrier,
    broadcast_object,
    current_context,
    run_device,
)
from .metrics_log import MetricsLog
from .result import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_NAME,
    METRICS_NAME,
    StepInfo,
    TrainingDiverged,
    TrainResult,
)
from .schedule import lr_factor
from .seeding import get_rng_state, seed_everything, set_rng_state

__all__ = ["Trainer"]

LossOutput = torch.Tensor | tuple


class Trainer:
    """Train a model with the options of a :class:`~sci_moe.train.TrainConfig`.

    Parameters
    ----------
    model : torch.nn.Module
        Built by the caller (after :func:`~sci_moe.train.seed_everything` for
        reproducible initial weights).
    loss_fn : callable
        ``loss_fn(model, data)`` returns the loss (a scalar tensor, a mean over the
        batch's examples), or ``(loss, metrics)`` with a dict of floats to log, or
        ``(loss, metrics, extra)`` with anything the hooks need. A method that
        computes its gradients itself (a ``torch.func`` or compiled step) sets every
        ``p.grad`` and returns a loss that does not require grad; the engine then skips
        the backward and goes on with the synchronisation, clipping and step.
    data : BatchSource or sequence
        :class:`~sci_moe.train.ShuffledBatches`, :class:`~sci_moe.train.StreamBatches`,
        or a sequence of examples (batched as lists).
    config : TrainConfig
        Or any subclass (a method's config).
    evaluate : callable, optional
        ``evaluate(model) -> dict`` of floats (``config.monitor`` among them), run in
        eval mode under ``torch.no_grad()`` with the global generators' states restored
        afterwards (evaluations do not change the training run).
    out_dir : path, optional
        Where ``checkpoint.pt`` (and ``checkpoint_prev.pt``) and ``metrics.jsonl`` go;
        without it nothing is written and nothing can be resumed.
    param_groups : list of dict, optional
        Optimiser groups (``params`` and optionally ``lr`` (peak) and ``weight_decay``);
        default: every trainable parameter, matrices decayed, the rest not.
    hooks : iterable of callable, optional
        ``hook(StepInfo)`` after every optimiser step (bias balancing, upcycling, EMA).
    stateful : mapping, optional
        ``name -> object`` with ``state_dict()`` / ``load_state_dict()`` to checkpoint
        beside the model (a balancer, a replay buffer).
    meta : dict, optional
        Plain data describing the run (the model's config); stored in the checkpoint and
        required equal on resume.
    name : str
        Label of the progress bar and messages.
    grad_sync : callable, optional
        ``grad_sync(params, local_size, ctx) -> global_size`` replacing
        :func:`~sci_moe.train.average_gradients` under data parallelism (expert
        parallelism syncs only its replicated parameters).
    context : DistributedContext, optional
        The data-parallel group this training belongs to; default: the process group
        ``torchrun`` started (:func:`~sci_moe.train.current_context`).
        ``DistributedContext()`` trains in this process alone even inside a group (a
        federated client whose group only carries messages).
    patience_after : int
        Evaluations at steps ``<= patience_after`` never count towards early stopping
        (a warm-up or dense phase); they may still give the best weights.
    log : callable, optional
        Where messages go (default: stderr of rank 0).
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[nn.Module, Any], LossOutput],
        data: BatchSource | Any,
        config: TrainConfig,
        *,
        evaluate: Callable[[nn.Module], Mapping[str, float]] | None = None,
        out_dir: str | Path | None = None,
        param_groups: list[dict] | None = None,
        hooks: Iterable[Callable[[StepInfo], None]] = (),
        stateful: Mapping[str, Any] | None = None,
        meta: dict | None = None,
        name: str = "train",
        grad_sync: Callable | None = None,
        context: DistributedContext | None = None,
        patience_after: int = 0,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model, self.loss_fn, self.config = model, loss_fn, config
        self.source = as_source(data, config.batch_size, config.seed)
        self.evaluate_fn = evaluate
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.hooks = list(hooks)
        self.stateful = dict(stateful or {})
        self.meta = dict(meta or {})
        self.name = name
        self.grad_sync = grad_sync or average_gradients
        if isinstance(patience_after, bool) or not isinstance(patience_after, int):
            raise ValueError(f"patience_after must be an integer, got {patience_after!r}")
        self.patience_after = patience_after
        self.ctx: DistributedContext = context if context is not None else current_context()
        self.device = run_device(self.config.device, self.ctx)
        self.model.to(self.device)
        self._log = log
        self.optimizer = self._build_optimizer(param_groups)
        self.step = 0
        self.train_time = 0.0
        self.evals: list[dict] = []
        self.best_metric: float | None = None
        self.best_step: int | None = None
        self.best_state: dict | None = None
        self.bad_evals = 0

    # -- set-up -----------------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path | None:
        """``out_dir/checkpoint.pt`` or ``None``."""
        return self.out_dir / CHECKPOINT_NAME if self.out_dir is not None else None

    def say(self, message: str) -> None:
        """Print a message on rank 0 (or to ``log``)."""
        if not self.ctx.is_main:
            return
        if self._log is not None:
            self._log(message)
        else:
            print(f"{self.name}: {message}", file=sys.stderr, flush=True)

    def _build_optimizer(self, groups: list[dict] | None) -> torch.optim.Optimizer:
        cfg = self.config
        if groups is None:
            params = [p for p in self.model.parameters() if p.requires_grad]
            if not params:
                raise ValueError("the model has no trainable parameters")
            if cfg.weight_decay:
                groups = [
                    {
                        "params": [p for p in params if p.dim() >= 2],
                        "weight_decay": cfg.weight_decay,
                    },
                    {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
                ]
                groups = [g for g in groups if g["params"]]
            else:  # one group: one optimiser kernel pass per step instead of two
                groups = [{"params": params, "weight_decay": 0.0}]
        else:
            groups = [dict(g) for g in groups]
        for g in groups:
            g["params"] = list(g["params"])
            g.setdefault("weight_decay", cfg.weight_decay)
            g["peak_lr"] = float(g.pop("lr", cfg.lr))
            g["lr"] = g["peak_lr"]
        fused = {}
        if cfg.fused and all(
            p.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
            for g in groups
            for p in g["params"]
        ):
            fused = {"fused": True}
        if cfg.optimizer == "adamw":
            return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, **fused)
        if cfg.optimizer == "adam":
            return torch.optim.Adam(groups, lr=cfg.lr, betas=cfg.betas, **fused)
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)

    # -- checkpoints ------------------------------------------------------------------------
    def _state(self) -> dict:
        return {
            "format": CHECKPOINT_FORMAT,
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": get_rng_state(),
            "best": {
                "metric": self.best_metric,
                "step": self.best_step,
                "bad_evals": self.bad_evals,
                "state": self.best_state,
            },
            "evals": self.evals,
            "train_time_s": self.train_time,
            "config": self.config.to_dict(),
            "meta": self.meta,
            "stateful": {k: v.state_dict() for k, v in self.stateful.items()},
            "world_size": self.ctx.world_size,
        }

    def save_checkpoint(self) -> None:
        """Write the checkpoint now (rank 0 only; atomic and checksummed)."""
        if self.checkpoint_path is None or not self.ctx.is_main:
            return
        save_verified(self.checkpoint_path, self._state())

    def _restore(self) -> int | None:
        """Load the newest intact checkpoint; returns its step (``None``: none there)."""
        path = self.checkpoint_path
        if path is None:
            raise ValueError("resume=True needs out_dir (where the checkpoint is)")
        if not path.exists() and not previous_path(path).exists():
            return None
        if self.ctx.is_main:
            remove_stale_temps(path)
        state, used, note = load_latest(path, what="training checkpoint")
        if note:
            self.say(note)
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{used} is not a sci-moe training checkpoint")
        self._check_compatible(state, used)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        for k, obj in self.stateful.items():
            obj.load_state_dict(state["stateful"][k])
        set_rng_state(state["rng"])
        best = state["best"]
        self.best_metric, self.best_step = best["metric"], best["step"]
        self.bad_evals, self.best_state = int(best["bad_evals"]), best["state"]
        self.evals = list(state["evals"])
        self.train_time = float(state["train_time_s"])
        self.step = int(state["step"])
        return self.step

    def _check_compatible(self, state: dict, used: Path) -> None:
        at = int(state["step"])
        saved = {**state["config"]}
        now = self.config.to_dict()
        if now["steps"] < at:
            raise ValueError(
                f"the checkpoint {used} is at step {at}, past steps={now['steps']}; "
                f"resume with steps >= {at} (the run's steps were {saved.get('steps')})"
            )
        keys = sorted((set(saved) | set(now)) - RESUMABLE_CHANGES)
        # a field added since the checkpoint was written counts as its default there
        default = {f.name: f.default for f in fields(self.config) if f.default is not MISSING}
        diff = [k for k in keys if saved.get(k, default.get(k)) != now.get(k)]
        if diff:
            shown = ", ".join(f"{k}: {saved.get(k)!r} -> {now.get(k)!r}" for k in diff)
            raise ValueError(
                f"the checkpoint {used} was written with other settings ({shown}); resume "
                "with the run's settings (only max_hours, threads, device, progress, log_every "
                "and checkpoint intervals may change) or start a new run in another folder"
            )
        if state["meta"] != self.meta:
            raise ValueError(
                f"the checkpoint {used} was written for another model or data set: "
                f"{state['meta']} != {self.meta}"
            )
        if int(state.get("world_size", 1)) != self.ctx.world_size:
            self.say(
                f"resuming a run of {state.get('world_size')} processes on "
                f"{self.ctx.world_size}: the data order is kept, float sums may differ"
            )

    # -- the loop ---------------------------------------------------------------------------
    def _set_lr(self) -> float:
        cfg = self.config
        f = lr_factor(self.step, cfg.steps, cfg.schedule, cfg.warmup, cfg.min_lr_ratio)
        for g in self.optimizer.param_groups:
            g["lr"] = g["peak_lr"] * f
        return cfg.lr * f

    def _evaluate(self) -> dict:
        if self.evaluate_fn is None:
            return {}
        was = self.model.training
        self.model.eval()
        rng = get_rng_state()
        try:
            with torch.no_grad():
                res = dict(self.evaluate_fn(self.model))
        finally:
            set_rng_state(rng)
            self.model.train(was)
        out = {}
        for k, v in res.items():
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                out[k] = v
        return out

    def _observe(self, metrics: dict) -> bool:
        """Record an evaluation; returns whether training should stop early."""
        cfg = self.config
        if cfg.monitor not in metrics:
            raise ValueError(
                f"monitor={cfg.monitor!r} is not among the evaluation's metrics "
                f"{sorted(metrics)}; set monitor to one of them"
            )
        value = float(metrics[cfg.monitor])
        sign = 1.0 if cfg.mode == "min" else -1.0
        better = math.isfinite(value) and (
            self.best_metric is None or sign * (value - self.best_metric) < -cfg.min_delta
        )
        if better:
            self.best_metric, self.best_step, self.bad_evals = value, self.step, 0
            if cfg.restore_best:
                self.best_state = {
                    k: v.detach().clone() for k, v in self.model.state_dict().items()
                }
        elif self.step > self.patience_after:
            self.bad_evals += 1
        return cfg.patience > 0 and self.bad_evals >= cfg.patience

    def _flat(self) -> bool:
        """Whether the ``monitor`` curve of the evaluations so far is flat by the rule of
        ``stop_when_flat`` (a function of the evaluations alone, so a resumed run stops
        where an uninterrupted one does)."""
        cfg = self.config
        if cfg.stop_when_flat is None or not self.evals:
            return False
        if self.evals[-1]["step"] < cfg.flat_min_steps:
            return False
        steps = [e["step"] for e in self.evals]
        values = [float(e[cfg.monitor]) for e in self.evals]
        return is_flat(steps, values, tail=cfg.flat_tail, tol=cfg.stop_when_flat, mode=cfg.mode)

    def _loss(self, data) -> tuple[torch.Tensor, dict, Any]:
        out = self.loss_fn(self.model, data)
        metrics, extra = {}, None
        if isinstance(out, tuple):
            loss = out[0]
            if len(out) > 1 and out[1] is not None:
                metrics = dict(out[1])
            if len(out) > 2:
                extra = out[2]
        else:
            loss = out
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("loss_fn must return a scalar tensor (or a tuple starting with one)")
        return loss.reshape(()), metrics, extra

    def fit(self, resume: bool = False, *, stop_after: int | None = None) -> TrainResult:
        """Train until ``config.steps``, a stop rule (patience, flat), the budget or ``stop_after``.

        Parameters
        ----------
        resume : bool
            Continue from ``out_dir/checkpoint.pt`` (or ``checkpoint_prev.pt`` when the
            newest is missing or damaged; a message says so). Without a checkpoint there
            the run starts fresh.
        stop_after : int, optional
            Return after this many steps of this call (a deliberate interruption).

        Returns
        -------
        TrainResult

        Raises
        ------
        TrainingDiverged
            The loss became NaN or infinite (the last good checkpoint is kept).
        ValueError
            Bad settings, a checkpoint of other settings, or an ``out_dir`` that holds a
            run when ``resume`` is false.
        """
        cfg, ctx = self.config, self.ctx
        set_threads(cfg.threads, default=1)
        t_start = time.perf_counter()
        resumed_from = None
        log = MetricsLog(self.out_dir / METRICS_NAME if self.out_dir and ctx.is_main else None)
        if resume:
            resumed_from = self._restore()
            if resumed_from is None:
                self.say(f"no checkpoint in {self.out_dir}: starting a new run")
        elif self.checkpoint_path is not None and (
            self.checkpoint_path.exists() or previous_path(self.checkpoint_path).exists()
        ):
            raise ValueError(
                f"{self.out_dir} already holds a training checkpoint; resume it "
                "(resume=True, --resume) or choose another folder"
            )
        if resumed_from is None:
            seed_everything(cfg.seed)
            log.reset()
        else:
            log.truncate(resumed_from)
            self.say(f"resumed at step {resumed_from} of {cfg.steps}")
        self.model.train()
        bar = progress_bar(
            total=cfg.steps,
            initial=self.step,
            desc=self.name,
            unit="step",
            disable=not (cfg.progress and ctx.is_main),
            leave=False,
            dynamic_ncols=True,
        )
        reason = "completed"
        acc: dict[str, float] = {}
        acc_n = 0
        last_ckpt = time.perf_counter()
        ran = 0
        trained = [p for g in self.optimizer.param_groups for p in g["params"]]
        try:
            flat = self._flat()  # a resumed run that had stopped flat stays stopped
            patient = bool(cfg.patience) and self.bad_evals >= cfg.patience
            if flat or patient or self.step >= cfg.steps:
                reason = "flat" if flat else "early_stop" if patient else "completed"
            while self.step < cfg.steps and not flat and not patient:
                t0 = time.perf_counter()
                lr = self._set_lr()
                batch = self.source.get(self.step, ctx.rank, ctx.world_size)
                data = batch.data
                if self.device.type != "cpu":
                    data = to_device(data, self.device)
                loss, metrics, extra = self._loss(data)
                value = float(loss.detach())
                if ctx.enabled:
                    value_sum, bad, n = all_reduce_sum(
                        [
                            value * batch.size if math.isfinite(value) else 0.0,
                            0.0 if math.isfinite(value) else 1.0,
                            batch.size,
                        ],
                        ctx,
                    )
                    value = value_sum / max(n, 1) if bad == 0 else math.nan
                if not math.isfinite(value):
                    raise TrainingDiverged(self._diverged("loss", value))
                if loss.requires_grad:
                    self.optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                if ctx.enabled:
                    self.grad_sync(self.model.parameters(), batch.size, ctx)
                if cfg.grad_clip is not None:
                    norm = float(torch.nn.utils.clip_grad_norm_(trained, cfg.grad_clip))
                    if not math.isfinite(norm):
                        raise TrainingDiverged(self._diverged("gradient norm", norm))
                self.optimizer.step()
                self.step += 1
                ran += 1
                metrics = {"loss": value, **{k: float(v) for k, v in metrics.items()}}
                info = StepInfo(self.step, self.model, self.optimizer, extra, metrics, batch.epoch)
                for hook in self.hooks:
                    hook(info)
                self.train_time += time.perf_counter() - t0
                for k, v in metrics.items():
                    acc[k] = acc.get(k, 0.0) + v
                acc_n += 1
                bar.update(1)
                if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                    rec = {f"train_{k}": v / acc_n for k, v in acc.items()}
                    log.write({"step": self.step, "time_s": self.train_time, "lr": lr, **rec})
                    bar.set_postfix(loss=f"{rec['train_loss']:.4g}", lr=f"{lr:.2e}", refresh=False)
                    acc, acc_n = {}, 0
                evaluated = False
                stop_early = stop_flat = False
                last = self.step == cfg.steps
                if self.evaluate_fn is not None and (
                    last or (cfg.eval_every and self.step % cfg.eval_every == 0)
                ):
                    ev = self._evaluate()
                    stop_early = self._observe(ev)
                    ev = {"step": self.step, **ev}
                    self.evals.append(ev)
                    stop_flat = self._flat()
                    log.write({"time_s": self.train_time, **ev})
                    shown = ev.get(cfg.monitor)
                    if isinstance(shown, float):
                        bar.set_postfix(**{cfg.monitor: f"{shown:.4g}"}, refresh=False)
                    evaluated = True
                over_budget = cfg.max_hours is not None and (
                    time.perf_counter() - t_start >= cfg.max_hours * 3600
                )
                if ctx.enabled and cfg.max_hours is not None:
                    over_budget = bool(broadcast_object(over_budget, ctx))
                interrupted = stop_after is not None and ran >= stop_after
                due = (
                    last
                    or stop_early
                    or stop_flat
                    or over_budget
                    or interrupted
                    or (cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0)
                    or (not cfg.checkpoint_every and evaluated)
                    or (
                        cfg.checkpoint_minutes
                        and time.perf_counter() - last_ckpt >= cfg.checkpoint_minutes * 60
                    )
                )
                if due:
                    self.save_checkpoint()
                    barrier(ctx)  # every rank's files are complete before any reads them
                    last_ckpt = time.perf_counter()
                if stop_flat:
                    reason = "flat"
                    self.say(
                        f"flat at step {self.step}: {cfg.monitor} improved by less than "
                        f"{cfg.stop_when_flat:g} (relative) over the last {cfg.flat_tail:g} of "
                        f"the steps (best {self.best_metric:.6g} at step {self.best_step})"
                    )
                    break
                if stop_early:
                    reason = "early_stop"
                    self.say(
                        f"early stop at step {self.step}: {cfg.monitor} did not improve in "
                        f"{cfg.patience} evaluations (best {self.best_metric:.6g} at step "
                        f"{self.best_step})"
                    )
                    break
                if over_budget and not last:
                    reason = "budget"
                    self.say(
                        f"the {cfg.max_hours:g} h budget is spent at step {self.step} of "
                        f"{cfg.steps}; checkpoint written. Continue with the same command "
                        "and --resume"
                    )
                    break
                if interrupted and not last:
                    reason = "interrupted"
                    break
        finally:
            bar.close()
        if reason in ("completed", "early_stop", "flat") and cfg.restore_best and self.best_state:
            self.model.load_state_dict(self.best_state)
        return TrainResult(
            step=self.step,
            steps=cfg.steps,
            reason=reason,
            best_step=self.best_step,
            best_metric=self.best_metric,
            evals=list(self.evals),
            train_time_s=self.train_time,
            resumed_from=resumed_from,
        )

    def _diverged(self, what: str, value: float) -> str:
        ck = self.checkpoint_path
        kept = (
            f"the last good checkpoint {ck} is kept"
            if ck is not None and ck.exists()
            else "no checkpoint was written"
        )
        return (
            f"{self.name}: the {what} is {value} at step {self.step + 1} of "
            f"{self.config.steps} (learning rate {self.optimizer.param_groups[0]['lr']:.3g}); "
            f"{kept}. Lower lr, set grad_clip, or check the data for NaN/inf"
        )
