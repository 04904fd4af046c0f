"""Training to frozen targets (contrastive + MSE), retrieval, router-only fine-tuning.

:func:`train_encoder` runs on the package's training engine (:class:`sci_moe.train.Trainer`):
seeding, the optimiser and schedule, evaluation with the best weights, checkpoints with
exact resume, the budget, threads and data parallelism.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from sci_moe.train import Batch, BatchSource, MetricHistory, Trainer, TrainResult, derive_seed
from sci_moe.train import TrainConfig as EngineConfig

from .model import MoREBrainEncoder

__all__ = [
    "EncoderRun",
    "TrainConfig",
    "contrastive_loss",
    "finetune_routers",
    "predict",
    "retrieval_accuracy",
    "train_encoder",
]


@dataclass
class TrainConfig(EngineConfig):
    """Options of :func:`train_encoder`: the engine's, with MoRE-Brain's loss and defaults.

    Parameters
    ----------
    steps : int
        Optimiser steps (one subject's mini-batch per step, subjects in turn).
    batch_size : int
        Samples of a step (>= 2: the contrastive loss needs pairs).
    lr : float
        Peak learning rate (AdamW).
    weight_decay : float
        AdamW's decoupled decay, of every trained parameter.
    schedule : {"cosine", "linear", "constant"}
        Default constant (the learning rate of MoRE-Brain's stage 1).
    warmup : float
        Default 0.
    grad_clip : float or None
        Default none.
    eval_every : int
        With validation data: evaluate every this many steps (0: only at the end).
    temperature : float
        Softmax temperature of :func:`contrastive_loss`.
    mse_weight : float
        Weight of the MSE between prediction and target.
    usage_weight : float
        Weight of the MSE-to-uniform usage loss (MoRE-Brain's balance loss).
    monitor : str
        ``val_top5`` (with ``mode="max"``), ``val_top1``; the mean over the validation
        subjects of the top-k retrieval accuracy.
    progress : bool
        Show a progress bar.
    """

    steps: int = 300
    batch_size: int = 128
    lr: float = 3e-3
    weight_decay: float = 1e-4
    schedule: str = "constant"
    warmup: float = 0.0
    grad_clip: float | None = None
    eval_every: int = 0
    monitor: str = "val_top5"
    mode: str = "max"
    progress: bool = False
    temperature: float = 0.05
    mse_weight: float = 1.0
    usage_weight: float = 1e-2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 2:
            raise ValueError(
                f"batch_size must be >= 2 (the contrastive loss needs pairs), got {self.batch_size}"
            )
        if not (isinstance(self.temperature, int | float) and self.temperature > 0):
            raise ValueError(f"temperature must be a number > 0, got {self.temperature!r}")
        for name in ("mse_weight", "usage_weight"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")


@dataclass
class EncoderRun:
    """What :func:`train_encoder` did.

    Attributes
    ----------
    history : list of float
        The training loss of every step (all pieces of a resumed run).
    result : sci_moe.train.TrainResult
        The engine's summary (steps, reason, evaluations, best step, time).
    """

    history: list[float]
    result: TrainResult


class _SubjectBatches(BatchSource):
    """One subject's mini-batch per step, subjects in turn.

    Step ``s`` takes subject ``names[s % len(names)]`` and the first ``batch_size``
    samples of a permutation drawn from a generator seeded by ``(seed, s)`` (a pure
    function of the step, so a resumed run sees the same batches); rank ``r`` of ``W``
    takes positions ``r, r + W, ...`` of it.

    Parameters
    ----------
    data : mapping of subject to (voxels (M_s, V_s), targets (M_s, D))
    batch_size : int
    seed : int
    dtype : torch.dtype
        Of the returned tensors.
    """

    def __init__(self, data, batch_size: int, seed: int = 0, dtype=torch.float32) -> None:
        self.data, self.names = data, list(data)
        self.batch_size, self.seed, self.dtype = batch_size, seed, dtype

    def get(self, step: int, rank: int = 0, world_size: int = 1) -> Batch:
        name = self.names[step % len(self.names)]
        x, y = self.data[name]
        b = min(self.batch_size, x.shape[0])
        gen = torch.Generator().manual_seed(derive_seed(self.seed, step))
        idx = torch.randperm(x.shape[0], generator=gen)[:b][rank::world_size]
        return Batch((name, x[idx].to(self.dtype), y[idx].to(self.dtype)), len(idx), 0)


def contrastive_loss(pred: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    """Symmetric InfoNCE (CLIP) loss between predictions and their targets.

    .. math:: L = \\tfrac12\\big[\\mathrm{CE}(S, I) + \\mathrm{CE}(S^\\top, I)\\big], \\qquad
              S_{ij} = \\cos(\\hat y_i, y_j) / \\tau

    Parameters
    ----------
    pred, target : Tensor, shape (B, D)
    temperature : float

    Returns
    -------
    Tensor, shape ()
    """
    s = F.normalize(pred, dim=-1) @ F.normalize(target, dim=-1).T / temperature
    labels = torch.arange(s.shape[0], device=s.device)
    return 0.5 * (F.cross_entropy(s, labels) + F.cross_entropy(s.T, labels))


def _check_data(model, data):
    if not data:
        raise ValueError("data must map at least one subject to (voxels, targets)")
    for name, (x, y) in data.items():
        if name not in model.subjects:
            raise ValueError(f"unknown subject {name!r}; add it with model.add_subject first")
        if x.shape[0] != y.shape[0] or x.shape[0] < 2:
            raise ValueError(
                f"subject {name!r}: {x.shape[0]} voxel rows vs {y.shape[0]} targets; need the "
                "same number (>= 2)"
            )
        if y.shape[1] != model.config.target_dim:
            raise ValueError(
                f"subject {name!r}: targets have {y.shape[1]} dims, model expects "
                f"{model.config.target_dim}"
            )


def train_encoder(
    model: MoREBrainEncoder,
    data: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    config: TrainConfig | None = None,
    parameters: Sequence[torch.nn.Parameter] | None = None,
    *,
    validation: Mapping[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
) -> EncoderRun:
    """Train ``model`` to predict frozen target embeddings, on the engine.

    Loss per step: :func:`contrastive_loss` ``+ mse_weight * MSE + usage_weight *``
    usage loss, on one subject's mini-batch (subjects in turn).
    Under data parallelism each process's contrastive loss contrasts its share of the
    batch. The model trains on ``config.device``: the batches (drawn on the CPU) are
    moved there by the engine, the validation voxels batch by batch by :func:`predict`.

    Parameters
    ----------
    model : MoREBrainEncoder
    data : mapping of subject to (voxels (M_s, V_s), targets (M_s, D))
    config : TrainConfig, optional
    parameters : sequence of Parameter, optional
        What the optimiser updates (default: all parameters that require grad).
    validation : mapping of subject to (voxels, targets), optional
        Evaluated every ``eval_every`` steps and at the end: ``val_top1`` and
        ``val_top5``, the top-k retrieval accuracy among the subject's validation
        targets, averaged over the subjects; the best ``monitor`` weights are kept.
    out_dir : path, optional
        Where the engine writes its checkpoint and ``metrics.jsonl``.
    resume : bool
        Continue the run in ``out_dir`` exactly.
    stop_after : int, optional
        Return after this many steps of this call (a deliberate interruption).

    Returns
    -------
    EncoderRun
        The loss of every step and the engine's result; the model is left in eval mode.
    """
    cfg = config or TrainConfig()
    if not isinstance(cfg, TrainConfig):
        raise TypeError(
            f"config must be a sci_moe.neuro.more_brain.TrainConfig, got {type(cfg).__name__}"
        )
    _check_data(model, data)
    if validation is not None:
        _check_data(model, validation)
    params = [p for p in (model.parameters() if parameters is None else parameters)]
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("no trainable parameters")
    dtype = next(model.parameters()).dtype

    def loss_fn(m, batch):
        name, xb, yb = batch
        out = m(xb, name)
        loss = contrastive_loss(out.embedding, yb, cfg.temperature)
        if cfg.mse_weight:
            loss = loss + cfg.mse_weight * F.mse_loss(out.embedding, yb)
        if cfg.usage_weight:
            loss = loss + cfg.usage_weight * out.usage_loss
        return loss

    evaluate = None
    if validation is not None:

        def evaluate(m) -> dict:
            acc = [
                retrieval_accuracy(predict(m, x, name), y) for name, (x, y) in validation.items()
            ]
            return {f"val_top{k}": sum(a[k] for a in acc) / len(acc) for k in (1, 5)}

    history = MetricHistory("loss")
    trainer = Trainer(
        model,
        loss_fn,
        _SubjectBatches(data, cfg.batch_size, cfg.seed, dtype),
        cfg,
        evaluate=evaluate,
        out_dir=out_dir,
        param_groups=[{"params": params}],
        hooks=[history],
        stateful={"history": history},
        meta={
            "voxels_per_subject": dict(model.config.voxels_per_subject),
            "trained": sum(p.numel() for p in params),
            "samples": {k: int(x.shape[0]) for k, (x, _) in data.items()},
        },
        name="MoRE-Brain",
    )
    result = trainer.fit(resume=resume, stop_after=stop_after)
    model.eval()
    return EncoderRun(history.losses, result)


def finetune_routers(
    model: MoREBrainEncoder,
    subject: str,
    voxels: torch.Tensor,
    targets: torch.Tensor,
    config: TrainConfig | None = None,
    num_voxels: int | None = None,
    *,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> EncoderRun:
    """Adapt to a new subject by training only its front end and the routers.

    Expert banks and the level heads stay frozen (their ``requires_grad`` is switched
    off during the call and restored afterwards), so their weights are bit-identical
    after the call (MoRE-Brain's cross-subject transfer).

    Parameters
    ----------
    model : MoREBrainEncoder
    subject : str
        Added with ``num_voxels`` voxels when new.
    voxels : Tensor, shape (M, V)
    targets : Tensor, shape (M, D)
    config : TrainConfig, optional
    num_voxels : int, optional
        Default ``voxels.shape[1]``.
    validation : (voxels, targets), optional
        The subject's validation rows (see :func:`train_encoder`): the best weights of
        the monitored retrieval accuracy are kept.

    Returns
    -------
    EncoderRun
        The loss of every step and the engine's result.
    """
    if subject not in model.subjects:
        model.add_subject(subject, voxels.shape[1] if num_voxels is None else num_voxels)
    frozen = model.expert_parameters() + model.head_parameters()
    state = [p.requires_grad for p in frozen]
    for p in frozen:
        p.requires_grad_(False)
    try:
        params = model.frontend.subject_parameters(subject) + model.router_parameters()
        val = None if validation is None else {subject: validation}
        return train_encoder(
            model, {subject: (voxels, targets)}, config, parameters=params, validation=val
        )
    finally:
        for p, s in zip(frozen, state, strict=True):
            p.requires_grad_(s)


@torch.no_grad()
def predict(
    model: MoREBrainEncoder, voxels: torch.Tensor, subject: str, batch_size: int = 256
) -> torch.Tensor:
    """Fused embedding predictions, shape ``(M, D)``, in eval mode, on the model's device
    (``voxels`` may be anywhere: each batch is moved there)."""
    model.eval()
    p = next(model.parameters())
    outs = [
        model(voxels[i : i + batch_size].to(p.device, p.dtype), subject).embedding
        for i in range(0, voxels.shape[0], batch_size)
    ]
    return torch.cat(outs)


def retrieval_accuracy(
    pred: torch.Tensor, targets: torch.Tensor, ks: Sequence[int] = (1, 5)
) -> dict[int, float]:
    """Top-k cosine retrieval of each sample's own target among all ``targets``.

    Parameters
    ----------
    pred, targets : Tensor or ndarray, shape (M, D)
        Row ``i`` of ``pred`` should retrieve row ``i`` of ``targets`` (scored on
        ``pred``'s device; ``targets`` is moved there).
    ks : sequence of int

    Returns
    -------
    dict of int to float
        Fraction of rows whose target ranks within the top ``k`` (chance ``k / M``).
    """
    pred = torch.as_tensor(pred).double()
    targets = torch.as_tensor(targets).to(pred.device).double()
    if pred.shape != targets.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and targets {tuple(targets.shape)} differ")
    s = F.normalize(pred, dim=-1) @ F.normalize(targets, dim=-1).T
    own = s.diagonal().unsqueeze(1)
    rank = (s > own).sum(1)  # 0 = best
    return {int(k): float((rank < k).double().mean()) for k in ks}
