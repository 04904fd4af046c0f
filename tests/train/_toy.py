"""A tiny regression task with dropout (global RNG) for the engine's tests; also a script.

``python -m tests.train._toy OUT STEPS [--resume]`` trains it with a checkpoint every
step, so a test can SIGKILL it at any point and resume.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch import nn

from sci_moe._util import load_latest
from sci_moe.train import ShuffledBatches, TrainConfig, Trainer, seed_everything


def make(steps: int = 40, out_dir=None, dropout: float = 0.2, **overrides):
    cfg = TrainConfig(
        **{
            "steps": steps,
            "batch_size": 8,
            "lr": 0.02,
            "eval_every": 5,
            "progress": False,
            "warmup": 0.1,
            **overrides,
        }
    )
    seed_everything(cfg.seed)
    g = torch.Generator().manual_seed(123)
    x = torch.randn(50, 4, generator=g)
    y = torch.sin(x.sum(1, keepdim=True))
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 1))
    data = ShuffledBatches(50, cfg.batch_size, lambda idx: (x[idx], y[idx]), seed=cfg.seed)

    def loss(m, b):
        return nn.functional.mse_loss(m(b[0]), b[1])

    def evaluate(m):
        return {"val_loss": float(nn.functional.mse_loss(m(x), y))}

    return Trainer(model, loss, data, cfg, evaluate=evaluate, out_dir=out_dir, name="toy")


def weights(trainer) -> dict:
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


if __name__ == "__main__":  # pragma: no cover - run by the SIGKILL and torchrun tests
    torch.set_num_threads(1)
    out, steps = sys.argv[1], int(sys.argv[2])
    if "--ddp" in sys.argv:
        from sci_moe.train import init_distributed

        ctx = init_distributed()
        t = make(steps, out, dropout=0.0, restore_best=False)
        save = t.save_checkpoint

        def slow_save():  # rank 0 writes late: no rank may return before the files are whole
            if ctx.is_main:
                time.sleep(0.5)
            save()

        t.save_checkpoint = slow_save
        t.fit()
        state, _, _ = load_latest(Path(out) / "checkpoint.pt", what="checkpoint")
        if state["step"] != steps:
            raise SystemExit(f"rank {ctx.rank} read a checkpoint at step {state['step']}")
        if ctx.is_main:
            torch.save(weights(t), f"{out}/final.pt")
    else:
        t = make(steps, out, checkpoint_every=1, restore_best=False)
        t.fit(resume="--resume" in sys.argv)
        torch.save(weights(t), f"{out}/final.pt")
