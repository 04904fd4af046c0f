"""The shared minibatch training loop of the torch provenance classifiers (private)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..._util import progress_bar

__all__ = ["fit_classifier", "predict_logits"]


def fit_classifier(
    model: torch.nn.Module,
    forward: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    seed: int,
    progress: bool = True,
    desc: str = "fit",
) -> list[float]:
    """AdamW with linear warm-up (5 %) and cosine decay on cross-entropy + auxiliary loss.

    ``forward(x_batch) -> (logits, aux)``; batches are drawn with replacement from a
    generator seeded by ``seed``. Returns the per-step training losses.
    """
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    warm = max(1, steps // 20)
    losses = []
    model.train()
    show = progress
    for step in progress_bar(range(steps), desc=desc, disable=not show, leave=False):
        f = (step + 1) / warm if step < warm else 0.5 * (1 + math.cos(math.pi * step / steps))
        for g in opt.param_groups:
            g["lr"] = lr * f
        idx = torch.randint(0, inputs.shape[0], (min(batch_size, inputs.shape[0]),), generator=gen)
        logits, aux = forward(inputs[idx])
        loss = F.cross_entropy(logits, labels[idx]) + aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module,
    forward: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    inputs: torch.Tensor,
    batch_size: int = 256,
) -> torch.Tensor:
    """Logits of ``inputs`` in eval mode, batched, shape (n, K)."""
    model.eval()
    out = [forward(inputs[s : s + batch_size])[0] for s in range(0, inputs.shape[0], batch_size)]
    return torch.cat(out) if out else torch.zeros(0)
