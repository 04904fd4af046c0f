"""Issue 47, item 4: the two self-distillation heuristics of the paper, decided.

Run through ``python benchmarks/self_distillation/run.py --heuristics [--quick] [--json PATH]
[--plots DIR]`` (this module holds the section; ``self_distillation.py`` dispatches to it).
Takanami, Takahashi and Sakata (NeurIPS 2025, arXiv:2501.16226): "early stopping that limits
the number of stages, which is broadly effective, and bias parameter fixing, which helps under
label imbalance".

(a) **Bias fixing under label imbalance** (generated data with a known answer: the paper's
noisy Gaussian mixture). Class ratio ``rho`` (probability of cluster +1) in {0.5, 0.3, 0.2,
0.1, 0.05}, label noise ``theta = 0.3``, ``Delta = 0.5``, ``alpha = M/N`` in {2, 0.5}, BCE and
MSE. For a learned (unregularised) bias and for the bias fixed at 0 in every stage, the
optimal plain classifier (0-SD) and optimal hard-label 1-SD (hyper-parameters minimising the
replica theory's final test error, :func:`optimize_sd`), the theory's error at the optimum and,
beside it, a finite-N simulation at the same hyper-parameters (``N = 1000``, 10 data sets;
the same data sets for every variant, so every comparison is paired). The simple non-learned
baseline is the majority class, population error ``min(rho, 1 - rho)``.

(b) **Early stopping of stages on real pretrained features.** all-MiniLM-L6-v2 sentence
embeddings of the offline 20-Newsgroups excerpt (atheism vs space; 1,488 sentences of 195
posts), a clean test part of 30 % of the posts, label noise ``theta`` in {0, 0.1, 0.2, 0.3,
0.4} injected into the rest (per class), a validation part of 25 % of the remaining posts
(noisy labels, as a user would have). Hard-label SD of a BCE linear probe, stages 0..5:
**retuned** (every stage's ridge chosen on validation, :func:`fit_self_distillation`,
greedy) and **fixed ridge** (stage 0's ridge reused by every stage, no retuning). The
heuristic: :func:`early_stopping_stage` (stop at the first stage whose validation error does
not improve, keep the best so far). Compared with the best stage in hindsight (test
accuracy), with stage 0 (plain training) and with running all stages; baselines trained on
the same training part: the tuned stage-0 probe, a nearest-centroid classifier, a k-NN
classifier (cosine, k tuned on validation) and the majority class.

Convergence: every probe and every simulated stage is a strictly convex problem solved by
L-BFGS (or in closed form); it counts as converged when the largest gradient entry per sample
(:func:`stage_gradient`) is below ``GRAD_TOL``. Verdict rules: :func:`bias_verdicts` and
:func:`stopping_verdicts` (paired t-tests over seeds, :func:`decide_verdict`).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _common import Row
from _self_distillation_bias import GRAD_TOL, bias_verdicts, run_bias
from _self_distillation_heuristics_plots import plot_bias, plot_stopping
from _self_distillation_stopping import run_stopping, stopping_verdicts

BENCHMARK = "self_distillation_heuristics"


def settings(quick: bool) -> dict:
    """Sizes of the run (``--quick``: under a minute)."""
    if quick:
        return {
            "rhos": (0.5, 0.1),
            "alphas": (2.0,),
            "losses": ("bce",),
            "n_features": 300,
            "n_seeds": 5,
            "maxiter": 6,
            "max_full_scan": 9,
            "thetas": (0.0, 0.3),
            "stop_seeds": 5,
            "n_stages": 3,
            "log10_lambdas": (-1.0, 0.0, 1.0, 2.0, 3.0),
            "knn_ks": (1, 5, 15),
        }
    return {
        "rhos": (0.5, 0.3, 0.2, 0.1, 0.05),
        "alphas": (2.0, 0.5),
        "losses": ("bce", "mse"),
        "n_features": 1000,
        "n_seeds": 10,
        "maxiter": 40,
        "max_full_scan": 64,
        "thetas": (0.0, 0.1, 0.2, 0.3, 0.4),
        "stop_seeds": 10,
        "n_stages": 5,
        "log10_lambdas": tuple(np.arange(-1.0, 4.01, 0.5).round(1)),
        "knn_ks": (1, 3, 5, 9, 15, 25, 45),
    }


def heuristics_verdicts(doc: dict) -> list[dict]:
    """``run.py --verdicts-only`` on a ``--heuristics`` JSON: :func:`bias_verdicts` and
    :func:`stopping_verdicts` again, from the stored ``details``, rows and run settings."""
    m = doc["machine"]
    cfg = {k: tuple(m[k]) if isinstance(m[k], list) else m[k] for k in settings(m["quick"])}
    details = doc["details"]
    out = []
    if any(k.startswith("bias ") for k in details):
        out += bias_verdicts(details, doc["rows"], cfg)
    if any(not k.startswith("bias ") for k in details):
        out += stopping_verdicts(details, cfg)
    return out


# --------------------------------------------------------------------------- main


def main_heuristics(args) -> int:
    """``self_distillation.py --heuristics``: run, print, write the JSON (with verdicts), plot."""
    from _common import OtherLoad, machine_info, verdict_entry, write_json_doc

    other = OtherLoad()
    t0 = time.perf_counter()
    cfg = settings(args.quick)
    if getattr(args, "stop_seeds", None) is not None:  # checked by run.py
        cfg["stop_seeds"] = args.stop_seeds
    sections = {x.strip() for x in args.sections.split(",") if x.strip()}
    run_a = "bias" in sections or sections == {"optimal", "bias", "minilm"}
    run_b = "minilm" in sections or sections == {"optimal", "bias", "minilm"}
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        section="heuristics (issue 47, item 4)",
        theta=args.theta,
        delta=args.delta,
        grad_tol=GRAD_TOL,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
    )
    print(
        f"self_distillation --heuristics: {machine['cpu']}, seed {args.seed}, git {machine['git']}"
    )
    rows: list[Row] = []
    details: dict = {}
    if run_a:
        t = time.perf_counter()
        run_bias(cfg, args.seed, rows, details, args.theta, args.delta)
        rows.append(Row("bias", "wall_s", time.perf_counter() - t, "s"))
    if run_b:
        t = time.perf_counter()
        run_stopping(cfg, args.seed, rows, details, args.minilm_cache)
        rows.append(Row("stop", "wall_s", time.perf_counter() - t, "s"))
    row_dicts = [dataclasses.asdict(r) for r in rows]
    verdicts = []
    if run_a:
        verdicts += bias_verdicts(details, row_dicts, cfg)
    if run_b:
        verdicts += stopping_verdicts(details, cfg)
    for v in verdicts:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  {v['claim']}\n    {v['why']}")
    if args.plots is not None:
        # the plots are named after the JSON (a run with other settings keeps its own)
        stem = Path(args.json).stem if args.json else BENCHMARK + ("_quick" if args.quick else "")
        if run_a:
            plot_bias(details, row_dicts, cfg, Path(args.plots) / f"{stem}_bias.png")
        if run_b:
            plot_stopping(details, cfg, Path(args.plots) / f"{stem}_stages.png")
    machine["contention"] = other.report()
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.json is not None:
        doc = {
            "benchmark": BENCHMARK,
            "machine": machine,
            "rows": row_dicts,
            "verdicts": [verdict_entry(**v) for v in verdicts],
            "details": details,
        }
        write_json_doc(args.json, doc)
        print(f"wrote {args.json}")
    return 0
