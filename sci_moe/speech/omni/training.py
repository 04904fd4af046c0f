"""Training of the PI model, the phoneme MoE, the Omni-Expert and the classifier (on the engine).

Loss of every mask model (paper): :math:`L = \\frac{1}{TF} \\sum_{t,f} (\\hat M X - M X)^2`
on magnitudes ``X``, ``M`` the IRM. Adam at a constant learning rate (the paper's 1e-3),
mini-batches of frames reshuffled every epoch, all on the training engine
(:class:`sci_moe.train.Trainer`: seeding, checkpoints with exact resume, budget). The MoE
and the OE start from the trained PI model and are trained with *oracle* phoneme labels
(MoE: expert ``n`` only sees the frames of phoneme ``n``), as in the paper.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sci_moe._util import atomic_torch_save, to_device
from sci_moe.train import (
    ShuffledBatches,
    Trainer,
    TrainResult,
    is_flat,
    run_device,
    seed_everything,
)
from sci_moe.train import TrainConfig as EngineConfig

from .dataset import FrameSet
from .frontend import FeatureNormalizer, causal_context
from .models import (
    MaskNetConfig,
    OmniExpertMask,
    PhonemeClassifier,
    PhonemeIndependentMask,
    PhonemeMoEMask,
    oracle_probs,
)

__all__ = [
    "FrameTensors",
    "TrainConfig",
    "converged",
    "fit_model",
    "frame_tensors",
    "mask_loss",
    "train_classifier",
    "train_moe",
    "train_oe",
    "train_pi",
]


@dataclass
class TrainConfig(EngineConfig):
    """Optimisation settings: the engine's (:class:`sci_moe.train.TrainConfig`) with the
    paper's defaults (Adam, constant learning rate 1e-3, no clipping) and epochs.

    Parameters
    ----------
    epochs : int or None
        Passes over the training frames; the run has ``epochs * ceil(n / batch_size)``
        steps (``None``: ``steps`` as given). With ``until_flat`` it is the step cap.
    until_flat : bool
        Stop as soon as the validation loss (evaluated every ``eval_every`` steps) is
        flat by :func:`sci_moe.train.is_flat` (``flat_tail``, ``flat_tol``), at the best
        evaluated weights; needs ``eval_every > 0`` and validation frames.
    flat_tail, flat_tol : float
        The criterion: less than ``flat_tol`` (relative) better over the last
        ``flat_tail`` of the steps (default: < 1 % over the last 20 %).
    flat_min_steps : int
        No flatness check before this many steps.
    """

    epochs: int | None = 10
    batch_size: int = 256
    lr: float = 1e-3
    optimizer: str = "adam"
    fused: bool = True  # 2.4x faster optimiser steps for the 40-expert bank (7 vs 66 ms)
    schedule: str = "constant"
    warmup: float = 0.0
    grad_clip: float | None = None
    eval_every: int = 0
    progress: bool = False
    until_flat: bool = False
    flat_tail: float = 0.2
    flat_tol: float = 0.01
    flat_min_steps: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.until_flat, bool):
            raise ValueError(f"until_flat must be true or false, got {self.until_flat!r}")
        if self.until_flat and self.eval_every < 1:
            raise ValueError("until_flat needs eval_every >= 1 (steps between evaluations)")
        if not isinstance(self.flat_min_steps, int) or self.flat_min_steps < 0:
            raise ValueError(f"flat_min_steps must be an int >= 0, got {self.flat_min_steps!r}")
        is_flat([1, 2], [1.0, 1.0], tail=self.flat_tail, tol=self.flat_tol)  # validates
        e = self.epochs
        if e is not None and (isinstance(e, bool) or not isinstance(e, int) or e < 1):
            raise ValueError(f"epochs must be an integer >= 1 or None, got {e!r}")

    def for_frames(self, n: int) -> TrainConfig:
        """This config with ``steps`` set from ``epochs`` for ``n`` training frames."""
        if self.epochs is None:
            return self
        return dataclasses.replace(self, steps=self.epochs * math.ceil(n / self.batch_size))


@dataclass
class FrameTensors:
    """Model-ready frames: features ``(T, C, F)``, magnitude/IRM ``(T, F)``, labels ``(T,)``."""

    features: torch.Tensor
    magnitude: torch.Tensor
    irm: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]


def frame_tensors(frames: FrameSet, normalizer: FeatureNormalizer, context: int) -> FrameTensors:
    """Normalise and window the frames of each utterance (contexts never cross utterances).

    Magnitudes are scaled by ``1 / exp(mean log |X|)`` of the normaliser, so the loss has
    the same scale for every data set built with it.
    """
    feats = []
    norm = normalizer(frames.log_mag)
    for u in np.unique(frames.utterance):
        feats.append(causal_context(norm[frames.utterance == u], context))
    dt = torch.get_default_dtype()
    scale = float(np.exp(normalizer.mean.mean()))
    return FrameTensors(
        torch.as_tensor(np.concatenate(feats), dtype=dt),
        torch.as_tensor(frames.magnitude / scale, dtype=dt),
        torch.as_tensor(frames.irm, dtype=dt),
        torch.as_tensor(frames.labels),
    )


def mask_loss(mask: torch.Tensor, irm: torch.Tensor, magnitude: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the masked magnitudes, ``mean((M_hat X - M X)^2)``."""
    return ((mask - irm) * magnitude).square().mean()


