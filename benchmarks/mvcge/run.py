"""MvCGE (multi-view collaborative graph experts) against converged multi-view baselines.

Data (:func:`sci_moe.graphs.mvcge.mvcge_csbm_config`, generated with a known answer): a
3-view contextual SBM over N = 600 nodes, 4 classes, mean degree 6 per view, shared weak
Gaussian features (class means 1.0 e_c, unit noise, d = 8), split 20 % train, 20 %
validation, 60 % test, in two settings:

* ``complementary``: view v (v = 0, 1, 2) makes class v a community (contrast 0.7), so
  every view is informative about a different class and only the views together identify
  every class;
* ``consistent``: every view has the same four communities (contrast 0.4, independent
  edges): the views agree.

The reference is the exact oracle-neighbour Bayes accuracy (every other label known; a
ceiling for any classifier) with all views, each view, and the features alone.

Contestants, all on the shared trainer (:func:`sci_moe.graphs.mvcge.train_node_classifier`;
2 layers, hidden 32, dropout 0.5, Adam lr 0.01, weight decay 5e-4, full batch):

* ``MLP`` (features only); ``GCN view v``; ``best single-view GCN`` (per seed, the view
  with the best validation accuracy); ``per-view GCN ensemble`` (the three single-view
  GCNs trained apart, softmax averaged); ``early fusion`` (GCN on the summed adjacency);
  ``late fusion`` (one GCN per view trained jointly, logits averaged); ``attention fusion
  (HAN)`` (per-view GCN encoders, HAN's semantic attention);
* ``MvCGE``: 4 shared GCN experts per layer, top-2, per-node graph-aware routing, L_le
  on the router's full softmax (alpha 0.01), L_gd (beta 0.1), concatenated views;
  ablations ``MvCGE -L_le`` (alpha = 0) and ``MvCGE -L_gd`` (beta = 0).

Training until flat: at most 1000 epochs (200 with ``--quick``), the validation
cross-entropy evaluated every 2 epochs, stop after ``patience`` evaluations without a new
best (the weights of the best validation loss are kept). A run counts as **converged**
(flat) when the best validation loss of its last 20 % of evaluations is less than 1 %
below the best before them; ``patience`` is 20 % of the most evaluations a run can have,
so a run that stops early is flat by construction and only a run that reaches the cap can
fail. Learning curves (validation loss and accuracy) are stored in ``curves``.

Ten seeds (graph and model seed ``seed + i``); paired t-tests over the seeds
(:func:`_common.seed_verdict` on the per-seed rows); the verdicts of the paper's claims in
``verdicts`` (:func:`verdicts`; ``--verdicts-only PATH`` re-derives them).

Run: ``python benchmarks/mvcge/run.py [--quick] [--json PATH] [--resume] [--max-hours H]
[--plots DIR] [--threads N] [--device cuda]``. ``--device`` (default cpu, the reference
of the stored results) is where every model trains and is scored (the graphs are built on
the CPU); the JSON's machine record notes it for information only (a run resumes on any
device). The partial JSON is written after every seed; ``--resume`` continues it (seeds
already in the JSON are kept).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from _common import (
    OtherLoad,
    base_parser,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _mvcge_report import curves_of, make_rows, plot_curves, summary_table
from _mvcge_train import (
    ALPHA,
    BETA,
    DROPOUT,
    EXPERTS,
    FLAT_FRACTION,
    FLAT_TOL,
    HIDDEN,
    LAYERS,
    LR,
    SETTINGS,
    TOP_K,
    WD,
    run_seed,
)
from _mvcge_train import flat as flat
from _mvcge_verdicts import verdicts

BENCHMARK = "mvcge"


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdicts, device=True)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    piece_arguments(parser)
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated")
    parser.add_argument("--max-steps", type=int, default=None, help="epochs cap (estimates)")
    parser.add_argument("--num-nodes", type=int, default=600, help="nodes (tests: fewer)")
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    quick = args.quick
    n_seeds = args.seeds or (3 if quick else 10)
    max_steps = args.max_steps or (200 if quick else 1000)
    eval_every = 2
    # patience = the last 20 % of the most evaluations a run can have: a run that stops
    # early is flat by construction; only a run that reaches max_steps can fail the test
    patience = math.ceil(FLAT_FRACTION * max_steps / eval_every)
    num_nodes = args.num_nodes
    settings = [s for s in args.settings.split(",") if s]
    seeds = [args.seed + i for i in range(n_seeds)]
    tc = dict(
        steps=max_steps,
        lr=LR,
        weight_decay=WD,
        eval_every=eval_every,
        monitor="val_loss",
        mode="min",
        patience=patience,
        checkpoint_every=0,
    )
    machine = machine_info(
        seed=args.seed,
        quick=quick,
        seeds=seeds,
        settings=settings,
        num_nodes=num_nodes,
        max_epochs=max_steps,
        eval_every=eval_every,
        patience=patience,
        flat_fraction=FLAT_FRACTION,
        flat_tolerance=FLAT_TOL,
        hidden=HIDDEN,
        layers=LAYERS,
        dropout=DROPOUT,
        lr=LR,
        weight_decay=WD,
        experts=EXPERTS,
        top_k=TOP_K,
        alpha=ALPHA,
        beta=BETA,
    )
    machine["device"] = args.device  # for information: runs resume on any device
    print(f"mvcge: {machine['cpu']}, {torch.get_num_threads()} threads, seeds {seeds}")
    runs: dict = {}
    if (old := previous_run(args)) is not None:
        runs = old.get("runs", {})
        for setting, per_seed in runs.items():  # the curves are stored apart
            for s, rec in per_seed.items():
                for m, r in rec["methods"].items():
                    r["curve"] = old.get("curves", {}).get(setting, {}).get(m, {}).get(s)
        machine["resumed_from_wall_s"] = old["machine"].get("contention", {}).get("wall_s")
    other = OtherLoad()
    t0 = time.perf_counter()
    deadline = piece_deadline(args)
    complete = False  # until every seed of every setting is in

    def write() -> dict:
        rows = make_rows(runs, seeds)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [r.__dict__ for r in rows]}
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)] if rows else []
        doc["complete"] = complete
        doc["curves"] = curves_of(runs)
        doc["runs"] = {
            st: {s: {"bayes": r["bayes"], "methods": {
                m: {k: v for k, v in rec.items() if k != "curve"}
                for m, rec in r["methods"].items()}} for s, r in per.items()}
            for st, per in runs.items()
        }  # fmt: skip
        machine["contention"] = other.report()
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    stop = False
    for s in seeds:  # seed-major: a partial run has both settings on the same seeds
        for setting in settings:
            if str(s) in runs.get(setting, {}):
                continue
            if time.perf_counter() > deadline:
                stop = True
                break
            runs.setdefault(setting, {})[str(s)] = run_seed(setting, s, num_nodes, tc, args.device)
            write()
        if stop:
            break
    complete = all(str(s) in runs.get(st, {}) for st in SETTINGS for s in seeds)
    doc = write()
    summary_table(doc)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5} p={v['p_value']}  {v['claim']}")
    if args.plots is not None:
        # named after the JSON (mvcge_2k.json -> mvcge_2k_curves.png), so runs keep their own
        stem = (
            Path(args.json).stem if args.json is not None else "mvcge_quick" if quick else "mvcge"
        )
        name = f"{stem}_curves.png"
        plot_curves(doc, args.plots / name)
        print(f"plot in {args.plots / name}")
    print(f"total {time.perf_counter() - t0:.0f} s; complete: {complete}")
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
