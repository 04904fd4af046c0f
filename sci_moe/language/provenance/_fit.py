"""The shared minibatch training of the torch provenance classifiers, on the engine (private)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...train import StepInfo, StreamBatches, TrainConfig, Trainer

__all__ = ["fit_classifier", "predict_logits"]


def fit_classifier(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    config,
    *,
    progress: bool = True,
    desc: str = "fit",
    evaluate=None,
    eval_every: int = 0,
    stop_when_flat: float | None = None,
    flat_min_steps: int = 0,
    report: dict | None = None,
) -> list[float]:
    """Cross-entropy + auxiliary loss on :class:`sci_moe.train.Trainer`.

    AdamW (decay on the weight matrices), linear warm-up over 5 % of the steps, cosine
    decay to 0, gradient clipping at 1. ``model(x_batch) -> (logits, aux)``; ``config``
    (a classifier's config) gives ``steps``, ``batch_size``, ``lr``, ``weight_decay`` and
    ``seed``; the batch of step ``s`` (``min(batch_size, n)`` examples drawn with
    replacement) comes from a generator seeded by ``(seed, s)``. The torch thread count is
    left as the caller set it (``sci-moe provenance --threads``). With ``evaluate`` (a
    callable of the completed step count) and ``eval_every > 0``, ``evaluate(step)`` runs
    after every ``eval_every``-th step and after the last (the model is put back in
    training mode after it). With ``stop_when_flat`` (a relative tolerance >= 0; needs
    ``evaluate``, which must then return the validation accuracy, and ``eval_every > 0``)
    the run stops at the first evaluation at a step >= ``flat_min_steps`` where the
    accuracy curve is flat by :class:`sci_moe.train.TrainConfig`'s ``stop_when_flat`` rule
    (:func:`sci_moe.train.is_flat`, ``mode="max"``, last 20 % of the steps, five
    evaluations at least); ``steps`` is the cap and still sets the schedule. ``report``
    (a dict), when given, receives ``steps`` (steps run) and ``reason`` (the engine's
    stop reason: ``"flat"`` or ``"completed"``). Returns the per-step training losses; the
    model is left in eval mode.
    """
    flat = stop_when_flat is not None
    if flat and (evaluate is None or eval_every < 1):
        raise ValueError("stop_when_flat needs evaluate and eval_every >= 1")
    n = inputs.shape[0]
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
        eval_every=eval_every if flat else 0,
        monitor="val_accuracy",
        mode="max",
        stop_when_flat=stop_when_flat,
        flat_min_steps=flat_min_steps,
        restore_best=False,
        checkpoint_minutes=0,
        threads=torch.get_num_threads(),
        progress=progress,
    )

    def sample(gen: torch.Generator, k: int):
        idx = torch.randint(0, n, (k,), generator=gen)
        return inputs[idx], labels[idx]

    def loss_fn(_model, batch):
        logits, aux = model(batch[0])
        return F.cross_entropy(logits, batch[1]) + aux

    losses: list[float] = []

    def record(info: StepInfo) -> None:
        losses.append(info.metrics["loss"])
        if evaluate is not None and eval_every > 0 and not flat:
            if info.step % eval_every == 0 or info.step == cfg.steps:
                evaluate(info.step)
                model.train()

    def validate(_model) -> dict:  # the engine's evaluation (flat stop): step after the step
        return {"val_accuracy": evaluate(trainer.step)}

    data = StreamBatches(sample, cfg.batch_size, seed=config.seed)
    trainer = Trainer(
        model, loss_fn, data, cfg, evaluate=validate if flat else None, hooks=[record], name=desc
    )
    result = trainer.fit()
    if report is not None:
        report.update(steps=result.step, reason=result.reason)
    model.eval()
    return losses


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    batch_size: int = 256,
) -> torch.Tensor:
    """Logits of ``inputs`` in eval mode, batched, shape (n, K)."""
    model.eval()
    out = [model(inputs[s : s + batch_size])[0] for s in range(0, inputs.shape[0], batch_size)]
    return torch.cat(out) if out else torch.zeros(0)
