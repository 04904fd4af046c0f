"""Training loop for the MoE language model: AdamW, exact resume, evaluation."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .._util import atomic_torch_save, progress_bar
from ..moe import BiasBalancer, MoE, dispatch, routing_diagnostics
from .data import BatchSampler, TextCorpus, load_corpus, validation_windows
from .model import MoELMConfig, MoETransformerLM

__all__ = [
    "CHECKPOINT_NAME",
    "TrainConfig",
    "evaluate",
    "finetune",
    "load_checkpoint",
    "train",
]

CHECKPOINT_NAME = "checkpoint.pt"


@dataclass
class TrainConfig:
    """Options of :func:`train`.

    Parameters
    ----------
    steps : int
        Optimiser steps (the run's total, also when resuming).
    batch_size : int
        Windows of ``seq_len`` tokens per step.
    lr, min_lr_ratio : float
        Peak learning rate; cosine decay after warm-up down to ``min_lr_ratio * lr``.
    warmup : int
        Linear warm-up steps.
    weight_decay : float
        AdamW decoupled weight decay, applied to matrices (``dim >= 2``) only.
    grad_clip : float or None
        Global gradient-norm clip.
    eval_interval : int
        Evaluate every this many steps (and after the last); 0 for the end only.
    eval_batches : int
        Validation batches of ``batch_size`` fixed windows each.
    checkpoint_interval : int
        With ``out_dir``, save a checkpoint every this many steps (and after the last);
        0 for the end only.
    seed : int
        Seeds the model initialisation, the global torch RNG and the batch sampler.
    bias_balancing : float or None
        Rate of the auxiliary-loss-free bias update
        (:class:`~sci_moe.moe.BiasBalancer`), used when the MoE layers have
        ``selection_bias=True``; ``None`` takes each router's ``bias_update_rate``.
    val_fraction : float
        Validation share of each document stream (see :func:`load_corpus`).
    progress : bool
        Show a tqdm progress bar (only when stderr is a terminal).
    """

    steps: int = 300
    batch_size: int = 16
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: int = 30
    weight_decay: float = 0.1
    grad_clip: float | None = 1.0
    eval_interval: int = 50
    eval_batches: int = 4
    checkpoint_interval: int = 0
    seed: int = 0
    bias_balancing: float | None = None
    val_fraction: float = 0.1
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup", "eval_interval", "checkpoint_interval"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip}")
        if self.bias_balancing is not None and self.bias_balancing < 0:
            raise ValueError(f"bias_balancing must be >= 0 or None, got {self.bias_balancing}")

    def lr_at(self, step: int) -> float:
        """Learning rate of optimiser step ``step`` (0-based)."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        span = max(1, self.steps - self.warmup)
        t = min(1.0, (step - self.warmup) / span)
        return self.lr * (
            self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t))
        )


# ---------------------------------------------------------------------- evaluation


@torch.no_grad()
def _config_defaults(cls) -> dict:
    """Default values of a config dataclass's fields (those that have one)."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def evaluate(model: MoETransformerLM, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> dict:
    """Validation loss, perplexity and routing diagnostics on fixed windows ``x, y``.

    Runs in eval mode (Default MoE's default term is off at inference). Per MoE layer:
    ``load`` (fraction of assignments per expert over all windows), ``max_violation``
    (MaxVio of that global load), ``max_violation_batch`` (mean per-batch MaxVio),
    ``entropy``, ``score_variance`` and ``overlap`` (means over batches; see
    :func:`~sci_moe.moe.routing_diagnostics`).
    """
    was_training = model.training
    model.eval()
    layers = model.moe_layers()
    records: dict[int, list] = {i: [] for i in range(len(layers))}
    counts = [torch.zeros(m.num_experts) for m in layers]
    handles = []

    def hook_for(i: int, layer: MoE):
        def hook(_module, args, output):
            _, info = output
            ys = info.expert_outputs
            if ys is None:
                x2 = args[0].reshape(-1, layer.d_model)
                _, ys = dispatch(x2, info.routing, layer.experts, return_expert_outputs=True)
            records[i].append(routing_diagnostics(info.routing, ys))
            counts[i] += info.routing.load.float().cpu()

        return hook

    for i, layer in enumerate(layers):
        handles.append(layer.register_forward_hook(hook_for(i, layer)))
    try:
        total, n = 0.0, 0
        for s in range(0, x.shape[0], batch_size):
            xb, yb = x[s : s + batch_size], y[s : s + batch_size]
            ce, _, _ = model.loss(xb, yb)
            total += float(ce) * yb.numel()
            n += yb.numel()
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    loss = total / n
    layer_stats = []
    for i in range(len(layers)):
        recs = records[i]
        c = counts[i]
        mean = c.mean().clamp_min(1e-12)

        def avg(key, recs=recs):
            return float(sum(r[key] for r in recs) / len(recs))

        layer_stats.append(
            {
                "load": (c / c.sum().clamp_min(1)).tolist(),
                "max_violation": float((c.max() - mean) / mean),
                "max_violation_batch": avg("max_violation"),
                "entropy": avg("entropy"),
                "score_variance": avg("score_variance"),
                "overlap": avg("overlap"),
            }
        )
    return {"loss": loss, "ppl": math.exp(loss), "layers": layer_stats}


# ---------------------------------------------------------------------- checkpoints


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint written by :func:`train` (``weights_only=True``, CPU tensors).

    Keys: ``model``, ``optimizer`` (state dicts), ``step``, ``rng`` (global torch RNG
    state), ``data`` (batch-sampler generator state), ``history``, ``model_config``,
    ``train_config`` (dicts).
    """
    return torch.load(Path(path), map_location="cpu", weights_only=True)


def _optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95))


