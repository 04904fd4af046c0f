"""MoSES long training, in pieces: the unified model, MoSES and the basis model at equal budget.

Per seed, three models of the same architecture (POMO attention policy,
:class:`~sci_moe.vrp.moses.MTVRPPolicy`), trained with REINFORCE and the POMO shared
baseline on the shared trainer, every one for ``S1 + S2 + S3`` updates of ``--batch-size``
instances whose size is drawn per batch from ``--min-customers..--customers``:

* ``unified``: no experts (rank 0), all ``S1 + S2 + S3`` updates on the seen variants
  (:data:`~sci_moe.vrp.SEEN`, at most two constraints; MTPOMO-like);
* ``moses``: the paper's stages: the backbone on CVRP (``S1``), the four basis LoRA experts
  on OVRP / VRPB / VRPL / VRPTW (``S2``, the basis solvers), the adaptive gate and residual
  LoRA on the seen variants (``S3``; ``--routing``);
* ``basis``: MoSES without the adaptive gate: its stage 1 (copied, not retrained), then the
  basis experts for ``S2 + S3`` updates; it solves a variant with its constituents' experts
  (the expert mode).

Every evaluation (every ``--eval-every`` updates) scores the stage's own validation set
(``val_cost``, the monitor that picks the best weights) and a fixed learning-curve set
shared by all models: ``--val-per-variant`` instances of each of the 16 variants at
``--customers``, greedy multi-start, gap to PyVRP at ``--curve-limit`` s and to greedy
savings (references cached in ``--references``). A model is *converged* when every one of
its stages is flat: :func:`sci_moe.train.is_flat` on the stage's ``val_cost`` (< 1 %
better over the last 20 % of the stage's updates, from five evaluations).

Pieces: ``--max-hours H`` pauses the training after H hours (mid-stage; the engine's
checkpoint resumes it exactly) and ``--resume`` continues; the JSON (``--json``) is
rewritten after every model with its curve, its convergence and the path of its policy
file (``RUN_DIR/seed<k>/<model>.pt``). ``--run-dir`` defaults to
``benchmarks/vrp/results/vrp_train_long_files`` (:data:`_vrp.RUN_DIR`): commit it with the JSON
after every piece, so that the next piece, on a fresh machine, continues the unfinished
model from its checkpoint and the evaluation finds the finished policies. ``--ship``
copies seed 0's MoSES policy into the package (:data:`sci_moe.vrp.moses.SHIPPED_POLICY`),
only from a complete run.

Defaults: ``S1, S2, S3 = 6000, 2000, 2000`` updates of 16 instances (160,000 instances per
model), eval every 250 updates. Batch 16 because, at this budget, smaller batches learn
more per instance (measured at N = 20, 4,800 instances each: batch 16 x 300 updates ended
4.1 % above greedy savings, batch 32 x 150 at 6.8 %, batch 64 x 75 at 9.1 %). Measured
seconds per update at 20-50 customers, batch 16, one thread of the shared 2-core machine
(load average 3): stage 1 0.25, stage 2 0.57, stage 3 0.55, unified 0.39 (wall clock) before
the MoSES layers' plain call skipped the routing record and stacked its low-rank products;
after it, stage 2 about 0.50 and the others unchanged (CPU time of old and new code in one
process, 3 interleaved rounds of 4 updates each, load average 2.4-2.8: old/new 1.13 for
stage 2, 1.01 stage 3, 1.09 stage 1 and 1.02 unified, whose code did not change, so +-10 %
is noise). Then two changes that keep every action and cost bitwise (log-probabilities
and gradients to rounding): the environment's masks from per-rollout constants, and the
policy dropping an instance once its rollouts are done (mixed batches). CPU time of one
update, the code before both against after both in one process, median of 8 interleaved
rounds of 4 updates at sizes drawn from 20-50, load average 1.8-2.0: old/new stage 1
1.21, stage 2 1.27, stage 3 1.14, unified 1.19 (CPU seconds per update 0.20 -> 0.16,
0.40 -> 0.33, 0.35 -> 0.31, 0.23 -> 0.20, below the wall-clock numbers above); the
greedy curve evaluation (the 16 variants at 50) old/new 1.23. So about 3 h per seed for the
three models before these two changes (up to twice that under heavier load), 9-17 h for 3
seeds; about 15-20 % less after them. Then the sampling (2026-12-07, after 1972b97):
inverse-CDF, one uniform number per rollout and step, instead of the exponential race, one
exponential per rollout and node (the same distribution; other trajectories under a given
seed). CPU time of one update, the race against inverse-CDF in one process, median of 8
interleaved rounds of 4 updates at sizes drawn from 20-50, two runs, load average 1.7-2.3:
old/new stage 1 1.18 / 1.13, stage 2 1.27 / 1.17, stage 3 1.09 / 1.07, unified 1.13 / 1.13
(CPU seconds per update about 0.17 -> 0.15, 0.33 -> 0.28, 0.42 -> 0.37, 0.20 -> 0.18); the
greedy curve evaluation does not sample and is unchanged. So about 10 % less again.

``--device cuda`` trains (and evaluates the curve set) on a GPU; instances are still
drawn with the CPU generators. The device is recorded in the JSON's ``machine`` block for
information only, not in ``settings``: ``--resume`` may continue a run on another device
(the stored CPU results stay the reference).

Full run (the commands of docs/results/vrp.rst)::

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vrp/train_long.py \\
        --threads 1 --max-hours 3 --resume \\
        --json benchmarks/vrp/results/vrp_train_long.json --plot docs/results/img/vrp_curves.png
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
import _vrp

from sci_moe.train import is_flat, seed_everything
from sci_moe.vrp import SEEN, VARIANTS
from sci_moe.vrp.moses import (
    SHIPPED_POLICY,
    MTVRPPolicy,
    PolicyConfig,
    TrainConfig,
    save_policy,
    train_moses,
    train_stage,
)

FULL = {
    "customers": 50,
    "min_customers": 20,
    "batch_size": 16,
    "steps": [6000, 2000, 2000],
    "val_per_variant": 8,
    "val_instances": 64,
    "curve_limit": 1.0,
}
QUICK = {
    "customers": 7,
    "min_customers": 5,
    "batch_size": 4,
    "steps": [10, 5, 5],
    "val_per_variant": 1,
    "val_instances": 4,
    "curve_limit": 0.02,
}


def settings(args) -> dict:
    """Everything that defines the run (a resumed run must have the same)."""
    st = dict(QUICK if args.quick else FULL)
    for k in ("customers", "min_customers", "batch_size", "steps", "val_per_variant"):
        if getattr(args, k) is not None:
            st[k] = getattr(args, k)
    st["steps"] = [int(s) for s in st["steps"]]
    st["eval_every"] = args.eval_every or max(1, min(s for s in st["steps"] if s) // 8)
    st["lr"], st["routing"] = args.lr, args.routing
    d = 16 if args.quick else args.d_model
    st["policy"] = {
        "d_model": d,
        "num_heads": 4 if d % 4 == 0 else 1,
        "num_layers": 1 if args.quick else args.layers,
        "d_ff": 2 * d,
        "rank": 2 if args.quick else args.rank,
        "routing": args.routing,
    }
    st["models"] = list(args.models)
    return st


def _config(st, seed: int, steps: int, hours: float | None, device: str = "cpu") -> TrainConfig:
    return TrainConfig(
        steps=steps,
        batch_size=st["batch_size"],
        num_customers=st["customers"],
        min_customers=st["min_customers"],
        val_instances=st["val_instances"],
        eval_every=st["eval_every"],
        lr=st["lr"],
        seed=seed,
        max_hours=hours,
        device=device,
        progress=False,
    )


def _build(st, seed: int, rank: bool) -> MTVRPPolicy:
    seed_everything(seed)
    cfg = dict(st["policy"])
    if not rank:
        cfg["rank"] = 0
    return MTVRPPolicy(PolicyConfig(**cfg))


def _record(results: dict, offsets: dict) -> dict:
    """The curve and convergence of a model from its stages' TrainResults."""
    curve, stages = [], {}
    for stage, res in results.items():
        for e in res.evals:
            curve.append({"update": offsets[stage] + e["step"], "stage": stage, **e})
        steps = [e["step"] for e in res.evals]
        vals = [e["val_cost"] for e in res.evals]
        stages[stage] = {
            "steps": res.steps,
            "step": res.step,
            "reason": res.reason,
            "best_step": res.best_step,
            "flat": is_flat(steps, vals),
            "train_time_s": round(res.train_time_s, 1),
        }
    return {
        "curve": curve,
        "stages": stages,
        "converged": bool(stages) and all(s["flat"] for s in stages.values()),
        "train_time_s": round(sum(s["train_time_s"] for s in stages.values()), 1),
    }


