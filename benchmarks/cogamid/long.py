"""CoGaMiD, long incremental sequence (issue 45 item 5): replay methods and add-on ablations.

Class-incremental segmentation of procedural 64 x 64 scenes with 8 classes (every class
2-3 appearance modes, colour drift 0.05 per step), protocol 3-1: the base step learns
classes 1-3, then five steps add one class each (6 steps in all), with the background-shift
rule. Per seed one base model is trained on step 0 and shared by every method; then each
method runs steps 1-5:

* ``finetune``: plain cross-entropy on the shifted labels (no memory);
* ``prototype``: STAR-like replay of one prototype per old class;
* ``gmm``: CoGaMiD replay from a 3-component full-covariance mixture per class;
* ``gmm_da``: ``gmm`` + Dynamic Adjustment (threshold 0.7);
* ``gmm_grc``: ``gmm`` + the GRC contrastive loss (weight 0.1, temperature 1);
* ``gmm_da_grc``: both add-ons (the full method in this package's reading).

Every fit (the base step and every later step of every method) trains **until flat** on
the shared trainer (:class:`sci_moe.train.Trainer`, ``stop_when_flat``): the validation
mIoU (seen classes, 40 validation images of the step) is evaluated every ``eval_every``
steps (25 for the base step, 10 later) and the fit stops at the first evaluation where the
curve so far is **flat** -- its best value over the last 20 % of the steps run is less
than 1 % above the best before (:func:`sci_moe.train.is_flat`, at least five evaluations)
-- but never before the minimum (the old budgets: ``base_steps`` 1200 for the base step,
``increment_steps`` 300 for every later one) and at the latest at the cap
(``max_steps_factor`` = 4 times the minimum: 4800 and 1200 steps). Adam at a constant
learning rate: a longer cap does not change the steps before it, so a base fit's first
1200 steps are the old run's base fit (which stopped at a median of 625) and its steps
after that continue it (later fits start from these other base weights, so they differ
from the old run's). The best validation weights (a gain above ``min_delta`` 0.005 makes a
new best) are restored. No patience-based early stopping (the old run stopped after 6 / 5
evaluations without a gain above ``min_delta``, which left many fits unflat by the 20 %
rule): the flat stop alone makes the stop and the judgement (:func:`flat`) one rule. A fit
at its cap (reason ``"completed"``) is recorded as not flat, and a verdict that compares
it is never decisive. Per fit the JSON keeps its ``steps seed S`` and ``flat seed S`` (1 or
0) rows (case ``base`` or ``<method>/step<t>``), and per method ``capped_fraction``.
Reported metrics are on separate test images of the step.

    flock /work/notes/longrun.lock nice -n 10 env OMP_NUM_THREADS=1 python \\
        benchmarks/cogamid/long.py --json benchmarks/cogamid/results/cogamid_long_flat.json \\
        --seeds 10 --threads 1 --max-hours 1 [--resume] --plots DIR

The JSON is rewritten after every seed (per-seed raw results under ``runs``, the learning
curves under ``curves``); ``--resume`` keeps the seeds already in it and runs the rest, and
``--max-hours`` stops starting new seeds after that wall time. The JSON stores the
training plan (``machine.plan``: the stop rule, minima and caps); ``--resume`` of a JSON of
another plan (the fixed-step runs with patience stops before, such as
``cogamid_long.json``, stored none) is refused rather than mixing runs.
``--max-steps-factor F`` sets the cap to F times the minimum (default 4; 1: fixed
budgets). ``--device cuda`` trains the networks on a GPU (default cpu, the reference of
the stored results); the JSON's machine record notes it, a run resumes on any device.
``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its rows,
``--rows-only PATH`` its rows and verdicts from its runs (no training).

Cost (one thread): the old 5-seed run took ~1,852 s (~370 s per seed: base fits stopped at
a median of 625 steps, later fits at ~90-150). Measured here (one thread, ``nice -n 5``,
beside another run): ~0.06 s per base step and ~0.09-0.11 s per later step, evaluations
included. With every fit at least at the old budget a seed costs at least ~1200 x 0.06 +
30 x 300 x 0.1 ~ 900 s, so 10 seeds ~2.5 h if fits flatten at their minimum, ~3-4 h if
many run on a while, and at most ~4x that (~10 h) if every fit ran to its cap.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _cogamid_long_plots import LABELS, _plot
from _cogamid_long_rows import FLAT_FRACTION, FLAT_TOL, flat, make_rows
from _cogamid_long_verdicts import CLAIMS, verdicts  # noqa: F401 (CLAIMS stays long.CLAIMS)
from _common import (
    OtherLoad,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    refuse,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)

from sci_moe.vision.cogamid import IncrementalConfig, SceneConfig, run_incremental

BENCHMARK = "cogamid_long"
METHODS = {
    "finetune": {"method": "finetune"},
    "prototype": {"method": "prototype"},
    "gmm": {"method": "gmm", "n_components": 3},
    "gmm_da": {"method": "gmm", "n_components": 3, "dynamic_adjustment": True},
    "gmm_grc": {"method": "gmm", "n_components": 3, "grc_weight": 0.1},
    "gmm_da_grc": {
        "method": "gmm",
        "n_components": 3,
        "dynamic_adjustment": True,
        "grc_weight": 0.1,
    },
}
#: The full-run setting (64 x 64, 8 classes, protocol 3-1: six steps). ``base_steps`` and
#: ``increment_steps`` are the minimum steps of a fit (the old fixed budgets), the cap is
#: ``max_steps_factor`` times that.
FULL = {
    "n_classes": 8,
    "base": 3,
    "increment": 1,
    "image_size": 64,
    "n_train": 160,
    "n_val": 40,
    "n_test": 60,
    "width": 8,
    "feature_dim": 16,
    "base_steps": 1200,
    "base_eval_every": 25,
    "increment_steps": 300,
    "eval_every": 10,
    "min_delta": 0.005,
    "max_steps_factor": 4,
}
#: A small setting for the tests and checks (32 x 32, 5 classes, 3-1).
QUICK = {
    **FULL,
    "n_classes": 5,
    "image_size": 32,
    "n_train": 40,
    "n_val": 16,
    "n_test": 16,
    "base_steps": 40,
    "base_eval_every": 10,
    "increment_steps": 20,
    "eval_every": 5,
}


def plan(size: dict) -> dict:
    """The training plan a run's JSON stores (``machine.plan``): ``--resume`` needs the same.

    Parameters
    ----------
    size : dict
        :data:`FULL` or :data:`QUICK` (with ``max_steps_factor`` set).

    Returns
    -------
    dict
        The stop rule (``"flat"``: :func:`flat` from the minimum on, no patience), its tail
        fraction and tolerance, and per kind of fit (base, later steps) the minimum and the
        cap in optimiser steps and the evaluation interval in steps.
    """
    factor = size["max_steps_factor"]
    return {
        "stop": "flat",
        "flat_fraction": FLAT_FRACTION,
        "flat_tolerance": FLAT_TOL,
        "patience": 0,
        "min_delta": size["min_delta"],
        "base_min_steps": size["base_steps"],
        "base_max_steps": factor * size["base_steps"],
        "base_eval_every": size["base_eval_every"],
        "increment_min_steps": size["increment_steps"],
        "increment_max_steps": factor * size["increment_steps"],
        "eval_every": size["eval_every"],
    }


def _config(
    size: dict, seed: int, base: bool = False, device: str = "cpu", **kw
) -> IncrementalConfig:
    pre = "base_" if base else ""
    factor = size["max_steps_factor"]
    return IncrementalConfig(
        seed=seed,
        scene=SceneConfig(
            n_classes=size["n_classes"],
            image_size=size["image_size"],
            min_size=0.25,
            max_size=0.45,
            modes_per_class=(2, 3),
        ),
        base=size["base"],
        increment=size["increment"],
        n_train=size["n_train"],
        n_val=size["n_val"],
        n_test=size["n_test"],
        width=size["width"],
        feature_dim=size["feature_dim"],
        steps=factor * size["base_steps"],  # the caps
        increment_steps=factor * size["increment_steps"],
        eval_every=size[pre + "eval_every"],
        patience=0,  # the flat stop alone (module docstring)
        stop_when_flat=FLAT_TOL,
        flat_tail=FLAT_FRACTION,
        flat_min_steps=size["base_steps" if base else "increment_steps"],
        min_delta=size["min_delta"],
        restore_best=True,
        progress=False,
        device=device,
        **kw,
    )


def run_seed(seed: int, size: dict, methods: list[str], device: str = "cpu") -> dict:
    """One seed: the shared base model, then every method's later steps (the networks on
    ``device``)."""
    t0 = time.perf_counter()
    base = run_incremental(_config(size, seed, True, device, method="finetune"), stop_after=0)
    start = {"model": base["model"].state_dict()}
    rec = {"base": base["steps"][0], "curves": {"base": base["curves"][0]}, "methods": {}}
    for name in methods:
        t1 = time.perf_counter()
        cfg = _config(size, seed, device=device, **METHODS[name])
        out = run_incremental(cfg, start_state=start)
        rec["methods"][name] = out["steps"]
        rec["curves"][name] = out["curves"][1:]
        print(
            f"seed {seed} {name} ({time.perf_counter() - t1:.0f} s): mIoU "
            + ", ".join(f"{s['miou_all']:.3f}" for s in out["steps"])
            + "; stopped at "
            + ", ".join(
                f"{c['step']}{'' if flat(c['evals'], c['reason']) else ' (not flat)'}"
                for c in out["curves"][1:]
            ),
            flush=True,
        )
    rec["seconds"] = time.perf_counter() - t0
    return rec


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    p.add_argument("--seeds", type=int, default=5, help="number of seeds (default 5)")
    piece_arguments(p)
    p.add_argument(
        "--plots",
        type=Path,
        default=None,
        metavar="DIR",
        help="PNG folder (<stem>_miou.png, <stem>_curves.png; stem: the JSON's)",
    )
    p.add_argument(
        "--methods", nargs="+", choices=list(METHODS), default=list(METHODS), help="methods"
    )
    p.add_argument("--rows-only", type=Path, default=None, metavar="JSON")
    p.add_argument(
        "--max-steps-factor",
        type=int,
        default=None,
        metavar="F",
        help=f"cap of every fit: F times its minimum (default {FULL['max_steps_factor']}; "
        "1: fixed budgets)",
    )
    args = p.parse_args(argv)
    if args.max_steps_factor is not None and args.max_steps_factor < 1:
        p.error(f"--max-steps-factor must be an integer >= 1, got {args.max_steps_factor}")
    if (done := verdicts_only(args)) is not None:
        return done
    if args.rows_only is not None:
        doc = json.loads(args.rows_only.read_text())
        rows = make_rows(doc["runs"], doc["machine"]["seeds"], doc["machine"]["methods"])
        doc["rows"] = [vars(r) for r in rows]
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)]
        write_json_doc(args.rows_only, doc)
        return 0
    setup(args)
    size = dict(QUICK if args.quick else FULL)
    if args.max_steps_factor is not None:
        size["max_steps_factor"] = args.max_steps_factor
    methods = list(args.methods)
    seeds = [args.seed + i for i in range(args.seeds)]
    machine = machine_info(
        seed=args.seed,
        seeds=seeds,
        quick=args.quick,
        methods=methods,
        flat_fraction=FLAT_FRACTION,
        flat_tolerance=FLAT_TOL,
        plan=plan(size),
        **size,
    )
    runs: dict = {}
    machine["device"] = args.device  # for information: not compared on --resume
    walls: list = []
    if (old := previous_run(args)) is not None:
        now = {"methods": methods, "quick": args.quick}
        try:  # other methods or another size
            check_resume_settings({k: old["machine"].get(k) for k in now}, now, args.json)
        except ValueError as err:
            refuse(str(err))
        try:  # resuming fits of another plan would mix runs
            check_resume_settings(
                old["machine"].get("plan"),
                machine["plan"],
                args.json,
                what="training plan",
                before="a fixed-step run with patience stops, before every fit trained until flat",
            )
        except ValueError as err:
            refuse(str(err))
        runs = old.get("runs", {})
        walls = old["machine"].get("pieces", [])
    other = OtherLoad()
    t0 = time.perf_counter()
    deadline = piece_deadline(args)

    def write() -> dict:
        machine["pieces"] = [*walls, other.report()]
        rows = make_rows(runs, seeds, methods)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [vars(r) for r in rows]}
        doc["runs"] = runs
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)] if rows else []
        doc["complete"] = all(str(s) in runs for s in seeds)
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    for s in seeds:
        if str(s) in runs:
            continue
        if time.perf_counter() > deadline:
            break
        runs[str(s)] = run_seed(s, size, methods, args.device)
        print(f"seed {s} done in {runs[str(s)]['seconds']:.0f} s", flush=True)
        write()
    doc = write()
    if doc["rows"]:
        table = [
            [LABELS[m]]
            + [row_value(doc, m, k) for k in ("miou_all_last", "miou_old_last", "miou_new_last")]
            + [row_value(doc, m, "forgetting_base"), row_value(doc, m, "converged_fraction")]
            for m in methods
        ]
        print_table(
            ["method", "mIoU all (last)", "old", "new", "forgetting", "flat"],
            table,
            title=f"CoGaMiD long sequence, seeds {sorted(runs, key=int)}",
        )
        for v in doc["verdicts"]:
            print(
                f"{v['verdict']:>12}  decisive={v['decisive']!s:5} p={v['p_value']}  {v['claim']}"
            )
    if args.plots is not None and doc["rows"]:
        stem = "cogamid_long" if args.json is None else Path(args.json).stem
        for path in _plot(doc, args.plots, methods, stem):
            print(f"wrote {path}")
    print(f"total {time.perf_counter() - t0:.0f} s; complete: {doc['complete']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
