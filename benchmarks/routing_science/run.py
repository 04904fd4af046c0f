"""Routing science on a small byte-level MoE language model (real text, 2-core CPU scale).

Three experiments with :mod:`sci_moe.language` (decoder-only transformer, SwiGLU experts,
first FFN dense, trained on gensim's Wikipedia excerpt + Lee news articles, fixed
90/10 split of each stream):

``(a) default``
    Top-K vs Default MoE (Panda et al. 2025) on two configurations (``CONFIGS``: 8 experts
    k=2 and 32 experts k=2; beta 0.9 and 0.95 as in the paper), 12 paired seeds each
    (seed ``s`` of both methods shares initialisation and batch order), every run trained
    until its validation loss is flat (``FLAT_RULE``; ``converged`` is stored per run).
    Both use the Switch loss (coef 0.01). Per seed: final validation perplexity, tokens
    to the target perplexity (the highest final perplexity of all runs of the
    configuration, so every run reaches it; log-linear interpolation between
    evaluations), median step time, and the router's gradient from the LM loss alone
    (:func:`router_gradient`: share of non-zero ``dL/dlogits`` entries, share of its
    squared norm on experts the token did not select, per-expert norms of ``dL/dW``) at
    10 % of the steps and at the end. The paired t-test decides; the sign test's p-value
    is reported beside it.
``(b) finetune``
    The 8-expert k=2 Top-K models of (a) fine-tuned on the news stream only (a
    "downstream" domain, validated on the news validation part), without and with the
    orthogonality + variance losses (Guo et al. 2025): validation loss, expert-output
    overlap, routing-score variance, MaxVio.
``(c) balance``
    Switch load-balancing loss (the Top-K runs of (a)) vs auxiliary-loss-free bias
    balancing (DeepSeek-V3 rule, rate 1e-3, no balancing loss) vs no balancing, k=2:
    MaxVio (global, over the validation windows) and perplexity.

The fine-tuning coefficients (``FT_COEFS``: orthogonality 1e-3, variance 1.0, both
per-token means) were picked from a one-seed probe of a few values (the paper's values
are not in our notes); the Switch coefficient and bias rate are the papers' defaults.

Rows follow ``benchmarks/_common``: ``ratio > 1`` means the paper's method is better
(e.g. ``top-k ppl / default ppl``). Run:
``python benchmarks/routing_science/run.py [--quick] [--json PATH] [--seed 0] [--threads 1]
[--plots DIR] [--max-hours H] [--resume]`` (default one torch thread: with two threads on
a busy 2-core machine the steps ran 7x slower). The run is resumable in pieces:
``--max-hours`` stops between trainings and ``--resume`` continues from ``JSON.state.json``
(every finished training, written after each one); the JSON and plots are written when
all trainings are done. Per-seed rows (metric ``<metric> seed <s>``) back the verdicts of
:func:`verdicts`; ``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its
rows (no training).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import (
    OtherLoad,
    Row,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    print_table,
    refuse,
    resume_state,
    setup,
    state_path,
    verdicts_only,
    warn_if_busy,
)
from _common import write_json as _write_json
from _routing_science import (
    FLAT_RULE,
    MODEL,
    SWITCH_COEF,
    Pieces,
    Stop,
    log,
)
from _routing_science import flat as flat
from _routing_science import router_gradient as router_gradient
from _routing_science import tokens_to as tokens_to
from _rs_experiments import BIAS_RATE, FT_COEFS, exp_balance, exp_default, exp_finetune
from _rs_plots import save_plots
from _rs_verdicts import verdicts

from sci_moe.language import (
    load_corpus,
)

BENCHMARK = "routing_science"


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            seeds=2,
            ft_seeds=1,
            steps=100,
            eval_interval=25,
            eval_batches=4,
            ft_steps=40,
            configs=((8, 2),),
            balance_experts=(8,),
        )
    return dict(
        seeds=12,
        ft_seeds=3,
        steps=1800,
        eval_interval=50,
        eval_batches=8,
        ft_steps=150,
        configs=((8, 2), (32, 2)),
        balance_experts=(8, 32),
    )


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    piece_arguments(parser, unit="training")
    parser.add_argument(
        "--plots", type=Path, default=None, metavar="DIR", help="save PNG plots here"
    )
    args = parser.parse_args()
    if verdicts_only(args) is not None:
        return
    if args.threads is None:
        args.threads = 1  # one thread: on a shared 2-core machine 2 threads ran 7x slower
    setup(args)
    p = plan(args.quick)
    p["seed0"] = args.seed
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    few = seeds[: p["ft_seeds"]]
    state = resume_state(args)
    plan_json = json.loads(json.dumps(p))
    if "plan" in state:  # a state without a plan (a new run) passes
        try:
            check_resume_settings(state["plan"], plan_json, state_path(args.json), what="plan")
        except ValueError as err:
            refuse(str(err))
    state["plan"] = plan_json
    deadline = piece_deadline(args)
    pieces = Pieces(state, deadline, state_path(args.json) if args.json is not None else None)
    warn_if_busy()
    other = OtherLoad()
    corpus = load_corpus()
    log(f"corpus: {corpus.sources} (train, validation bytes); seeds {seeds}")
    rows: list[Row] = []
    runs: dict = {}
    ta, tb, tc = [], [], []
    try:
        exp_default(p, seeds, pieces, corpus, rows, ta, runs)
        exp_finetune(few, pieces, rows, tb, runs)
        exp_balance(p, few, pieces, corpus, rows, tc, runs)
    except Stop as stop:
        done = sum(k.startswith(("a/", "b/", "c/")) for k in state)
        print(
            f"stopped before {stop} (--max-hours); {done} trainings stored in "
            f"{pieces.path}; continue with --resume"
        )
        return
    tokens_per_run = p["steps"] * 16 * MODEL["seq_len"]
    print()
    print_table(
        [
            "case",
            "beta",
            "top-k ppl",
            "sd",
            "default ppl",
            "sd",
            "default wins",
            "top-k tok→target",
            "default tok→target",
            "top-k grad density",
            "default grad density",
            "flat runs",
        ],
        ta,
        f"(a) Top-K vs Default MoE: {p['steps']} steps = {tokens_per_run} tokens, "
        f"seeds {seeds}; target = highest final ppl of the configuration",
    )
    print()
    print_table(
        ["metric", "", "pretrained", "baseline FT", "L_o+L_v FT", "ratio"],
        tb,
        f"(b) fine-tuning on news, {p['ft_steps']} steps, coefs {FT_COEFS}, seeds {few}",
    )
    print()
    print_table(
        ["case", "val ppl", "MaxVio (global)", "MaxVio (per batch)"],
        tc,
        f"(c) Switch loss ({SWITCH_COEF}) vs aux-loss-free bias (rate {BIAS_RATE}) vs none, "
        f"seeds {few}",
    )
    if args.plots is not None:
        for path in save_plots(runs, p, args.plots):
            print(f"saved {path}")
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=seeds,
        ft_seeds=few,
        plan={k: v for k, v in p.items() if k != "seed0"},
        model=MODEL,
        flat_rule=FLAT_RULE,
        training_s_total=round(
            sum(v.get("wall_s", 0.0) for k, v in state.items() if k.startswith("a/")), 1
        ),
        contention=other.report(),  # of the last piece
        command=" ".join(["python", *sys.argv]),
    )
    print(f"last piece: wall time {machine['contention']['wall_s']} s")
    if args.json is not None:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        _write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
