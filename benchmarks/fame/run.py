"""FAME (Gao, Chen & Zhang, NeurIPS 2025) trained until flat, against converged baselines.

Three tasks, one input function each:

* ``linear``: ``y' = -1.5 y + x(t)`` (:func:`sci_moe.functional.fame.make_ode_data`), a
  linear operator with an exact truth (a functional linear model is right by construction);
* ``regime``: a regime-switching nonlinear operator with an exact truth (``y' = -y^3 +
  sin 2x`` when the input's mean level is positive, ``y' = -2y + x^2/2`` otherwise), where
  a mixture can give each regime its own expert;
* ``elnino``: next year's monthly Nino 1+2 SST curve from this year's
  (:func:`sci_moe.data.elnino.elnino_next_year`; real data): input years up to 1989 train,
  1990-1994 validate, 1995 on test.

Models: FAME with ``K`` expert vector fields (``K = 1`` is a plain bidirectional neural
CDE), the B-spline functional linear model (FLM, ridge by leave-one-out: trained to its
optimum), a GRU on the time-ordered observations (full-batch Adam, constant learning rate)
and, on El Nino, climatology (the training mean curve) and persistence.

Every neural fit (FAME and the GRU) trains **until flat** on the shared engine
(:class:`sci_moe.train.Trainer`, ``stop_when_flat``): the validation relative L2 error is
evaluated every ``eval_every`` steps and the fit stops at the first evaluation where the
curve so far is **flat** -- its best value over the last 20 % of the steps run is less than
1 % better than its best before (:func:`sci_moe.train.is_flat`, at least five
evaluations) -- but never before ``min_steps`` (the old fixed budgets: FAME 500 / 400 /
300 steps on regime / linear / elnino, the GRU 600), and at the latest at the cap ``steps``
(4x those; the cosine learning-rate schedule of FAME spans the cap). The best validation
weights are kept. No patience-based early stopping: a patience stop at step ``S`` after
``P`` steps without a new best is flat by the 20 % rule only when ``P >= 0.2 S``, so with
long caps it could end fits the rule judges unflat; the flat stop alone makes the stop and
the judgement (:func:`flat`, the per-fit ``flat`` rows) the same rule. Each fit records
its ``steps``, ``flat`` and the engine's stop ``reason`` (``"flat"``, or ``"completed"``
at the cap).

Metric: the relative L2 error ``||Y_hat - Y|| / ||Y||`` averaged over test curves (ODE
tasks); on El Nino the *anomaly* relative error ``||Y_hat - Y|| / ||Y - clim||`` (1 =
climatology, the mean predictor). Irregular sampling: models train on inputs observed at
a random 25-100 % of the grid (ODE tasks) or fully (El Nino) and are tested with 0, 25,
50 and 75 % of the test inputs' observation times dropped at random. Seeds ``s`` (model
seed ``s``, training / validation data seeds ``100 + s`` / ``200 + s``, one fixed test set):
per-seed rows back paired tests (paired t-test, :func:`_common.seed_verdict`) in the
verdicts.

Run (resumable in pieces: ``--max-hours`` stops between fits, ``--resume`` continues
from ``JSON.state.json``; the JSON is rewritten from the finished seeds after every piece)::

    flock /work/notes/longrun.lock nice -n 10 env OMP_NUM_THREADS=1 python \\
        benchmarks/fame/run.py --threads 1 --seeds 10 \\
        --json benchmarks/fame/results/full_flat.json --plots docs/results/img \\
        --max-hours 0.5 [--resume]

The state file stores the plan (:func:`settings` but the seed count); ``--resume`` of a
state of another plan (the fixed-step runs before the flat stop stored none) is refused.
``--device cuda`` trains FAME and the GRU on a GPU (default cpu, the reference of the
stored results); it is not part of the plan (a run resumes on any device) and the JSON's
machine record notes the last piece's.
``--seeds N`` with ``--resume`` adds seeds to a stored run (the finished fits are kept).

Cost (one thread): the 5-seed fixed-step run took 1,586 s of fits. Until flat, fits run
at least as long as before (the minimum is the old budget) and stop once flat. Measured
(one thread, ``nice -n 5``, beside another run): regime seed 0 ``FAME K=2`` flat at its
minimum, 500 steps in 31 s; the GRU flat at 600 steps in 10.5 s. So 10 seeds cost about
2 x 1,586 s ~ 1 h of fits if fits flatten near their minimum, and at most ~4x that
(~4 h) if every fit ran to its cap.
``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its rows (no training).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import (
    OtherLoad,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    rederive_verdicts,
    refuse,
    resume_state,
    setup,
    state_path,
    verdicts_only,
    write_json,
    write_json_doc,
)
from _fame_fit import DROPS as DROPS
from _fame_fit import FLAT, TASKS, run
from _fame_fit import flat as flat
from _fame_plots import plot
from _fame_report import finished_seeds, rows_of
from _fame_verdicts import verdicts

BENCHMARK = "fame"


def settings(quick: bool) -> dict:
    """Sizes, steps and the expert counts per task."""
    return dict(
        seeds=2 if quick else 5,
        n_train=40 if quick else 100,
        n_val=20 if quick else 30,
        n_test=20 if quick else 50,
        fame=dict(
            hidden=8,
            expert_hidden=16,
            attention_dim=8,
            decoder_hidden=8,
            num_quadrature=9,
            time_scale=8.0,
        ),
        train=dict(
            lr=1e-2,
            batch_size=32,
            eval_every=5 if quick else 25,
            patience=0,  # the flat stop alone (module docstring)
            stop_when_flat=FLAT,
            monitor="val_rel_l2",
        ),
        # the cap; the fit stops flat from min_steps on
        steps={"regime": 80, "linear": 80, "elnino": 80}
        if quick
        else {"regime": 2000, "linear": 1600, "elnino": 1200},
        min_steps={"regime": 20, "linear": 20, "elnino": 20}
        if quick
        else {"regime": 500, "linear": 400, "elnino": 300},
        gru_steps=120 if quick else 2400,
        gru_min_steps=30 if quick else 600,
        experts={"regime": (1, 2, 4, 8), "linear": (1, 4), "elnino": (1, 4)},
    )


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdicts, device=True)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    piece_arguments(parser, unit="fit")
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="paired seeds (default: 5, quick 2); raising it with --resume adds seeds to a "
        "stored run",
    )
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    cfg = settings(args.quick)
    if args.seeds is not None:
        if args.seeds < 2:
            parser.error(f"--seeds must be >= 2 (a paired test needs two), got {args.seeds}")
        cfg["seeds"] = args.seeds
    state = resume_state(args)
    plan = json.loads(json.dumps({k: v for k, v in cfg.items() if k != "seeds"}))
    if state:  # resuming fits of another plan would mix runs
        try:
            check_resume_settings(
                state.get("plan"),
                plan,
                state_path(args.json),
                what="plan",
                before="a fixed-step run",
            )
        except ValueError as err:
            refuse(str(err))
    state["plan"] = plan
    if args.json is not None:
        write_json_doc(state_path(args.json), state)
    deadline = piece_deadline(args)
    other = OtherLoad()
    t0 = time.perf_counter()
    done = run(args, cfg, state, deadline)
    seeds_of = {t: finished_seeds(state, cfg, t, args.seed) for t in TASKS}
    seeds_of = {t: s for t, s in seeds_of.items() if len(s) >= 2}
    load = other.report()
    print(f"piece: {time.perf_counter() - t0:.0f} s; finished seeds {seeds_of}; complete {done}")
    if args.json is None or not seeds_of:
        return 0
    rows, curves = rows_of(state, cfg, seeds_of)
    seeds = sorted({s for v in seeds_of.values() for s in v})
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=seeds,
        task_seeds=seeds_of,
        complete=done,
        settings=cfg,
        flat_rule="best validation error < 1 % better over the last 20 % of the steps run; "
        "FAME and GRU fits stop at the first flat evaluation from min_steps on (cap: steps)",
        fit_seconds_total=float(
            sum(u.get("fit_seconds", 0.0) for k, u in state.items() if "|" in k)
        ),
        contention_last_piece=load,
        device=args.device,  # of the last piece, for information (not in the plan)
    )
    write_json(args.json, BENCHMARK, machine, rows)
    doc = json.loads(args.json.read_text())
    doc["curves"] = curves
    write_json_doc(args.json, doc)
    rederive_verdicts(args.json, verdicts)
    if args.plots is not None:
        plot(json.loads(args.json.read_text()), args.plots, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
