"""Class-incremental training with feature replay (CoGaMiD) and its baselines.

Methods (``IncrementalConfig.method``):

* ``"finetune"``: plain cross-entropy on the background-shifted labels of each step;
* ``"prototype"``: STAR-like replay of one stored prototype per old class;
* ``"gmm"``: CoGaMiD replay of pseudo-features sampled from per-class Gaussian mixtures
  (``n_components`` = K; K = 1 is a single Gaussian).

Both replay methods share the rest of the step-``t`` loss (as in DKD/STAR):

.. math::

    L = L_{\\mathrm{uCE}} + \\lambda_{\\mathrm{kd}} \\lVert f_\\theta - f_{\\theta_{t-1}}\\rVert^2
        + \\lambda_{\\mathrm{rep}}\\, \\mathrm{CE}(h_\\theta(\\tilde f), \\tilde y),

with :math:`L_{\\mathrm{uCE}}` the unbiased cross-entropy of MiB (a background pixel's
target probability is :math:`p_0 + \\sum_{c \\in C_{old}} p_c`, the background shift
handling) and :math:`(\\tilde f, \\tilde y)` the replayed pseudo-features of old classes.
Each step's data and randomness come from ``seed`` and the step index only. Every step
trains on the training engine (:class:`sci_moe.train.Trainer`, one run per step in the
subfolder ``task_<t>`` of the run's folder, :class:`sci_moe.train.Phases`); the memory
fit after a step (EM, no optimiser) is repeated from the restored weights on resume, so
a run interrupted anywhere and resumed repeats the uninterrupted run exactly.

On a GPU (``device="cuda"``) the model and the frozen previous model train there; the
scenes, the class memory (its EM fits and its replay draws, from the CPU generators of a
CPU run) and the scores stay on the CPU: each batch, replayed pseudo-feature and stored
component mean is moved to the model's device, and the features a memory is fitted on
come back to the CPU.

Options of ``"gmm"`` (their exact formulas are not published; these are readings of the
abstract): ``dynamic_adjustment`` refits the stored mixtures after each step with the
features of background-labelled new pixels the model predicts as an old class with
probability :math:`\\ge \\tau` (:meth:`GaussianMixtureMemory.adjust`); ``grc_weight`` adds
:func:`grc_loss`, which pulls new-class features to their class centre and away from the
stored old-class components.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from sci_moe._util import check_int_attr, module_device
from sci_moe.train import Phases, ShuffledBatches, Trainer, derive_seed, seed_everything
from sci_moe.train import TrainConfig as _BaseConfig

from ..protocol import background_shift_labels, incremental_tasks, mean_iou
from ..unet import SmallUNet
from .baselines import PrototypeMemory
from .data import SceneConfig, SceneGenerator, _gen, _scene, _step_data
from .model import GaussianMixtureMemory, grc_loss, step_features

__all__ = ["METHODS", "IncrementalConfig", "run_incremental"]

#: The replay methods of :class:`IncrementalConfig`.
METHODS = ("finetune", "prototype", "gmm")


@dataclass
class IncrementalConfig(_BaseConfig):
    """Configuration of one incremental run (the engine's options plus the below).

    The engine's ``steps`` are the optimiser steps of step 0 (the base classes);
    ``increment_steps`` those of every later step. Sizes are in images and steps.

    Parameters
    ----------
    steps : int
        Adam steps of step 0 (the base classes), >= 1.
    increment_steps : int
        Adam steps of every later step (0: no training, only the memory and the scores).
    method : str
        finetune, prototype or gmm.
    n_components : int
        Mixture size K (``method="gmm"``).
    covariance_type : str
        full or diag (``method="gmm"``).
    base : int
        Classes of step 0 (protocol ``base-increment``; 4-1 on 6 classes: three steps).
    increment : int
        Classes added by every later step.
    scene : SceneConfig
        The synthetic world; in a config file a table of its fields, on the command line
        ``key=value,...`` (for example ``image_size=32,max_objects=2,modes_per_class=2:3``).
    n_train : int
        Training images per step (each holds a class of the step).
    n_test : int
        Test images per step.
    width : int
        :class:`SmallUNet` width.
    feature_dim : int
        :class:`SmallUNet` feature size.
    replay_per_class : int
        Pseudo-features per old class and step.
    kd_weight : float
        Weight of the feature distillation to the previous model.
    replay_weight : float
        Weight of the replayed pseudo-features' cross-entropy.
    max_pixels_per_class : int
        Features per class used to fit a memory.
    dynamic_adjustment : bool
        Refit the mixtures with confidently predicted background pixels (gmm only).
    da_threshold : float
        The confidence of dynamic adjustment, in (0, 1).
    grc_weight : float
        Weight of :func:`grc_loss` (0 disables it; gmm only).
    grc_temperature : float
        Temperature of :func:`grc_loss`.
    n_val : int
        Validation images per step (0: none). With validation images the engine's
        evaluations (``eval_every``, early stopping on ``monitor``, ``restore_best``) score
        them, and a step's reported metrics are those of its test images, scored once
        after training (with the restored best weights); without them every evaluation
        scores the test images.
    patience_after : int
        Evaluations at optimiser steps ``<= patience_after`` of a step never count towards
        early stopping (:class:`~sci_moe.train.Trainer`'s ``patience_after``).
    """

    steps: int = 300
    batch_size: int = 8
    lr: float = 3e-3
    optimizer: str = "adam"
    schedule: str = "constant"
    warmup: float = 0.0
    grad_clip: float | None = None
    eval_every: int = 0
    monitor: str = "miou_all"
    mode: str = "max"
    restore_best: bool = False
    increment_steps: int = 100
    method: str = "gmm"
    n_components: int = 3
    covariance_type: str = "full"
    base: int = 4
    increment: int = 1
    scene: SceneConfig = field(default_factory=SceneConfig)
    n_train: int = 200
    n_test: int = 60
    width: int = 16
    feature_dim: int = 16
    replay_per_class: int = 256
    kd_weight: float = 1.0
    replay_weight: float = 1.0
    max_pixels_per_class: int = 4000
    dynamic_adjustment: bool = False
    da_threshold: float = 0.7
    grc_weight: float = 0.0
    grc_temperature: float = 1.0
    n_val: int = 0
    patience_after: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.scene = _scene(self.scene)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.covariance_type not in ("full", "diag"):
            raise ValueError(
                f"covariance_type must be 'full' or 'diag', got {self.covariance_type!r}"
            )
        if (self.dynamic_adjustment or self.grc_weight > 0) and self.method != "gmm":
            raise ValueError("dynamic_adjustment and grc_weight need method='gmm'")
        if not 0 < self.da_threshold < 1:
            raise ValueError(f"da_threshold must be in (0, 1), got {self.da_threshold}")
        if not self.grc_temperature > 0:
            raise ValueError(f"grc_temperature must be > 0, got {self.grc_temperature}")
        for name in ("grc_weight", "kd_weight", "replay_weight"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in (
            "n_train",
            "n_test",
            "n_components",
            "base",
            "increment",
            "width",
            "feature_dim",
            "replay_per_class",
            "max_pixels_per_class",
        ):
            check_int_attr(self, name, 1)
        check_int_attr(self, "increment_steps", 0)
        check_int_attr(self, "n_val", 0)
        check_int_attr(self, "patience_after", 0)
        if self.base > self.scene.n_classes:
            raise ValueError(
                f"base must be <= the scene's n_classes = {self.scene.n_classes}, got {self.base}"
            )
        if len(self.tasks()) > 64:
            raise ValueError(
                f"increment: the protocol has {len(self.tasks())} steps, at most 64 are "
                "supported; use a larger base or increment"
            )

    def tasks(self) -> list[list[int]]:
        """The classes of every step (:func:`~sci_moe.vision.incremental_tasks`)."""
        return incremental_tasks(self.scene.n_classes, self.base, self.increment)


def _unbiased_ce(logits, labels, n_old: int):
    # logits (B, C+1, H, W) over seen classes; old classes are 1..n_old.
    logp = F.log_softmax(logits, 1)
    bg = torch.logsumexp(logp[:, : n_old + 1], 1)
    lp = torch.where(labels == 0, bg, logp.gather(1, labels.unsqueeze(1)).squeeze(1))
    return -lp.mean()


def _dynamic_adjustment(model, memory, x, y, n_seen, cfg, g):
    # the features on the model's device, the memory's refit on the CPU (as the CPU run)
    dev = module_device(model)
    with torch.no_grad():
        feats = torch.cat([model.features(x[i : i + 16].to(dev)) for i in range(0, len(x), 16)])
        prob = torch.softmax(model.classify(feats)[:, : n_seen + 1], 1).cpu()
        feats = feats.cpu()
    conf, pred = prob.max(1)
    old = torch.zeros_like(pred, dtype=torch.bool)
    for c in memory.classes:
        old |= pred == c
    pick = (y == 0) & old & (conf >= cfg.da_threshold)
    f = feats.permute(0, 2, 3, 1)[pick]
    lab = pred[pick]
    if f.shape[0] > cfg.max_pixels_per_class:
        keep = torch.randperm(f.shape[0], generator=g)[: cfg.max_pixels_per_class]
        f, lab = f[keep], lab[keep]
    memory.adjust(f, lab, generator=g)


def _evaluate(model, x_test, m_test, tasks, t):
    seen = [c for task in tasks[: t + 1] for c in task]
    target = background_shift_labels(m_test, seen)
    dev = module_device(model)  # the images go there batch by batch, the scores come back
    with torch.no_grad():
        pred = torch.cat(
            [
                model(x_test[i : i + 16].to(dev))[:, : len(seen) + 1].argmax(1).cpu()
                for i in range(0, len(x_test), 16)
            ]
        )
    old = [c for task in tasks[:t] for c in task]
    return {
        "miou_all": mean_iou(pred, target, seen),
        "miou_old": mean_iou(pred, target, old) if old else float("nan"),
        "miou_new": mean_iou(pred, target, tasks[t]),
        "miou_base": mean_iou(pred, target, tasks[0]),
    }


def _task_loss(cfg: IncrementalConfig, tasks, t: int, memory, old_model):
    n_seen = sum(len(task) for task in tasks[: t + 1])
    n_old = n_seen - len(tasks[t])

    def loss_fn(model: SmallUNet, batch) -> torch.Tensor:
        x, y = batch
        feats = model.features(x)
        logits = model.classify(feats)[:, : n_seen + 1]
        if t == 0 or cfg.method == "finetune":
            return F.cross_entropy(logits, y)
        loss = _unbiased_ce(logits, y, n_old)
        with torch.no_grad():
            old_f = old_model.features(x)
        loss = loss + cfg.kd_weight * (feats - old_f).pow(2).mean()
        # drawn on the CPU from the global generator (checkpointed), the CPU run's draws,
        # then moved to the model's device
        fr, yr = memory.sample(cfg.replay_per_class)
        rl = model.classify(fr.to(feats.device, feats.dtype))[:, : n_seen + 1]
        loss = loss + cfg.replay_weight * F.cross_entropy(rl, yr.to(feats.device))
        if cfg.grc_weight > 0:
            fl = feats.permute(0, 2, 3, 1).reshape(-1, feats.shape[1])
            means = memory.component_means().to(feats.device)
            loss = loss + cfg.grc_weight * grc_loss(
                fl, y.reshape(-1), tasks[t], means, cfg.grc_temperature
            )
        return loss

    return loss_fn


def run_incremental(
    cfg: IncrementalConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
    start_state: dict | None = None,
    progress: bool | None = None,
    *,
    interrupt_after: int | None = None,
) -> dict:
    """Run the steps of the protocol; returns per-step metrics.

    Step ``t`` trains on its images (:class:`~sci_moe.train.ShuffledBatches`) with the
    loss of the module docstring, one engine run in ``out_dir/task_<t>``; then the memory
    is fitted (and adjusted) on the step's features and the model is scored on the step's
    test images (the engine's final evaluation, ``miou_all`` / ``miou_old`` /
    ``miou_new`` / ``miou_base``).

    Parameters
    ----------
    cfg : IncrementalConfig
    out_dir : path, optional
        The run's folder; without it nothing is written.
    resume : bool
        Continue the run in ``out_dir``: finished steps restore their weights (and the
        memory is refitted from them), an interrupted step continues exactly.
    stop_after : int, optional
        Stop after this step of the protocol (a later call with ``resume`` goes on).
    start_state : dict, optional
        A step-0 state ``{"model": state_dict}`` to start from (shares a base model
        between methods); step 0 is then not retrained.
    progress : bool, optional
        Overrides ``cfg.progress``: a bar per step on a terminal, plain periodic lines
        when stderr is not one.
    interrupt_after : int, optional
        Return after this many optimiser steps of this call (a deliberate interruption).

    Returns
    -------
    dict
        ``{"config": ..., "steps": [metrics of step 0, 1, ...], "model": SmallUNet,
        "memory": memory or None, "train": Phases.summary(), "curves": [...]}``;
        ``curves[t]`` is the trained step's ``{"evals": [[step, monitor], ...], "reason",
        "step", "best_step"}`` (``None`` for a step that was not trained).
    """
    if progress is not None:
        cfg = replace(cfg, progress=bool(progress))
    tasks = cfg.tasks()
    world = SceneGenerator(cfg.scene)
    seed_everything(cfg.seed)
    model = SmallUNet(cfg.scene.n_classes, cfg.width, cfg.feature_dim)
    memory = None
    if cfg.method == "gmm":
        memory = GaussianMixtureMemory(cfg.n_components, cfg.covariance_type, reg_covar=1e-3)
    elif cfg.method == "prototype":
        memory = PrototypeMemory()
    run = Phases(
        out_dir,
        resume=resume,
        max_hours=cfg.max_hours,
        stop_after=interrupt_after,
        name=f"CoGaMiD {cfg.method}",
    )
    steps: list[dict] = []
    curves: list[dict | None] = []
    last = len(tasks) - 1 if stop_after is None else min(stop_after, len(tasks) - 1)
    for t in range(last + 1):
        x, y = _step_data(world, cfg, tasks, t)
        x_test, m_test = SceneGenerator(cfg.scene).generate(
            cfg.n_test, step=t, generator=_gen(cfg.seed, t, 3)
        )

        def evaluate(m, t=t, x_test=x_test, m_test=m_test):
            return _evaluate(m, x_test, m_test, tasks, t)

        validate = evaluate
        if cfg.n_val > 0:
            x_val, m_val = SceneGenerator(cfg.scene).generate(
                cfg.n_val, step=t, generator=_gen(cfg.seed, t, 4)
            )

            def validate(m, t=t, x_val=x_val, m_val=m_val):
                return _evaluate(m, x_val, m_val, tasks, t)

        n_steps = cfg.steps if t == 0 else cfg.increment_steps
        if (t == 0 and start_state is not None) or n_steps == 0:
            if t == 0:
                model.load_state_dict(start_state["model"])
            model.eval()
            with torch.no_grad():
                metrics = evaluate(model)
            curve = None
        else:
            phase = f"task_{t}"
            if not run.can_start(phase):
                break
            old_model = copy.deepcopy(model).eval() if t > 0 else None
            task_cfg = run.config(cfg, steps=n_steps, seed=derive_seed(cfg.seed, t))
            data = ShuffledBatches(
                len(x), cfg.batch_size, lambda idx, x=x, y=y: (x[idx], y[idx]), seed=task_cfg.seed
            )
            trainer = Trainer(
                model,
                _task_loss(cfg, tasks, t, memory, old_model),
                data,
                task_cfg,
                evaluate=validate,
                out_dir=run.folder(phase),
                meta={"method": cfg.method, "step": t, "classes": list(tasks[t])},
                name=f"CoGaMiD {cfg.method} step {t}",
                patience_after=cfg.patience_after,
            )
            if old_model is not None:  # the frozen teacher beside the model
                old_model.to(trainer.device)
            res = run.fit(phase, trainer)
            if run.paused:
                break
            if cfg.n_val > 0:
                model.eval()
                with torch.no_grad():
                    metrics = evaluate(model)
            else:
                metrics = {k: v for k, v in res.evals[-1].items() if k != "step"}
            curve = {
                "evals": [[e["step"], e[cfg.monitor]] for e in res.evals],
                "reason": res.reason,
                "step": res.step,
                "best_step": res.best_step,
            }
        g = _gen(cfg.seed, t, 2)
        if cfg.dynamic_adjustment and t > 0:
            n_seen = sum(len(task) for task in tasks[: t + 1])
            _dynamic_adjustment(model, memory, x, y, n_seen, cfg, g)
        if memory is not None:
            f, lab = step_features(model, x, y, tasks[t], cfg.max_pixels_per_class, g)
            memory.fit(f, lab, tasks[t], generator=g)
        steps.append(metrics)
        curves.append(curve)
    model.eval()
    return {
        "config": cfg.to_dict(),
        "steps": steps,
        "model": model,
        "memory": memory,
        "train": run.summary(),
        "curves": curves,
    }
