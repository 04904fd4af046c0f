"""The shared minibatch training of the torch provenance classifiers, on the engine (private)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..._util import module_device
from ...train import StepInfo, StreamBatches, TrainConfig, Trainer

__all__ = ["fit_classifier", "predict_logits"]


def fit_classifier(
    model: torch.nn.Module,
    inputs: torch.Tensor | tuple[torch.Tensor, ...],
    labels: torch.Tensor,
    config,
    *,
    progress: bool = True,
    desc: str = "fit",
    evaluate=None,
    eval_every: int = 0,
    device: str = "cpu",
) -> list[float]:
    """Cross-entropy + auxiliary loss on :class:`sci_moe.train.Trainer`.

    AdamW (decay on the weight matrices), linear warm-up over 5 % of the steps, cosine
    decay to 0, gradient clipping at 1. ``model(x_batch) -> (logits, aux)`` (with a tuple
    of ``inputs``, tensors of one first dimension: ``model(*x_batch)``); ``config``
    (a classifier's config) gives ``steps``, ``batch_size``, ``lr``, ``weight_decay`` and
    ``seed``; the batch of step ``s`` (``min(batch_size, n)`` examples drawn with
    replacement) comes from a generator seeded by ``(seed, s)``. The torch thread count is
    left as the caller set it (``sci-moe provenance --threads``). With ``evaluate`` (a
    callable of the completed step count) and ``eval_every > 0``, ``evaluate(step)`` runs
    after every ``eval_every``-th step and after the last (the model is put back in
    training mode after it). ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``) is where the
    engine trains: the model is moved there (and stays there) and every batch, drawn on
    the CPU, follows it. Returns the per-step training losses; the model is left in eval
    mode.
    """
    parts = inputs if isinstance(inputs, tuple) else (inputs,)
    n = parts[0].shape[0]
    cfg = TrainConfig(
        seed=config.seed,
        steps=config.steps,
        batch_size=min(config.batch_size, n),
        lr=config.lr,
        schedule="cosine",
        warmup=0.05,
        min_lr_ratio=0.0,
        weight_decay=config.weight_decay,
        grad_clip=1.0,
        eval_every=0,
        restore_best=False,
        checkpoint_minutes=0,
        threads=torch.get_num_threads(),
        device=device,
        progress=progress,
    )

    def sample(gen: torch.Generator, k: int):
        idx = torch.randint(0, n, (k,), generator=gen)
        return (*(t[idx] for t in parts), labels[idx])

    def loss_fn(_model, batch):
        logits, aux = model(*batch[:-1])
        return F.cross_entropy(logits, batch[-1]) + aux

    losses: list[float] = []

    def record(info: StepInfo) -> None:
        losses.append(info.metrics["loss"])
        if evaluate is not None and eval_every > 0:
            if info.step % eval_every == 0 or info.step == cfg.steps:
                evaluate(info.step)
                model.train()

    data = StreamBatches(sample, cfg.batch_size, seed=config.seed)
    Trainer(model, loss_fn, data, cfg, hooks=[record], name=desc).fit()
    model.eval()
    return losses


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module,
    inputs: torch.Tensor | tuple[torch.Tensor, ...],
    batch_size: int = 256,
) -> torch.Tensor:
    """Logits of ``inputs`` in eval mode, batched, shape (n, K), on the CPU.

    Each batch goes to the model's device (:func:`~sci_moe._util.module_device`); a tuple
    of ``inputs`` is sliced alike and passed as ``model(*batch)``.
    """
    model.eval()
    dev = module_device(model)
    parts = inputs if isinstance(inputs, tuple) else (inputs,)
    out = [
        model(*(t[s : s + batch_size].to(dev) for t in parts))[0].cpu()
        for s in range(0, parts[0].shape[0], batch_size)
    ]
    return torch.cat(out) if out else torch.zeros(0)
