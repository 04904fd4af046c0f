"""Routing Mamba vs dense Mamba on offline byte-level text: scaling, context, hybrid.

Zhan et al., NeurIPS 2025 (arXiv 2506.18145). Byte-level LMs on the text shipped in
gensim's wheel (``sci_moe.language.load_corpus``), trained by the shared trainer
(``sci_moe.language.train``), every model from one ``sci-moe train lm`` configuration
(``--write-configs DIR`` writes them; ``configs/`` holds the full run's):

* (a) dense Mamba at 1x, 1.5x, 2.3x and 3x the active parameters of RoM (shared routing,
  top-1 of E), and RoM itself, on >= 5 paired seeds (seed ``s`` fixes the initialisation
  and the batch order of every model); validation bits per byte, learning curves and a
  convergence flag per run (flat by :func:`sci_moe.train.is_flat`: the best validation
  loss of the last 20 % of the training tokens is < 1 % below the best before them);
* (b) the scaling fit: bits per byte = a + b ln(active parameters) through the dense
  models' seed means, the dense size RoM's loss equals (as a multiple of RoM's active
  parameters), with a 95 % bootstrap interval over the seeds (paired resampling);
* (c) loss across context lengths: trained at L, evaluated at L, 2L, 4L (no position
  table: Mamba needs none);
* (d) hybrid (Mamba + attention, FFN per block) dense vs RoM at equal active
  parameters, with active FLOPs/token and training FLOPs to the dense hybrid's loss; in
  the until-flat plan also dense hybrids of 1.5x, 2.3x and 3x the hybrid RoM's active
  FLOPs per token (``_rm_plan.HYBRID_RATIOS``), whose fit of bits per byte against the log
  of the FLOPs gives the hybrid RoM's FLOPs saving at equal perplexity (the paper's 23 %
  claim) with a 95 % bootstrap interval over the seeds;
* (e) selective-scan throughput (fwd + bwd, tokens/s) of the parallel scan vs the recurrent
  CPU scan, the step-by-step reference and transformers' ``MambaMixer`` slow path.

The run goes seed by seed (every model of seed 0, then seed 1, ...); with
``--max-hours H`` a piece starts no new training run after H hours and writes the JSON of
the complete seeds so far (each finished run is kept in ``PATH.state.json``);
``--resume`` continues it. ``--verdicts-only PATH`` recomputes a stored JSON's verdicts
from its rows (no training). ``--steps N`` trains every run N steps instead of the plan's
240 (the longer runs the issue asks for; give them their own ``--json``). The plots are
named after the JSON (``<stem>_curves.png``, ``<stem>_hybrid_curves.png``,
``<stem>_scaling.png``; ``routing_mamba_*`` without ``--json``), so runs do not overwrite
each other's; ``--plots-only --json PATH --plots DIR`` re-renders them from the stored
JSON and its state file, training nothing and leaving both files as they are.

**At equal tokens** (until-flat runs): the runs of a comparison stop at different token
counts, so the JSON also holds every comparison at the largest token budget all runs of
the group reached, read from the stored curves (:mod:`_rm_equal`: the paper's protocol
of one budget for all; metrics ``*_equal_tokens``). ``--derived-only PATH`` adds or
renews these rows of a stored JSON from its state file, training nothing and changing
no other row.

**Until flat** (``--until-flat``): every run trains until its validation curve is flat by
:func:`flat` (the house rule, :func:`sci_moe.train.is_flat`), from a minimum of
``--min-steps`` (default 2,400, the long run's budget) to a cap of ``--max-steps``
(default 4x: 9,600 steps, 9.8M tokens). The schedule: the run trains in **cycles** of
``--min-steps`` steps, each a fresh warmup + cosine learning-rate schedule
(:func:`_common.until_flat`): cycle 0 has the fixed ``--steps 2400`` run's seed, batches
and schedule (its values differ from that run's at float32 rounding level: that run used
the parallel scan, and ``MambaConfig.scan="auto"`` now takes the recurrent scan on the
CPU), cycle ``c > 0`` starts from the final weights of cycle ``c - 1`` (the end of its
annealed schedule: ``sci_moe.language.TrainConfig`` keeps the final weights,
``restore_best=False``) with batch seed ``s + 100 c`` (the same for every model of seed ``s``: the
pairing holds), and after each cycle the joined curve (:func:`_common.concat`) is judged;
a flat one ends the run, else the next cycle runs, at most ``--max-steps / --min-steps``
cycles. So every curve is judged at the end of an annealed schedule, never in the middle
of one at a high learning rate (a one-shot cosine over the cap stopped flat at 2,400 steps
would still be at ~94 % of its peak rate). Each run records its ``steps``, ``tokens``,
``cycles``, ``flat`` and stop ``reason`` (``"flat"``, or ``"cap"``: unflat after the last
cycle), as rows per seed (``steps seed s``, ``tokens seed s``, ``cycles seed s``,
``converged seed s``, ``capped seed s``); its loss is its curve's last evaluation (the end
of its last cycle) and a model's seed-mean curve holds a run that stopped at its final
value up to the longest run's tokens. A run at the cap is not flat and every verdict that
compares it stays non-decisive. The state stores the plan (``until_flat``, ``steps`` = the
minimum, ``max_steps``); ``--resume`` of a state of another plan (the fixed-step runs) is
refused. The unit of a piece is one run (all its cycles): a killed piece loses the run in
progress at most, and a piece may overrun ``--max-hours`` by that run (<= 4 cycles).
``--resume`` with a larger ``--max-steps`` (nothing else changed) raises the cap: the runs
that stopped flat below the old one are kept (the larger cap trains them the same), and
the runs that reached it train on from their final weights, which every run at the cap
writes to ``<json stem>.weights/`` (a run without its file trains again from the start);
until they have, their seeds are left out of the JSON.

Cost. Measured with the parallel scan, from ``routing_mamba_long.state.json`` (the
``--steps 2400`` run: cycle 0's schedule for every run here; one thread, beside other
jobs): 12,441 s for the 35 runs' first 2,400 steps (per run 127-624 s by model, medians:
hybrids ~130 s, RoM 281 s, dense 1x/1.5x/2.3x/3x 218/316/624/619 s; a run's time varied
~2x across seeds with the load); 18 of the 35 were flat there and stop after cycle 0 (if
cycle 0 reproduces that: same seeds and batches, values equal up to rounding), the 17
others cost 5,150 s per further cycle. So with the parallel scan the run would cost at
least 12,441 + 5,150 = 17,600 s (~4.9 h, if every unflat run is flat after cycle 1) and
at most 12,441 + 3 x 5,150 = 27,900 s (~7.7 h, every one of the 17 to the cap), against
~13.8 h if all 35 ran to the cap. Estimated for the recurrent scan (not measured as a
run): its training step was measured faster by these ratios (old/new, one thread, load
~3): RoM 2.39x, dense 1x/1.5x/2.3x/3x 2.91/3.24/3.24/3.67x, hybrid dense 1.52x, hybrid
RoM 1.50x; each run's time above divided by its model's ratio gives ~4,400 s for one
cycle of all 35 runs (instead of 12,441 s) and ~2,000 s per further cycle of the 17
unflat ones, so ~6,400 s (~1.8 h) at least and ~10,500 s (~2.9 h) at most, ~4.9 h if all
35 ran to the cap. The dense hybrid sizes of (d) add 15 runs (three sizes x five seeds;
they joined the plan after the first piece had started, and ``--resume`` trains them for
the seeds already done, since the plan's settings are unchanged). Measured in the second
piece (one thread, beside CI and helpers): the 1.5x and 2.3x hybrids of seed 0 needed all
four cycles (622 s and 669 s), so the 15 cost about 2.7 h; with seeds 2-4 of the other
models (~30 min per seed at that load) the run needed about 4 h more after its first piece.
The command (the first piece without ``--resume``, then the same with it until the output
says the run is complete)::

    nice -n 10 env OMP_NUM_THREADS=1 python benchmarks/routing_mamba/run.py --threads 1 \\
        --until-flat --min-steps 2400 --max-steps 9600 \\
        --json benchmarks/routing_mamba/results/routing_mamba_flat.json --max-hours 1 --resume

``--device cuda`` trains the language models on a GPU (the scan experiment (e) stays on
the CPU); the device is recorded in the JSON's ``machine`` block for information and is not
part of the plan, so a piece may resume on another device than the one before (the
stored results are the CPU's).

This script holds the command line and the run in pieces; its parts are helper modules
beside it: ``_rm_plan.py`` (plan, models, counts), ``_rm_train.py`` (the flatness rule and
the training runs), ``_rm_scan.py`` (the scan experiment), ``_rm_scaling.py`` (mean
curves, the dense-equivalent ratio, the rows), ``_rm_verdicts.py`` (verdicts) and
``_rm_plots.py`` (plots).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common.py

from _common import (
    CYCLE_SEED,
    OtherLoad,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    print_table,
    rederive_rows,
    refuse,
    resume_state,
    row_from_dict,
    setup,
    state_path,
    verdicts_only,
    write_json,
    write_json_doc,
)
from _rm_equal import EQUAL_TOKEN_METRICS, run_rows
from _rm_plan import (
    BENCHMARK,
    UNTIL_FLAT_CAP,
    UNTIL_FLAT_MIN_STEPS,
    models,
    plan,
    train_keys,
    write_configs,
)
from _rm_plan import HYBRID_RATIOS as HYBRID_RATIOS
from _rm_plan import RATIOS as RATIOS
from _rm_plan import UNTIL_FLAT_MIN_CYCLES as UNTIL_FLAT_MIN_CYCLES
from _rm_plan import count as count
from _rm_plan import flops_per_token as flops_per_token
from _rm_plan import lm_config as lm_config
from _rm_plots import plot_names as plot_names
from _rm_plots import save_plots
from _rm_scaling import aggregate
from _rm_scaling import bootstrap_ratio as bootstrap_ratio
from _rm_scaling import equivalent_ratio as equivalent_ratio
from _rm_scaling import hybrid_saving as hybrid_saving
from _rm_scaling import mean_curve as mean_curve
from _rm_scan import exp_scan
from _rm_train import FLAT, FLAT_TAIL, raise_cap, run_all, upgrade_min_cycles
from _rm_train import cycles_until_flat as cycles_until_flat
from _rm_train import flat as flat
from _rm_train import run_one as run_one
from _rm_train import train_cycle as train_cycle
from _rm_verdicts import HYBRID_SAVING_CLAIM as HYBRID_SAVING_CLAIM
from _rm_verdicts import verdicts

from sci_moe.language import load_corpus


def _stored_runs(state: dict, seeds: list[int], spath: Path, option: str) -> dict:
    """The state's runs, after checking it holds every model of its plan for ``seeds``
    (``ValueError`` naming the missing runs and ``option`` otherwise)."""
    runs = state.get("runs", {})
    names = models(state["plan"])
    missing = [f"{n} seed {s}" for s in seeds for n in names if f"{n} seed {s}" not in runs]
    if missing:
        raise ValueError(f"{option}: {spath} lacks the runs {missing}")
    return runs


def plots_only(json_path: Path, out_dir: Path) -> list[Path]:
    """Re-render the plots of a stored run from its JSON and ``.state.json``.

    The plan is the state's, the seeds are the JSON's ``machine.seeds`` (the complete
    seeds the JSON's rows were computed from). Nothing is trained and neither file is
    written. Raises ``ValueError`` when a file or one of those seeds' runs is missing.
    """
    json_path = Path(json_path)
    spath = state_path(json_path)
    for path in (json_path, spath):
        if not path.is_file():
            raise ValueError(f"--plots-only: no stored run file {path}")
    doc = json.loads(json_path.read_text())
    state = json.loads(spath.read_text())
    p, seeds = state["plan"], doc["machine"]["seeds"]
    runs = _stored_runs(state, seeds, spath, "--plots-only")
    rows, tables, curves = [], {"lm": [], "ctx": [], "hyb": [], "fit": [], "scan": []}, {}
    scaling = aggregate(p, seeds, runs, rows, tables, curves)
    return save_plots(curves, scaling, out_dir, json_path.stem)


def derived_rows(json_path: Path):
    """``--derived-only``: the rule that renews the equal-token rows of a stored run.

    Keeps every other row of the JSON as it is and appends :func:`_rm_equal.run_rows` of
    its ``.state.json`` runs, for the JSON's ``machine.seeds`` and the state's plan.
    Raises ``ValueError`` when the state file, a run, or the until-flat plan is missing.
    """
    spath = state_path(Path(json_path))
    if not spath.is_file():
        raise ValueError(f"--derived-only: no state file {spath} beside the JSON")
    state = json.loads(spath.read_text())
    p = state["plan"]
    if not p.get("until_flat"):
        raise ValueError(
            f"--derived-only: {json_path} is a fixed-schedule run, where every run has the same "
            "token count already: there are no equal-token rows to add"
        )

    def rule(doc):
        seeds = doc["machine"]["seeds"]
        runs = _stored_runs(state, seeds, spath, "--derived-only")
        keep = [
            row_from_dict(r)
            for r in doc["rows"]
            if not r["metric"].split(" seed ")[0].startswith(EQUAL_TOKEN_METRICS)
        ]
        return keep + run_rows(runs, models(p), seeds)

    return rule


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    piece_arguments(parser, unit="training run")
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR")
    parser.add_argument(
        "--write-configs",
        type=Path,
        default=None,
        metavar="DIR",
        help="write one sci-moe train lm configuration per model into DIR and stop",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="training steps of every run instead of the plan's (evaluated every N/10 steps); "
        "write to another --json: --resume refuses a state with another plan",
    )
    parser.add_argument(
        "--until-flat",
        action="store_true",
        help="train every run in cycles of --min-steps steps (a fresh cosine schedule each, "
        "from the previous cycle's final weights) until its validation curve is flat, at most "
        "--max-steps steps (module docstring); write to another --json",
    )
    parser.add_argument(
        "--min-steps",
        type=int,
        default=None,
        metavar="N",
        help=f"with --until-flat: the minimum and cycle steps (default {UNTIL_FLAT_MIN_STEPS}; "
        "--quick: the quick plan's)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        metavar="M",
        help=f"with --until-flat: the cap, a multiple of --min-steps (default "
        f"{UNTIL_FLAT_CAP}x --min-steps)",
    )
    parser.add_argument(
        "--derived-only",
        type=Path,
        default=None,
        metavar="JSON",
        help="add or renew the equal-token rows of a stored until-flat JSON from its "
        ".state.json (trains nothing, changes no other row)",
    )
    parser.add_argument(
        "--plots-only",
        action="store_true",
        help="re-render the plots of the stored run of --json (with its .state.json) into "
        "--plots DIR; trains nothing and rewrites neither file",
    )
    args = parser.parse_args(argv)
    if verdicts_only(args) is not None:
        return
    if args.derived_only is not None:
        if not args.derived_only.is_file():
            parser.error(f"--derived-only: no such JSON {args.derived_only}")
        try:
            rederive_rows(args.derived_only, derived_rows(args.derived_only))
        except ValueError as err:
            parser.error(str(err))
        return
    if args.plots_only:
        if args.json is None or args.plots is None:
            parser.error("--plots-only needs --json PATH (a stored run) and --plots DIR")
        try:
            paths = plots_only(args.json, args.plots)
        except ValueError as err:
            parser.error(str(err))
        for path in paths:
            print(f"saved {path}")
        return
    if args.steps is not None and args.steps < 10:
        parser.error(f"--steps must be an integer >= 10, got {args.steps}")
    if args.until_flat:
        if args.steps is not None:
            parser.error("--until-flat takes --min-steps (the cycle) instead of --steps")
        if args.min_steps is not None and args.min_steps < 10:
            parser.error(f"--min-steps must be an integer >= 10, got {args.min_steps}")
        steps = args.min_steps
        if steps is None and not args.quick:
            steps = UNTIL_FLAT_MIN_STEPS
        cycle = plan(args.quick, steps)["steps"]
        try:
            p = plan(args.quick, steps, args.max_steps or UNTIL_FLAT_CAP * cycle)
        except ValueError as err:
            parser.error(str(err))
    elif args.min_steps is not None or args.max_steps is not None:
        parser.error("--min-steps and --max-steps need --until-flat")
    else:
        p = plan(args.quick, args.steps)
    if args.write_configs is not None:
        for path in write_configs(p, args.write_configs):
            print(f"wrote {path}")
        return
    if args.threads is None:
        args.threads = 1
    setup(args)
    deadline = piece_deadline(args)
    state = resume_state(args)
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    if state:
        dropped = upgrade_min_cycles(state, p)
        if dropped:
            print(
                f"the plan now judges a run from cycle {p['min_cycles']} on: "
                f"{len(dropped)} run(s) that stopped earlier train again: {', '.join(dropped)}",
                file=sys.stderr,
            )
        old_cap = (state.get("plan") or {}).get("max_steps")
        more = raise_cap(state, p)
        if state.get("plan") == json.loads(json.dumps(p)) and old_cap != p.get("max_steps"):
            print(
                f"the cap rises from {old_cap} to {p['max_steps']} steps: {len(more)} run(s) "
                f"that reached the old one train on: {', '.join(more)}",
                file=sys.stderr,
            )
        try:
            check_resume_settings(state.get("plan"), p, state_path(args.json), what="plan")
        except ValueError as err:
            refuse(str(err))
    state["plan"] = p

    def save():
        if args.json is not None:
            write_json_doc(state_path(args.json), state)

    other = OtherLoad()
    corpus = load_corpus()
    rows, tables, curves = [], {"lm": [], "ctx": [], "hyb": [], "fit": [], "scan": []}, {}
    exp_scan(p, rows, tables["scan"], state)
    save()
    # the final weights of runs at the cap, so that a larger --max-steps continues them
    weights = (
        None if args.json is None or not p.get("until_flat") else args.json.with_suffix(".weights")
    )
    done = run_all(p, seeds, corpus, state, deadline, save, device=args.device, weights=weights)
    state["wall_s"] = state.get("wall_s", 0.0) + other.report()["wall_s"]
    save()
    complete = len(done) == len(seeds)
    if not done:
        print("no seed complete yet: continue with --resume", file=sys.stderr)
        return
    scaling = aggregate(p, done, state["runs"], rows, tables, curves)
    if p.get("until_flat"):
        rows += run_rows(state["runs"], models(p), done)
    tokens = p["steps"] * p["batch"] * p["seq"]
    title = f"{p['steps']} steps = {tokens} tokens"
    if p.get("until_flat"):
        title = (
            f"until flat: cycles of {p['steps']} steps, cap {p['max_steps']} steps "
            f"= {p['max_steps'] * p['batch'] * p['seq']} tokens"
        )
    heads = [
        "model",
        "active",
        "total",
        "val bpb",
        "sd",
        "converged",
        "FLOP/token",
        "tokens to base",
    ]
    print_table(heads, tables["lm"], f"(a) {title}, seeds {done}")
    print_table(
        ["dense active", "x RoM active", "val bpb", "fit"],
        tables["fit"],
        f"(b) fit a={scaling['a']:.3f} b={scaling['b']:.4f}; RoM = dense of "
        f"{scaling['ratio']:.2f}x (95 % CI {scaling['ci'][0]:.2f}-{scaling['ci'][1]:.2f})",
    )
    print_table(["model", "eval context", "val bpb"], tables["ctx"], f"(c) trained at {p['seq']}")
    print_table(heads, tables["hyb"], "(d) hybrid")
    if "hybrid" in scaling:
        h = scaling["hybrid"]
        print(
            f"(d) hybrid RoM = a dense hybrid of {h['ratio']:.2f}x its FLOPs/token "
            f"(95 % CI {h['ci'][0]:.2f}-{h['ci'][1]:.2f}): FLOPs saving {1 - 1 / h['ratio']:.1%}"
        )
    print_table(["scan", "fwd+bwd tokens/s", "parallel / this"], tables["scan"], f"(e) {p['scan']}")
    if args.plots is not None:
        stem = BENCHMARK if args.json is None else Path(args.json).stem
        for path in save_plots(curves, scaling, args.plots, stem):
            print(f"saved {path}")
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=done,
        planned_seeds=seeds,
        complete=complete,
        plan=p,
        flat_criterion=f"sci_moe.train.is_flat: best validation loss of the last "
        f"{FLAT_TAIL:.0%} of the tokens < {FLAT:.0%} below the best before them",
        **(
            {
                "until_flat": f"cycles of {p['steps']} steps (a fresh warmup + cosine schedule "
                "each, from the previous cycle's final weights, batch seed s + "
                f"{CYCLE_SEED} c) until "
                f"the joined curve is flat, cap {p['max_steps']} steps"
            }
            if p.get("until_flat")
            else {}
        ),
        configs={n: {**train_keys(p), **k} for n, k in models(p).items()},
        contention=other.report(),
        training_wall_s=state["wall_s"],
        device=args.device,
        command=" ".join(["python", *sys.argv]),
    )
    if not complete:
        print(f"partial: seeds {done} of {seeds}; continue with --resume", file=sys.stderr)
    if args.json is not None:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