def train_model(
    model, seed, st, run_dir: Path, curve, hours, resume, stop_after=None, device="cpu"
):
    """Train (or resume) one model on ``device`` (not a setting: a stage's checkpoint
    resumes on another); returns (policy, record, finished)."""
    s1, s2, s3 = st["steps"]
    folder = run_dir / f"seed{seed}" / model
    if model == "unified":
        pol = _build(st, seed, rank=False)
        cfg = _config(st, 100 * seed + 4, s1 + s2 + s3, hours, device)
        res = train_stage(
            pol,
            "backbone",
            list(SEEN),
            cfg,
            out_dir=folder,
            resume=resume,
            extra_eval=curve,
            stop_after=stop_after,
        )
        results, offsets = {"backbone": res}, {"backbone": 0}
    else:
        steps = (s1, s2, s3) if model == "moses" else (s1, s2 + s3, 0)
        if model == "basis":  # stage 1 is MoSES's, copied (same config, seed and meta)
            src = run_dir / f"seed{seed}" / "moses" / "backbone"
            dst = folder / "backbone"
            if not dst.exists():
                if not (src / "checkpoint.pt").is_file():
                    raise SystemExit(f"basis needs MoSES's finished stage 1 in {src}")
                shutil.copytree(src, dst)
        pol = _build(st, seed, rank=True)
        results = train_moses(
            pol,
            steps,
            config=_config(st, seed, s1, hours, device),
            variants=SEEN,
            out_dir=folder,
            resume=resume or model == "basis",
            extra_eval=curve,
            stop_after=stop_after,
        )
        offsets = {"backbone": 0, "expert": s1, "gated": s1 + steps[1]}
    finished = sum(r.step for r in results.values()) == s1 + s2 + s3 and all(
        r.finished for r in results.values()
    )
    if model == "basis":
        pol.mode = "expert"
    return pol, _record(results, offsets), finished