def _new_history() -> dict:
    return {
        "step": [],
        "tokens": [],
        "val_loss": [],
        "val_ppl": [],
        "diagnostics": [],
        "train_loss": [],
        "aux_loss": [],
        "step_time": [],
    }


# -------------------------------------------------------------------------- training


def train(
    model_cfg: MoELMConfig,
    train_cfg: TrainConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    *,
    init_from: str | Path | None = None,
    corpus: TextCorpus | None = None,
    callback: Callable[[int, MoETransformerLM, dict], None] | None = None,
    return_model: bool = False,
) -> dict | tuple[dict, MoETransformerLM]:
    """Train an MoE language model on the byte-level corpus.

    Parameters
    ----------
    model_cfg : MoELMConfig
    train_cfg : TrainConfig
    out_dir : path, optional
        Where ``checkpoint.pt`` is written (atomically: temporary file + ``os.replace``).
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` when it exists. The model, optimiser,
        global RNG and batch-sampler states are restored, so a run that is killed and
        resumed ends with bit-identical weights to an uninterrupted one (same machine,
        same thread count).
    init_from : path, optional
        Start from the model weights of this checkpoint (fresh optimiser and step 0):
        fine-tuning, see :func:`finetune`.
    corpus : TextCorpus, optional
        Defaults to :func:`load_corpus` ``(train_cfg.val_fraction)``.
    callback : callable, optional
        ``callback(step, model, history)`` after every optimiser step (``step`` counts
        completed steps).
    return_model : bool
        Also return the trained model.

    Returns
    -------
    history : dict
        Per evaluation: ``step``, ``tokens`` (training tokens seen), ``val_loss``,
        ``val_ppl``, ``diagnostics`` (see :func:`evaluate`); per step: ``train_loss``,
        ``aux_loss``, ``step_time`` (seconds, evaluation excluded).
    """
    if not isinstance(model_cfg, MoELMConfig):
        raise TypeError(f"model_cfg must be a MoELMConfig, got {type(model_cfg).__name__}")
    if not isinstance(train_cfg, TrainConfig):
        raise TypeError(f"train_cfg must be a TrainConfig, got {type(train_cfg).__name__}")
    if resume and out_dir is None:
        raise ValueError("resume=True needs out_dir (where the checkpoint is)")
    out = Path(out_dir) if out_dir is not None else None
    ckpt_path = out / CHECKPOINT_NAME if out is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    corpus = corpus if corpus is not None else load_corpus(train_cfg.val_fraction)

    torch.manual_seed(train_cfg.seed)
    model = MoETransformerLM(model_cfg)
    if init_from is not None:
        state = load_checkpoint(init_from)["model"]
        missing, unexpected = model.load_state_dict(state, strict=False)
        bad = [k for k in missing if not k.endswith(".default.ema")]
        bad += [k for k in unexpected if not k.endswith(".default.ema")]
        if bad:
            raise ValueError(f"checkpoint {init_from} does not fit this model: {bad[:5]}")
    optimizer = _optimizer(model, train_cfg)
    sampler = BatchSampler(
        corpus.train, model_cfg.seq_len, train_cfg.batch_size, seed=train_cfg.seed
    )
    vx, vy = validation_windows(
        corpus.val, model_cfg.seq_len, train_cfg.eval_batches * train_cfg.batch_size
    )
    balancer = None
    if any(m.router.config.selection_bias for m in model.moe_layers()):
        balancer = BiasBalancer(model, rate=train_cfg.bias_balancing)
    elif train_cfg.bias_balancing is not None:
        raise ValueError(
            "bias_balancing needs MoE layers with selection_bias=True "
            "(MoELMConfig(moe={'selection_bias': True}))"
        )

    step, history = 0, _new_history()
    if resume and ckpt_path.exists():
        ck = load_checkpoint(ckpt_path)
        # keys added to MoELMConfig later take their defaults in older checkpoints
        saved = {**_config_defaults(type(model_cfg)), **ck["model_config"]}
        if saved != asdict(model_cfg):
            raise ValueError(
                f"checkpoint {ckpt_path} was written for a different model config: "
                f"{ck['model_config']}"
            )
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        sampler.load_state_dict(ck["data"])
        torch.set_rng_state(ck["rng"])
        step, history = int(ck["step"]), ck["history"]

    def save() -> None:
        if ckpt_path is None:
            return
        atomic_torch_save(
            ckpt_path,
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "step": step,
                "rng": torch.get_rng_state(),
                "data": sampler.state_dict(),
                "history": history,
                "model_config": asdict(model_cfg),
                "train_config": asdict(train_cfg),
            },
        )

    def run_eval() -> None:
        ev = evaluate(model, vx, vy, train_cfg.batch_size)
        history["step"].append(step)
        history["tokens"].append(step * train_cfg.batch_size * model_cfg.seq_len)
        history["val_loss"].append(ev["loss"])
        history["val_ppl"].append(ev["ppl"])
        history["diagnostics"].append(ev["layers"])

    if step == 0 and not history["step"]:
        run_eval()
    model.train()
    show = train_cfg.progress
    bar = progress_bar(
        total=train_cfg.steps,
        initial=step,
        desc="train",
        disable=not show,
        leave=False,
        position=0,
        dynamic_ncols=True,
    )
    try:
        while step < train_cfg.steps:
            lr = train_cfg.lr_at(step)
            for g in optimizer.param_groups:
                g["lr"] = lr
            t0 = time.perf_counter()
            xb, yb = sampler.sample()
            ce, aux, infos = model.loss(xb, yb)
            optimizer.zero_grad(set_to_none=True)
            (ce + aux).backward()
            if train_cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
            optimizer.step()
            if balancer is not None:
                for layer, info in zip(model.moe_layers(), infos, strict=True):
                    balancer.observe(layer, info.routing)
                balancer.step()
            history["step_time"].append(time.perf_counter() - t0)
            history["train_loss"].append(float(ce.detach()))
            history["aux_loss"].append(float(aux.detach()))
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{history['train_loss'][-1]:.3f}", lr=f"{lr:.2e}", refresh=False)
            last = step == train_cfg.steps
            if last or (train_cfg.eval_interval and step % train_cfg.eval_interval == 0):
                run_eval()
                bar.set_postfix(val_ppl=f"{history['val_ppl'][-1]:.2f}", refresh=False)
            if last or (
                train_cfg.checkpoint_interval and step % train_cfg.checkpoint_interval == 0
            ):
                save()
            if callback is not None:
                callback(step, model, history)
    finally:
        bar.close()
    if step == train_cfg.steps and ckpt_path is not None and not ckpt_path.exists():
        save()  # resumed after the last step: nothing ran, keep the file there
    return (history, model) if return_model else history


def finetune(
    checkpoint: str | Path,
    train_cfg: TrainConfig,
    moe_overrides: dict | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    **kwargs,
) -> dict | tuple[dict, MoETransformerLM]:
    """Fine-tune the model of ``checkpoint`` with changed MoE options.

    The model config is the checkpoint's with ``moe`` updated by ``moe_overrides``
    (e.g. ``{"orthogonality_coef": 0.01, "variance_coef": 0.01}`` for the expert
    specialisation losses, or ``{"default_moe": False}``); the weights are loaded, the
    optimiser starts afresh and the step count at 0. Other keywords go to :func:`train`.
    """
    ck = load_checkpoint(checkpoint)
    cfg = dict(ck["model_config"])
    cfg["moe"] = {**cfg["moe"], **(moe_overrides or {})}
    return train(MoELMConfig(**cfg), train_cfg, out_dir, resume, init_from=checkpoint, **kwargs)
