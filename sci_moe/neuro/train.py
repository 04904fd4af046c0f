"""Training to frozen targets (contrastive + MSE), retrieval, router-only fine-tuning."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .._util import progress_bar
from .encoder import MoREBrainEncoder

__all__ = [
    "TrainConfig",
    "contrastive_loss",
    "finetune_routers",
    "predict",
    "retrieval_accuracy",
    "train_encoder",
]


@dataclass
class TrainConfig:
    """Options of :func:`train_encoder`.

    Parameters
    ----------
    steps : int
        Optimiser steps (one subject's mini-batch per step, subjects in turn).
    batch_size : int
    lr, weight_decay : float
        AdamW.
    temperature : float
        Softmax temperature of :func:`contrastive_loss`.
    mse_weight : float
        Weight of the MSE between prediction and target.
    usage_weight : float
        Weight of the MSE-to-uniform usage loss (MoRE-Brain's balance loss).
    seed : int
        Seeds the batch order and the router noise.
    progress : bool
        Show a tqdm bar.
    """

    steps: int = 300
    batch_size: int = 128
    lr: float = 3e-3
    weight_decay: float = 1e-4
    temperature: float = 0.05
    mse_weight: float = 1.0
    usage_weight: float = 1e-2
    seed: int = 0
    progress: bool = False

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch_size < 2:
            raise ValueError("steps must be >= 0 and batch_size >= 2 (contrastive pairs)")
        if self.temperature <= 0 or self.lr <= 0:
            raise ValueError("temperature and lr must be > 0")


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
) -> list[float]:
    """Train ``model`` to predict frozen target embeddings.

    Loss per step: :func:`contrastive_loss` ``+ mse_weight * MSE + usage_weight *``
    usage loss, on one subject's mini-batch (subjects in turn).

    Parameters
    ----------
    model : MoREBrainEncoder
    data : mapping of subject to (voxels (M_s, V_s), targets (M_s, D))
    config : TrainConfig, optional
    parameters : sequence of Parameter, optional
        What the optimiser updates (default: all parameters that require grad).

    Returns
    -------
    list of float
        Loss of every step.
    """
    cfg = config or TrainConfig()
    _check_data(model, data)
    params = [p for p in (model.parameters() if parameters is None else parameters)]
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("no trainable parameters")
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    names = list(data)
    dtype = next(model.parameters()).dtype
    model.train()
    history = []
    for step in progress_bar(range(cfg.steps), disable=not cfg.progress, desc="train"):
        name = names[step % len(names)]
        x, y = data[name]
        b = min(cfg.batch_size, x.shape[0])
        idx = torch.randperm(x.shape[0], generator=gen)[:b]
        xb, yb = x[idx].to(dtype), y[idx].to(dtype)
        out = model(xb, name)
        loss = contrastive_loss(out.embedding, yb, cfg.temperature)
        if cfg.mse_weight:
            loss = loss + cfg.mse_weight * F.mse_loss(out.embedding, yb)
        if cfg.usage_weight:
            loss = loss + cfg.usage_weight * out.usage_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        history.append(float(loss.detach()))
    model.eval()
    return history


def finetune_routers(
    model: MoREBrainEncoder,
    subject: str,
    voxels: torch.Tensor,
    targets: torch.Tensor,
    config: TrainConfig | None = None,
    num_voxels: int | None = None,
) -> list[float]:
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

    Returns
    -------
    list of float
        Loss of every step.
    """
    if subject not in model.subjects:
        model.add_subject(subject, voxels.shape[1] if num_voxels is None else num_voxels)
    frozen = model.expert_parameters() + model.head_parameters()
    state = [p.requires_grad for p in frozen]
    for p in frozen:
        p.requires_grad_(False)
    try:
        params = model.frontend.subject_parameters(subject) + model.router_parameters()
        return train_encoder(model, {subject: (voxels, targets)}, config, parameters=params)
    finally:
        for p, s in zip(frozen, state, strict=True):
            p.requires_grad_(s)


@torch.no_grad()
def predict(
    model: MoREBrainEncoder, voxels: torch.Tensor, subject: str, batch_size: int = 256
) -> torch.Tensor:
    """Fused embedding predictions, shape ``(M, D)``, in eval mode."""
    model.eval()
    dtype = next(model.parameters()).dtype
    outs = [
        model(voxels[i : i + batch_size].to(dtype), subject).embedding
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
        Row ``i`` of ``pred`` should retrieve row ``i`` of ``targets``.
    ks : sequence of int

    Returns
    -------
    dict of int to float
        Fraction of rows whose target ranks within the top ``k`` (chance ``k / M``).
    """
    pred, targets = torch.as_tensor(pred).double(), torch.as_tensor(targets).double()
    if pred.shape != targets.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and targets {tuple(targets.shape)} differ")
    s = F.normalize(pred, dim=-1) @ F.normalize(targets, dim=-1).T
    own = s.diagonal().unsqueeze(1)
    rank = (s > own).sum(1)  # 0 = best
    return {int(k): float((rank < k).double().mean()) for k in ks}
