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
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _common import Row
from _self_distillation_bias import GRAD_TOL, bias_verdicts, run_bias
from _self_distillation_heuristics_plots import plot_bias, plot_stopping
from _self_distillation_stopping import run_stopping, stopping_verdicts

__all__ = [
    "BENCHMARK",
    "PART_KEYS",
    "SHARED_KEYS",
    "heuristics_verdicts",
    "main_heuristics",
    "replace_part",
    "settings",
]

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


#: The settings of each part (the rest of ``settings`` is shared or belongs to the other).
PART_KEYS = {
    "bias": ("rhos", "alphas", "losses", "n_features", "n_seeds", "maxiter", "max_full_scan"),
    "stopping": ("thetas", "stop_seeds", "n_stages", "log10_lambdas", "knn_ks"),
}
#: Settings both parts share: a part replaced in a stored run must have the stored values.
SHARED_KEYS = ("seed", "quick", "theta", "delta", "grad_tol")
#: What a replaced part records of the run that made it (``machine["parts"][part]``).
_PROVENANCE = ("cpu", "cpu_capability", "torch", "git", "contention")


def replace_part(stored: dict, new: dict, part: str) -> dict:
    """A stored ``--heuristics`` run with one part (``"bias"`` or ``"stopping"``) replaced.

    The rows (cases ``bias ...`` / ``stop ...``), the details and the part's settings
    (:data:`PART_KEYS`) come from ``new``, a run of that part alone; everything of the
    other part stays as stored. ``machine["parts"][part]`` records the CPU, torch, git
    revision and load of the run that made the part; the verdicts are computed again over
    the whole (:func:`heuristics_verdicts`).

    Raises
    ------
    ValueError
        When ``stored`` is not a heuristics run or a shared setting (:data:`SHARED_KEYS`)
        differs.
    """
    if part not in PART_KEYS:
        raise ValueError(f"part must be one of {sorted(PART_KEYS)}, got {part!r}")
    if stored.get("benchmark") != BENCHMARK:
        raise ValueError(f"the stored JSON is a {stored.get('benchmark')!r} run, not {BENCHMARK!r}")
    diff = [k for k in SHARED_KEYS if stored["machine"].get(k) != new["machine"].get(k)]
    if diff:
        shown = ", ".join(
            f"{k} {stored['machine'].get(k)!r} -> {new['machine'].get(k)!r}" for k in diff
        )
        raise ValueError(f"the stored run has other shared settings ({shown}); rerun both parts")
    prefix = "bias" if part == "bias" else "stop"

    def mine(name: str) -> bool:
        return name.split(" ", 1)[0] == prefix

    rows = [r for r in stored["rows"] if not mine(r["case"])] + [
        r for r in new["rows"] if mine(r["case"])
    ]
    rows.sort(key=lambda r: not r["case"].startswith("bias"))  # bias first, as a whole run
    details = {k: v for k, v in stored["details"].items() if not mine(k)}
    details.update({k: v for k, v in new["details"].items() if mine(k)})
    details = dict(sorted(details.items(), key=lambda kv: not kv[0].startswith("bias")))
    machine = dict(stored["machine"])
    machine.update({k: new["machine"][k] for k in PART_KEYS[part]})
    machine["parts"] = {
        **machine.get("parts", {}),
        part: {k: new["machine"].get(k) for k in _PROVENANCE},
    }
    doc = {"benchmark": BENCHMARK, "machine": machine, "rows": rows, "details": details}
    doc["verdicts"] = heuristics_verdicts(doc)
    return doc


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
        if getattr(args, "replace_part", False):  # run.py checked: one part, a stored JSON
            stored = json.loads(Path(args.json).read_text(encoding="utf-8"))
            doc = replace_part(stored, doc, "bias" if run_a else "stopping")
            doc["verdicts"] = [verdict_entry(**v) for v in doc["verdicts"]]
            for v in doc["verdicts"]:
                print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  {v['claim']}")
        write_json_doc(args.json, doc)
        print(f"wrote {args.json}")
    return 0