def main(argv=None) -> int:
    p = _common.base_parser(__doc__.splitlines()[0], device=True)
    _common.piece_arguments(p, unit="stage")
    _vrp.add_run_dir_argument(p)
    p.add_argument(
        "--references", type=Path, default=Path("benchmarks/vrp/cache/vrp_references.json")
    )
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--models", nargs="+", default=list(_vrp.MODELS), choices=_vrp.MODELS)
    p.add_argument("--customers", type=int, default=None, help="largest training size (50)")
    p.add_argument("--min-customers", type=int, default=None, help="smallest (20)")
    p.add_argument("--batch-size", type=int, default=None, help="instances per update (16)")
    p.add_argument("--steps", type=int, nargs=3, default=None, metavar=("S1", "S2", "S3"))
    p.add_argument("--eval-every", type=int, default=None, help="default: min stage / 8")
    p.add_argument("--val-per-variant", type=int, default=None, help="curve set (8)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--routing", default="exact", choices=("exact", "dense"))
    p.add_argument("--plot", type=Path, default=None, help="write the learning curves here")
    p.add_argument("--ship", action="store_true", help="copy seed 0's MoSES into the package")
    p.add_argument("--ship-to", type=Path, default=SHIPPED_POLICY, help=argparse.SUPPRESS)
    p.add_argument("--stop-after", type=int, default=None, help=argparse.SUPPRESS)  # tests
    args = p.parse_args(argv)
    _common.setup(args)
    if args.json is None:
        raise SystemExit("--json PATH is needed (the run's record)")
    st = settings(args)
    t0 = time.perf_counter()
    deadline = _common.piece_deadline(args)
    prev = _common.previous_run(args)
    if prev is not None:
        try:
            _common.check_resume_settings(
                prev.get("settings"), st, args.json, fix="resume with the same flags"
            )
        except ValueError as err:
            _common.refuse(str(err))
    doc = prev or {"benchmark": "vrp_train_long", "settings": st, "runs": {}, "complete": False}
    load = _common.OtherLoad()

    def write():
        doc["machine"] = _common.machine_info(
            seed=args.seed,
            quick=args.quick,
            wall_s=round(time.perf_counter() - t0, 1),
            device=args.device,  # information only: not in the settings --resume compares
        )
        doc["machine"]["contention"] = load.report()
        doc["rows"] = _rows(doc)
        _common.write_json_doc(args.json, doc)
        if args.plot is not None:
            _vrp.plot_curves(doc, args.plot)

    limit = st["curve_limit"]
    val, keys = _vrp.instances(
        VARIANTS, st["customers"], st["val_per_variant"], base=_vrp.VAL_SEED_BASE
    )
    cache = _vrp.ReferenceCache(args.references)
    if cache.fill(val, keys, [limit]):
        raise SystemExit("the curve set's references are incomplete")
    doc["curve_reference"] = f"PyVRP 0.14 ILS, {limit:g} s"
    doc["savings_gap"] = float(
        _vrp.gap(cache.costs(keys, "savings"), cache.costs(keys, _vrp.pyvrp_name(limit))).mean()
    )
    curve = _vrp.curve_eval(val, keys, cache, _vrp.pyvrp_name(limit))
    paused = False
    for seed in range(args.seeds):
        for model in st["models"]:
            rec = doc["runs"].setdefault(str(seed), {}).get(model)
            if rec is not None and rec.get("complete"):
                continue
            left = None if args.max_hours is None else (deadline - time.perf_counter()) / 3600
            if left is not None and left <= 0:
                paused = True
                break
            print(f"seed {seed} {model} ...", file=sys.stderr, flush=True)
            pol, rec, finished = train_model(
                model,
                seed,
                st,
                args.run_dir,
                curve,
                left,
                args.resume,
                args.stop_after,
                args.device,
            )
            rec["complete"] = finished
            if finished:
                path = args.run_dir / f"seed{seed}" / f"{model}.pt"
                save_policy(path, pol, model=model, seed=seed, settings=st)
                rec["policy"] = str(path)
            doc["runs"][str(seed)][model] = rec
            write()
            if not finished:
                paused = True
                break
        if paused:
            break
    doc["complete"] = not paused and all(
        doc["runs"].get(str(s), {}).get(m, {}).get("complete")
        for s in range(args.seeds)
        for m in st["models"]
    )
    write()
    if args.ship:
        _ship(doc, args.ship_to)
    print(
        f"{'complete' if doc['complete'] else 'paused; continue with --resume'}; wrote {args.json}"
    )
    return 0