def _digest(tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _loss_of(model: nn.Module, data: FrameTensors) -> Callable:
    if isinstance(model, PhonemeClassifier):
        return lambda m, i: nn.functional.cross_entropy(m(data.features[i]), data.labels[i])
    if isinstance(model, PhonemeIndependentMask):
        return lambda m, i: mask_loss(m(data.features[i]), data.irm[i], data.magnitude[i])
    if isinstance(model, PhonemeMoEMask | OmniExpertMask):
        n_classes = model.config.n_classes

        def oracle(m, i):
            p = oracle_probs(data.labels[i], n_classes)
            return mask_loss(m(data.features[i], p), data.irm[i], data.magnitude[i])

        return oracle
    raise TypeError(f"no training loss for a {type(model).__name__}")


def fit_model(
    model: nn.Module,
    data: FrameTensors,
    cfg: TrainConfig,
    *,
    validation: FrameTensors | None = None,
    name: str = "omni",
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
) -> TrainResult:
    """Train one model of the chain on ``data`` with its loss, on the engine.

    PI: :func:`mask_loss`; MoE and OE: :func:`mask_loss` with oracle routing (the
    labels); classifier: cross-entropy on the labels. Mini-batches of frames come from
    :class:`sci_moe.train.ShuffledBatches` (a new order every epoch, from ``cfg.seed``).
    On a GPU (``cfg.device``) the frames (``data`` and ``validation``) are copied there
    once, the model and each batch's frame indices by the engine.

    Parameters
    ----------
    model : nn.Module
        A :class:`PhonemeIndependentMask`, :class:`PhonemeMoEMask`,
        :class:`OmniExpertMask` or :class:`PhonemeClassifier`.
    data : FrameTensors
    cfg : TrainConfig
        With ``cfg.until_flat`` the run stops when the validation loss is flat (see
        :class:`TrainConfig`); the result's ``reason`` is then ``"early_stop"`` and
        :func:`converged` tells whether the curve is flat.
    validation : FrameTensors, optional
        Frames of the validation loss ``val_loss`` (the training loss on them, oracle
        routing for the MoE and the OE), evaluated every ``cfg.eval_every`` steps.
    name : str
        Label of the progress bar and messages.
    out_dir : path, optional
        Checkpoints and ``metrics.jsonl`` (needed to resume).
    resume : bool
        Continue the run in ``out_dir`` (a finished run returns at once, its weights
        loaded).
    stop_after : int, optional
        Return after this many steps of this call.

    Returns
    -------
    sci_moe.train.TrainResult
    """
    loss = _loss_of(model, data)
    cfg = cfg.for_frames(len(data))
    meta = {
        "model": type(model).__name__,
        "data": _digest([data.features, data.irm, data.magnitude, data.labels]),
        "init": _digest(model.state_dict().values()),
    }
    device = run_device(cfg.device)  # the engine's rule
    if device.type != "cpu":  # the losses index the frames with the batch's (moved) indices
        data = to_device(data, device)
        loss = _loss_of(model, data)
        validation = None if validation is None else to_device(validation, device)
    source = ShuffledBatches(len(data), cfg.batch_size, torch.tensor, seed=cfg.seed)
    evaluate = None
    if validation is not None:
        val_loss = _loss_of(model, validation)
        every = torch.arange(len(validation), device=device)
        evaluate = lambda m: {"val_loss": float(val_loss(m, every))}  # noqa: E731
    elif cfg.until_flat:
        raise ValueError("until_flat needs validation frames (validation=...)")
    args = dict(evaluate=evaluate, meta=meta, name=name)
    if cfg.until_flat:
        result = _fit_until_flat(model, loss, source, cfg, args, out_dir, resume, stop_after)
    else:
        trainer = Trainer(model, loss, source, cfg, out_dir=out_dir, **args)
        result = trainer.fit(resume=resume, stop_after=stop_after)
    model.eval()
    return result


def converged(result: TrainResult, cfg: TrainConfig) -> bool:
    """Whether a run's validation loss curve is flat by the config's criterion.

    Parameters
    ----------
    result : sci_moe.train.TrainResult
        Its ``evals`` (``step``, ``val_loss``) are the curve.
    cfg : TrainConfig
        ``flat_tail``, ``flat_tol`` and ``flat_min_steps`` (:func:`sci_moe.train.is_flat`).

    Returns
    -------
    bool
        False without validation evaluations or before ``flat_min_steps``.
    """
    ev = [e for e in result.evals if "val_loss" in e]
    if not ev or ev[-1]["step"] < cfg.flat_min_steps:
        return False
    steps = [e["step"] for e in ev]
    return is_flat(steps, [e["val_loss"] for e in ev], tail=cfg.flat_tail, tol=cfg.flat_tol)


_FLAT_NAME = "flat.pt"


def _fit_until_flat(model, loss, source, cfg, args, out_dir, resume, stop_after):
    """Train in stretches of ``eval_every`` steps (each continuing the last's checkpoint,
    exactly) until the validation curve is flat, the step cap or ``stop_after``; a flat
    run keeps its best weights in ``out_dir/flat.pt`` (what a resumed call returns)."""
    tmp = tempfile.TemporaryDirectory() if out_dir is None else None
    out = Path(tmp.name if tmp is not None else out_dir)
    flat_file = out / _FLAT_NAME
    try:
        if resume and flat_file.is_file():
            state = torch.load(flat_file, map_location="cpu", weights_only=True)
            model.load_state_dict(state["model"])
            return TrainResult(**state["result"])
        if not resume and flat_file.exists():
            raise ValueError(f"{out} already holds a finished run; resume it or choose another")
        deadline = math.inf if cfg.max_hours is None else time.perf_counter() + 3600 * cfg.max_hours
        ran, step, again, first = 0, None, resume, True

        def log(message: str) -> None:  # the stretches' own resumes are not news
            if first or not message.startswith("resumed at step"):
                print(f"{args['name']}: {message}", file=sys.stderr, flush=True)

        while True:
            chunk = cfg.eval_every - (step or 0) % cfg.eval_every
            if stop_after is not None:
                chunk = min(chunk, stop_after - ran)
            left = deadline - time.perf_counter()
            part = dataclasses.replace(
                cfg, max_hours=None if math.isinf(left) else max(left, 1e-6) / 3600
            )
            trainer = Trainer(model, loss, source, part, out_dir=out, log=log, **args)
            res = trainer.fit(resume=again, stop_after=chunk)
            ran += res.step - (step if step is not None else res.resumed_from or 0)
            step, again, first = res.step, True, False
            if res.reason != "interrupted":
                return res
            if converged(res, cfg):
                if trainer.best_state:
                    model.load_state_dict(trainer.best_state)
                res = dataclasses.replace(res, reason="early_stop")
                atomic_torch_save(flat_file, {"model": model.state_dict(), "result": vars(res)})
                return res
            if stop_after is not None and ran >= stop_after:
                return res
    finally:
        if tmp is not None:
            tmp.cleanup()


def _build_and_fit(
    build, data, cfg, name, seed_offset, out_dir, resume, return_result, validation=None
):
    """Seed with ``cfg.seed + seed_offset``, ``build()`` the model and :func:`fit_model` it;
    the model, or ``(model, TrainResult)`` with ``return_result``."""
    cfg = cfg or TrainConfig()
    seed_everything(cfg.seed + seed_offset)
    model = build()
    res = fit_model(
        model, data, cfg, validation=validation, name=name, out_dir=out_dir, resume=resume
    )
    return (model, res) if return_result else model


def train_pi(
    data: FrameTensors,
    net: MaskNetConfig | None = None,
    cfg: TrainConfig | None = None,
    *,
    validation: FrameTensors | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    return_result: bool = False,
):
    """Train the phoneme-independent mask model on every frame.

    Returns the model, or ``(model, TrainResult)`` with ``return_result``;
    ``validation``, ``out_dir`` and ``resume`` as in :func:`fit_model` (here and in
    :func:`train_moe`, :func:`train_oe`, :func:`train_classifier`).
    """
    build = partial(PhonemeIndependentMask, net)
    return _build_and_fit(build, data, cfg, "PI", 0, out_dir, resume, return_result, validation)


def train_moe(
    pi: PhonemeIndependentMask,
    data: FrameTensors,
    cfg: TrainConfig | None = None,
    *,
    validation: FrameTensors | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    return_result: bool = False,
):
    """40 experts upcycled from ``pi``, each trained on its phoneme's frames (oracle routing).

    Returns the model, or ``(model, TrainResult)`` with ``return_result``.
    """
    build = partial(PhonemeMoEMask.from_pi, copy.deepcopy(pi))
    return _build_and_fit(build, data, cfg, "MoE", 0, out_dir, resume, return_result, validation)


def train_oe(
    pi: PhonemeIndependentMask,
    data: FrameTensors,
    cfg: TrainConfig | None = None,
    *,
    scale: bool = True,
    shift: bool = True,
    validation: FrameTensors | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    return_result: bool = False,
):
    """The Omni-Expert from ``pi``: expert and scale/shift MLPs trained with oracle labels.

    Returns the model, or ``(model, TrainResult)`` with ``return_result``.
    """
    build = partial(OmniExpertMask.from_pi, pi, scale=scale, shift=shift)
    return _build_and_fit(build, data, cfg, "OE", 0, out_dir, resume, return_result, validation)


def train_classifier(
    data: FrameTensors,
    net: MaskNetConfig | None = None,
    cfg: TrainConfig | None = None,
    *,
    validation: FrameTensors | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    return_result: bool = False,
):
    """Frame phoneme classifier (cross-entropy on the oracle labels), initialised from
    ``cfg.seed + 1`` (not PI's initial weights).

    Returns the model, or ``(model, TrainResult)`` with ``return_result``.
    """
    build = partial(PhonemeClassifier, net)
    return _build_and_fit(
        build, data, cfg, "classifier", 1, out_dir, resume, return_result, validation
    )
