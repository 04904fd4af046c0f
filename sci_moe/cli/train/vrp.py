"""``sci-moe train vrp``: train a MoSES multi-task vehicle routing solver.

The three MoSES stages (the whole network on CVRP, the basis LoRA experts on their
single-constraint variants, the adaptive gate on a mixture) run on the training engine,
each in a subfolder of ``--out`` (``backbone/``, ``expert/``, ``gated/``: checkpoint and
``metrics.jsonl``); instances are drawn fresh every update, so ``--resume`` continues a
run exactly. The trained solver is ``OUT/model.pt`` (read by ``sci-moe vrp solve
--model``); ``OUT/results.json`` holds the run and the mean best cost (x8 augmentation)
on fresh test instances of each of the 16 variants. ``sci-moe vrp train`` runs the same
training and writes only the model file. ``--device cuda`` trains and tests on a GPU:
instances are still drawn with the CPU generators (the same instances and action draws as
on the CPU) and moved to the policy's device; ``model.pt`` holds CPU tensors. Where torch
sees no GPU it is refused (exit code 2) before anything is written.

Examples
--------
.. code-block:: console

    $ sci-moe train vrp --out runs/moses --steps 400 --expert-steps 200 --gate-steps 200
    $ sci-moe train vrp --out runs/moses --steps 400 --expert-steps 200 --gate-steps 200 \
          --max-hours 1 --resume
    $ sci-moe train vrp --out runs/moses_gpu --steps 400 --device cuda
    $ sci-moe vrp solve instance.vrp --model runs/moses/model.pt
"""

from __future__ import annotations

from pathlib import Path

from ._common import TrainMethod

__all__ = ["METHOD", "MODEL_NAME", "model_meta", "run", "test_costs"]

#: The solver file a run writes in ``--out``.
MODEL_NAME = "model.pt"
_STAGE_FILES = tuple(
    f"{stage}/{name}"
    for stage in ("backbone", "expert", "gated")
    for name in ("checkpoint.pt", "checkpoint_prev.pt", "metrics.jsonl")
)


def _config():
    from ...vrp.moses import MoSESConfig

    return MoSESConfig


def model_meta(cfg) -> dict:
    """What ``model.pt`` records of its training run."""
    return {
        "steps": list(cfg.stage_steps()),
        "customers": cfg.num_customers,
        "variants": list(cfg.variants),
        "seed": cfg.seed,
    }


def test_costs(policy, cfg, instances: int | None = None) -> dict:
    """Mean best cost (greedy multi-start, x8 augmentation) of ``policy`` per variant.

    Parameters
    ----------
    policy : MTVRPPolicy
    cfg : MoSESConfig
        ``num_customers``, ``seed`` and ``test_instances`` (fresh instances per variant,
        drawn from ``seed``; never seen in training or validation).
    instances : int, optional
        Overrides ``cfg.test_instances``.

    The instances are drawn on the CPU and decoded on ``policy``'s device.

    Returns
    -------
    dict
        ``{variant: mean cost}`` for the 16 variants, plus ``seen_mean`` and
        ``held_out_mean`` (the variants trained in stage 3 and the others).
    """
    from ...train import derive_seed
    from ...vrp import VARIANTS, generate_instances
    from ...vrp.moses import solve

    n = cfg.test_instances if instances is None else instances
    out = {}
    for i, variant in enumerate(VARIANTS):
        ins = generate_instances(n, cfg.num_customers, variant, seed=derive_seed(cfg.seed, 2, i))
        cost, _ = solve(policy, ins)
        out[variant] = float(cost.mean())
    seen = [out[v] for v in VARIANTS if v in cfg.variants]
    unseen = [out[v] for v in VARIANTS if v not in cfg.variants]
    out["seen_mean"] = sum(seen) / len(seen) if seen else None
    out["held_out_mean"] = sum(unseen) / len(unseen) if unseen else None
    return out


def run(cfg, out: Path, resume: bool) -> dict:
    """Train the three stages in ``out``; write ``model.pt`` and the test costs when done."""
    from ...train import current_context
    from ...vrp.moses import fit_moses, save_policy

    policy, summary = fit_moses(cfg, out_dir=out, resume=resume)
    results: dict = {"train": summary}
    if summary["finished"] and current_context().is_main:
        save_policy(out / MODEL_NAME, policy, **model_meta(cfg))
        if cfg.test_instances > 0:
            results["test_cost"] = test_costs(policy, cfg)
            print(
                f"test cost (mean of {cfg.test_instances} instances per variant, x8 "
                f"augmentation): seen {results['test_cost']['seen_mean']:.4f}, held-out "
                f"{results['test_cost']['held_out_mean'] or float('nan'):.4f}"
            )
        print(f"wrote {out / MODEL_NAME}")
    return results


METHOD = TrainMethod(
    name="vrp",
    help="MoSES LoRA-expert multi-task vehicle routing solver",
    config=_config,
    run=run,
    outputs=(MODEL_NAME, *_STAGE_FILES),
    description=(
        "Train a MoSES multi-task VRP solver (POMO attention policy with one gated-LoRA "
        "expert per basis constraint) in three stages with REINFORCE and the POMO shared "
        "baseline: --steps updates of the backbone on CVRP, --expert-steps of the basis "
        "experts, --gate-steps of the adaptive gate on --variants."
    ),
)