def _ship(doc: dict, dest: Path) -> None:
    rec = doc["runs"].get("0", {}).get("moses")
    if not rec or not rec.get("complete"):
        raise SystemExit("--ship: seed 0's MoSES is not trained to the end; nothing shipped")
    from sci_moe.vrp.moses import load_policy

    pol, meta = load_policy(rec["policy"])
    last = rec["curve"][-1] if rec["curve"] else {}
    meta.update(
        converged=rec["converged"],
        curve_gap=last.get("curve_gap"),
        curve_reference=doc.get("curve_reference"),
    )
    save_policy(dest, pol, **meta)
    print(f"shipped {rec['policy']} as {dest} (converged: {rec['converged']})")


def _rows(doc: dict) -> list[dict]:
    rows = []
    for seed, run in sorted(doc["runs"].items()):
        for model, rec in run.items():
            if not rec.get("curve"):
                continue
            last = rec["curve"][-1]
            rows.append(
                _common.row_dict(
                    _common.Row(
                        f"{model} seed{seed}",
                        "final_curve_gap_vs_pyvrp",
                        last["curve_gap"],
                        "%",
                    )
                )
            )
            rows.append(
                _common.row_dict(
                    _common.Row(f"{model} seed{seed}", "updates", float(last["update"]), "count")
                )
            )
    if doc.get("savings_gap") is not None:
        rows.append(
            _common.row_dict(
                _common.Row("greedy_savings", "curve_gap_vs_pyvrp", doc["savings_gap"], "%")
            )
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
