"""Part (a)'s model, training settings and flatness rule, shared by ``run.py``,
``flat_probe.py`` and ``default_moe.py`` (a helper module: the scripts import it, never
each other), and the pieces of a resumable run: :class:`Pieces`, :func:`router_gradient`,
:func:`tokens_to`, :func:`slim`."""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

from _common import write_json_doc

from sci_moe.language import MoELMConfig, TrainConfig
from sci_moe.train import is_flat

__all__ = [
    "BETA",
    "DENSE_TOL",
    "FLAT_RULE",
    "GRAD_WINDOWS",
    "MODEL",
    "SWITCH_COEF",
    "Pieces",
    "Stop",
    "flat",
    "log",
    "mcfg",
    "router_gradient",
    "slim",
    "tcfg",
    "tokens_to",
]

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
DENSE_TOL = 1e-6  # a router-logit gradient entry counts as non-zero above this x its layer's max
GRAD_WINDOWS = 64  # validation windows of the router-gradient measurement
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
    steps), which needs an evaluation on both sides of the cut and at least five."""
    return is_flat(steps, loss)


class Stop(Exception):
    """The piece's time (``--max-hours``) is up; the state holds every finished training."""


def tokens_to(steps_tokens: list[int], ppl: list[float], target: float) -> float | None:
    """First token count where the curve reaches ``target`` (log-linear interpolation)."""
    for i, v in enumerate(ppl):
        if v <= target:
            if i == 0:
                return float(steps_tokens[0])
            a, b = math.log(ppl[i - 1]), math.log(v)
            f = (a - math.log(target)) / (a - b) if a != b else 1.0
            return steps_tokens[i - 1] + f * (steps_tokens[i] - steps_tokens[i - 1])
    return None


def router_gradient(model, x, y) -> dict:
    """The router's gradient from the cross-entropy alone, on windows ``x`` -> ``y``.

    Train mode (Default MoE's term is active only in training), no auxiliary loss (the
    Switch loss gives every router a dense gradient by itself). Per MoE layer, from
    ``g = dL/dlogits`` (tokens x experts) and ``G = dL/dW`` (the router weight):
    ``density`` (share of non-zero entries of ``g``: above ``DENSE_TOL`` times the largest
    entry of the layer, since the renormalised Top-K's analytically zero entries come out as
    float32 rounding, about 1e-8 of it; a threshold per token instead counts rounding as
    non-zero on tokens whose own selected entries are tiny, e.g. 1e-11 next to 9e-7 where
    the layer's largest is 1e-3), ``unselected_share`` (share of
    ``|g|^2`` on experts the token did not select), ``norm`` (``|G|``) and ``expert_norms``
    (the row norms of ``G``, one per expert). Default MoE's EMA buffers and the model's
    gradients are left as they were, so the measurement does not touch a training run.
    """
    import torch

    was_training = model.training
    emas = [m.default.ema.clone() for m in model.moe_layers() if m.default is not None]
    model.train()
    model.zero_grad(set_to_none=True)
    ce, _aux, infos = model.loss(x, y)
    for info in infos:
        info.routing.logits.retain_grad()
    ce.backward()
    out = []
    for info, layer in zip(infos, model.moe_layers(), strict=True):
        r = info.routing
        g = r.logits.grad.detach()
        sel = torch.zeros_like(g, dtype=torch.bool)
        idx = torch.where(r.kept, r.indices, torch.zeros_like(r.indices))
        sel.scatter_(1, idx, r.kept)
        sq = g.square()
        G = layer.router.weight.grad.detach()
        out.append(
            {
                "density": float((g.abs() > DENSE_TOL * g.abs().amax()).float().mean()),
                "unselected_share": float(sq[~sel].sum() / sq.sum().clamp_min(1e-30)),
                "norm": float(G.norm()),
                "expert_norms": [float(v) for v in G.norm(dim=1)],
            }
        )
    model.zero_grad(set_to_none=True)
    for m, ema in zip([m for m in model.moe_layers() if m.default is not None], emas, strict=True):
        m.default.ema.copy_(ema)
    model.train(was_training)
    return {
        "density": statistics.fmean(o["density"] for o in out),
        "unselected_share": statistics.fmean(o["unselected_share"] for o in out),
        "norm": statistics.fmean(o["norm"] for o in out),
        "min_max_expert": statistics.fmean(
            min(o["expert_norms"]) / max(max(o["expert_norms"]), 1e-30) for o in out
        ),
        "layers": out,
    }


def slim(h: dict, full_diagnostics: bool) -> dict:
    """What the state keeps of a training history (diagnostics: first and last only,
    unless ``full_diagnostics``; the median step time instead of every step's)."""
    out = {k: h[k] for k in ("step", "tokens", "val_loss", "val_ppl")}
    out["step_ms"] = statistics.median(h["step_time"]) * 1e3
    d = h["diagnostics"]
    out["diagnostics"] = d if full_diagnostics else [d[0], d[-1]]
    return out


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Pieces:
    """Every training of the run, keyed, kept in ``state`` (and its file, after each one).

    :meth:`get` returns a stored result or, while the piece has time, computes and stores
    it; past ``deadline`` it raises :class:`Stop`.
    """

    def __init__(self, state: dict, deadline: float, path: Path | None) -> None:
        self.state, self.deadline, self.path = state, deadline, path

    def save(self) -> None:
        if self.path is not None:
            write_json_doc(self.path, self.state)

    def get(self, key: str, compute):
        if key in self.state:
            return self.state[key]
        if time.perf_counter() > self.deadline:
            raise Stop(key)
        self.state.update(compute())
        self.save()
        return self.state[key]
