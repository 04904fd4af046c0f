"""The plan and the models of ``run.py``: sizes, training settings, parameter and FLOP counts.

:func:`plan` (steps, evaluations, batch and context in tokens, seeds, the until-flat cycle
steps and cap), the model keys of every compared model (:func:`models`: RoM and the dense
models at :data:`RATIOS` x RoM's active parameters, the hybrids), their
:class:`~sci_moe.language.LMConfig`, active and total parameter counts and FLOPs per token.
A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import math
from pathlib import Path

from sci_moe.language import LMConfig, MoETransformerLM
from sci_moe.language.mamba import RoMBlock

__all__ = [
    "BENCHMARK",
    "CLAIMED_HYBRID_SAVING",
    "CLAIMED_RATIO",
    "HYBRID_RATIOS",
    "LN2",
    "RATIOS",
    "UNTIL_FLAT_CAP",
    "UNTIL_FLAT_MIN_CYCLES",
    "UNTIL_FLAT_MIN_STEPS",
    "active_params",
    "count",
    "flops_per_token",
    "hybrid_sizes",
    "lm_config",
    "model_keys",
    "models",
    "plan",
    "train_keys",
    "write_configs",
]


BENCHMARK = "routing_mamba"


LN2 = math.log(2.0)


#: Dense sizes, as multiples of RoM's active parameters (the paper: RoM matches 2.3x).
RATIOS = (1.0, 1.5, 2.3, 3.0)


CLAIMED_RATIO = 2.3


#: Dense hybrid sizes beyond the equal-active one, as multiples of the hybrid RoM's active
#: FLOPs per token (the until-flat plan only): the dense hybrids' scaling curve, on which
#: the hybrid RoM's FLOPs saving at equal perplexity is read (the paper: 23 %).
HYBRID_RATIOS = (1.5, 2.3, 3.0)


#: The paper's FLOPs saving of the RoM hybrid at equal perplexity (quoted, not measured).
CLAIMED_HYBRID_SAVING = 0.23


#: The until-flat mode's defaults: the minimum (cycle) steps of the full run (the long
#: run's budget) and the cap as a multiple of it.
UNTIL_FLAT_MIN_STEPS = 2400


UNTIL_FLAT_CAP = 4


#: Cycles every until-flat run trains before its curve is judged: a single annealed cycle
#: always ends flat-looking. Measured in the first pieces (judged from one cycle on): 7 of
#: 21 runs stopped "flat" after one cycle, and every run given a second cycle ended it 3-5 %
#: lower (RoM 1-2 %), so a run is flat only when one more cycle gains too little.
UNTIL_FLAT_MIN_CYCLES = 2


def plan(quick: bool, steps: int | None = None, max_steps: int | None = None) -> dict:
    """The run's settings; ``steps`` overrides the training steps (evaluated every tenth).

    ``max_steps`` (a multiple of the steps): the until-flat mode, cycles of ``steps``
    steps up to ``max_steps`` in all, judged from the ``min_cycles``-th cycle on
    (:data:`UNTIL_FLAT_MIN_CYCLES`, or every cycle allowed when fewer; the plan gets
    ``until_flat=True``, ``max_steps`` and ``min_cycles``). Raises ``ValueError`` when
    ``max_steps`` is not a positive multiple of the steps.
    """
    if quick:
        p = dict(d=16, steps=8, batch=4, seq=32, seeds=2, E=4, eval_every=4, scan=(2, 32, 16))
    else:
        p = dict(d=32, steps=240, batch=16, seq=64, seeds=5, E=4, eval_every=24, scan=(8, 128, 64))
    if steps is not None:
        p.update(steps=steps, eval_every=max(1, steps // 10))
    if max_steps is not None:
        if max_steps < p["steps"] or max_steps % p["steps"]:
            raise ValueError(
                f"--max-steps must be a multiple of the minimum steps {p['steps']} "
                f"(whole cycles), got {max_steps}"
            )
        cycles = max_steps // p["steps"]
        p.update(
            until_flat=True, max_steps=max_steps, min_cycles=min(UNTIL_FLAT_MIN_CYCLES, cycles)
        )
    return p


def train_keys(p: dict) -> dict:
    """The training keys of every configuration (``sci-moe train lm``'s names)."""
    return dict(
        steps=p["steps"],
        batch_size=p["batch"],
        lr=3e-3,
        warmup=0.1,
        eval_every=p["eval_every"],
        eval_batches=4,
        seq_len=p["seq"],
        n_heads=4,
        positions=False,
        d_state=16,
    )


def model_keys(d, layers, expand, experts=None, ffn=False):
    keys = dict(d_model=d, n_layers=len(layers), d_hidden=2 * d, layers=layers, expand=expand)
    if experts is not None:
        keys.update(mamba_experts=experts, mamba_top_k=1)
    if ffn:
        keys.update(mamba_ffn=True, positions=True)
    return keys


def lm_config(p: dict, keys: dict) -> LMConfig:
    return LMConfig(**{**train_keys(p), **keys})


def active_params(model: MoETransformerLM) -> tuple[int, int]:
    """(active, total) non-embedding parameters."""
    total = sum(p.numel() for n, p in model.named_parameters() if not n.startswith(("tok", "pos")))
    active = total
    for b in model.blocks:
        if isinstance(b.attn, RoMBlock):
            active -= (
                b.attn.expert_parameters()
                - b.attn.expert_parameters() * b.attn.config.top_k // b.attn.config.num_experts
            )
    return active, total


def count(p, keys) -> tuple[int, int]:
    return active_params(MoETransformerLM(lm_config(p, keys).model_config()))


def models(p: dict) -> dict[str, dict]:
    """The configurations of (a) and (d), by name: RoM, the dense sizes, the hybrids.

    A dense size is the (``d_model`` multiple of 4, ``expand`` 2..6) whose active
    parameters are closest to the target multiple of RoM's (``d_model`` as small as
    possible: the embedding is not counted).
    """
    d = p["d"]
    rom = model_keys(d, "rr", 2, experts=p["E"])
    base = count(p, rom)[0]
    out = {"RoM": rom}
    grid = [(dd, e) for dd in range(d, 2 * d + 1, 4) for e in range(2, 7)]
    sizes = {g: count(p, model_keys(g[0], "mm", g[1]))[0] for g in grid}
    for r in RATIOS:
        dd, e = min(
            grid,
            key=lambda g: (abs(sizes[g] / base - r) > 0.05 * r, g[0], abs(sizes[g] / base - r)),
        )
        out[f"dense {r:g}x"] = model_keys(dd, "mm", e)
    out["hybrid dense"] = model_keys(d, "ma", 2, ffn=True)
    out["hybrid RoM"] = model_keys(d, "ra", 2, experts=p["E"], ffn=True)
    if p.get("until_flat"):
        out.update(hybrid_sizes(p, out["hybrid RoM"]))
    return out


def hybrid_sizes(p: dict, rom: dict) -> dict[str, dict]:
    """The dense hybrids of :data:`HYBRID_RATIOS`, by name (``"hybrid dense 1.5x"``, ...).

    A size is the (``d_model`` multiple of 4, ``expand`` 2..6) dense hybrid whose active
    FLOPs per token (:func:`flops_per_token`: attention scores included, so ``d_model``
    counts twice) are closest to the target multiple of the hybrid RoM's, ``d_model`` as
    small as possible.
    """
    d = p["d"]

    def flops(keys):
        return flops_per_token(MoETransformerLM(lm_config(p, keys).model_config()), p["seq"])

    base = flops(rom)
    grid = [(dd, e) for dd in range(d, 2 * d + 1, 4) for e in range(2, 7)]
    sizes = {g: flops(model_keys(g[0], "ma", g[1], ffn=True)) for g in grid}
    out = {}
    for r in HYBRID_RATIOS:
        dd, e = min(
            grid,
            key=lambda g: (abs(sizes[g] / base - r) > 0.05 * r, g[0], abs(sizes[g] / base - r)),
        )
        out[f"hybrid dense {r:g}x"] = model_keys(dd, "ma", e, ffn=True)
    return out


def write_configs(p: dict, folder: Path) -> list[Path]:
    """One ``sci-moe train lm --config`` TOML file per model (the seed is ``--seed``).

    An until-flat plan adds ``until_flat = true``, ``max_cycles`` (its cap over its
    cycle) and ``min_cycles``, so the file reruns the run's row as the benchmark trained it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    cycles = {}
    if p.get("until_flat"):
        cycles = {
            "until_flat": True,
            "max_cycles": p["max_steps"] // p["steps"],
            "min_cycles": p.get("min_cycles", 1),
        }
    for name, keys in models(p).items():
        path = folder / (name.replace(" ", "_").replace(".", "p") + ".toml")
        lines = [f"# {name}: sci-moe train lm --config {path.name} --seed S --out DIR"]
        for k, v in {**train_keys(p), **keys, **cycles}.items():
            lines.append(
                f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}".replace("'", '"')
            )
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def flops_per_token(model, seq) -> float:
    """2 x active matmul parameters + causal attention scores (2 * 2 * seq/2 * d per layer)."""
    active, _ = active_params(model)
    attn = sum(1 for b in model.blocks if b.kind == "a")
    return 2.0 * active + attn * 2 * seq * model.config.d_model
