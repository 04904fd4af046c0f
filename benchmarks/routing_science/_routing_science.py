"""Part (a)'s model, training settings and flatness rule, shared by ``run.py`` and
``flat_probe.py`` (a helper module: the scripts import it, never each other)."""

from __future__ import annotations

from sci_moe.language import MoELMConfig, TrainConfig
from sci_moe.train import is_flat

__all__ = ["BETA", "FLAT_RULE", "MODEL", "SWITCH_COEF", "flat", "mcfg", "tcfg"]

BETA = {(8, 1): 0.9, (8, 2): 0.9, (32, 1): 0.65, (32, 2): 0.95}
# d_model 16, so that every run can train until flat within the time budget: in one-seed
# probes (8c2 Top-K) the validation loss still improved by 2.9 % over the last fifth of
# 2500 steps with d_model 64, by 2.0 % over the last fifth of 2200 steps with d_model 32,
# and by 0.8 % over the last fifth of 1500 steps with d_model 16 (1800 steps here)
# The schedule is already warm-up + cosine to 0.1 x the peak LR; more steps do not make the
# runs flat either (flat_probe.py, routing_science_flat_probe.json: d_model 16, 8c2 Top-K,
# 1.26-1.42 % over the last fifth at 2x, 4x and 8x these steps).
MODEL = dict(d_model=16, n_layers=3, n_heads=2, seq_len=64, d_hidden=16, dense_first_layer=True)
SWITCH_COEF = 0.01
FLAT_RULE = (
    "validation loss: the best value of the last 20 % of the steps is < 1 % lower than "
    "the best value up to 80 % of the steps"
)


def tcfg(p: dict, seed: int, warmup_steps: int = 30, **kw) -> TrainConfig:
    base = dict(
        steps=p["steps"],
        batch_size=16,
        lr=3e-3,
        weight_decay=0.1,
        eval_every=p["eval_interval"],
        eval_batches=p["eval_batches"],
        seed=seed,
        progress=False,
    )
    base.update(kw)
    base["warmup"] = warmup_steps / base["steps"]  # the engine's warm-up is a fraction
    return TrainConfig(**base)


def mcfg(E: int, k: int, **moe) -> MoELMConfig:
    return MoELMConfig(**MODEL, num_experts=E, top_k=k, moe=moe)


def flat(steps: list[int], loss: list[float]) -> bool:
    """``FLAT_RULE``: :func:`sci_moe.train.is_flat` (< 1 % lower over the last 20 % of the
    steps), which needs an evaluation on both sides of the cut and no fewer than two."""
    return is_flat(steps, loss, min_points=2)
