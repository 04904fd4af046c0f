"""Default MoE vs Top-K trained until flat, on generated text with an exact loss floor.

Part (a) of ``run.py`` compares the two on real text, where the byte-level model never
saturates (``flat_probe.py``: still 1.3 % better over the last fifth after 8x the steps).
Here the corpus is generated (:class:`sci_moe.language.MarkovSources`, ``SOURCES``): every
document (mean 128 letters, ended by a newline) comes from one of 4 order-1 Markov
chains over 8 letters with Dirichlet(0.1) transition rows, so predicting a letter needs
the document's source, which only the context reveals, and each source is its own
table: the data rewards experts that specialise (a source-blind bigram model is 74 %
above the floor). The floor is exact: the Bayes-optimal predictor that sees only the
window (:meth:`~sci_moe.language.MarkovSources.bayes_loss`, on the trainer's own
validation windows); ``excess`` is a run's final validation loss above it, in per cent.

Default MoE (Panda et al. 2025: the experts a token does not select contribute an EMA of
their past outputs, so the router's gradient reaches every expert's score) against
Top-K on two configurations (``configs``: 8 experts k=2 and 32 experts k=2; beta from
``_routing_science.BETA``), 12 paired seeds (seed ``s`` of both methods shares
initialisation and batch order), the model, optimiser and Switch loss of ``run.py``'s
part (a) (d_model 16, 3 layers, windows of 64 bytes, AdamW, 30 warm-up steps, cosine
to 10 % of the peak LR), 5000 steps, every run judged by ``FLAT_RULE``. One-seed
probes (gain of the last fifth of the steps; ``FLAT_RULE`` asks < 1 %): 8c2 at 3000
steps 0.14-1.07 % (seeds 0, 1; one of four runs not flat); at 4000 steps 8c2 Default
0.06 and 0.29 %, 32c2 Top-K 0.47 and 0.92 %, 32c2 Default 0.22 and 0.45 %; at 5000
steps 32c2 Top-K seed 1 0.14 % (1.1 % above the floor, 94 s at one thread on the
shared 2-core machine; 66-157 s a run over the probes, with the other load) and 8c2
Default seed 1 -1.2 % (its loss rose after 60 % of the steps, from 0.891 to 0.910
nats/byte at the end, 6.1 % above the floor: flat, no new best). Per seed: final
validation loss, excess over the floor, tokens to the target loss (the highest final
loss of the configuration, so every run reaches it; log-linear interpolation between
evaluations), flatness and the router's gradient from the LM loss alone
(:func:`_routing_science.router_gradient`: share of non-zero ``dL/dlogits`` entries,
share of its squared norm on unselected experts, ``|dL/dW|``) at 10 % of the steps and
at the end. The paired t-test decides (:func:`_common.seed_verdict`), the sign test's
p-value is quoted beside it.

Rows: case ``<E>c<k>`` metrics ``floor``, ``oracle_rate``, ``target_loss`` (nats/byte);
case ``<E>c<k>/<method>`` the per-seed metrics (mean, ``_sd`` and ``<metric> seed <s>``),
on the Default MoE rows the ratio Top-K / Default for losses and tokens (``> 1``: Default
better) and rows ``<metric> p_t``, ``p_sign``, ``wins`` for ``val_loss`` and
``tokens_to_target``. Every training is one ``sci-moe train lm`` configuration
(``configs/default_moe_<E>c<k>_<method>.toml``, from ``--write-configs DIR``, which also
writes the corpus text they read beside the JSON). Run:
``python benchmarks/routing_science/default_moe.py [--quick] [--json PATH] [--seed 0]
[--threads 1] [--plots DIR] [--max-hours H] [--resume]``; ``--max-hours`` stops between
trainings, ``--resume`` continues from ``JSON.state.json`` (written after each one);
``--seeds N`` with ``--resume`` adds seeds to a stored run (the target loss is then the
highest final loss over all its seeds); ``--verdicts-only PATH`` recomputes a stored JSON's
verdicts.
"""

from __future__ import annotations

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
    write_json,
)
from _routing_science import (
    FLAT_RULE,
    MODEL,
    Pieces,
    Stop,
    log,
)
from _rs_dm_report import case_rows, save_plots
from _rs_dm_train import (
    BENCHMARK,
    CONFIGS,
    CORPUS_FILE,
    METHODS,
    SOURCES,
    corpus_of,
    files_dir,
    one_run,
    plan,
    run_key,
    sources,
    write_configs,
)
from _rs_dm_verdicts import verdicts

from sci_moe.language import (
    validation_windows,
)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    piece_arguments(parser, unit="training")
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument(
        "--write-configs",
        type=Path,
        default=None,
        metavar="DIR",
        help="write one sci-moe train lm configuration per training into DIR (and the "
        "corpus text they read beside the JSON) and stop",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="paired seeds (default: 12, quick 2); raising it with --resume adds seeds to a "
        "stored run (the finished trainings are kept)",
    )
    args = parser.parse_args(argv)
    if (code := verdicts_only(args)) is not None:
        return code
    p = plan(args.quick)
    if args.seeds is not None:
        if args.seeds < 2:
            parser.error(f"--seeds must be >= 2 (a paired test needs two), got {args.seeds}")
        p["seeds"] = args.seeds
    if args.write_configs is not None:
        files = files_dir(args.json or CONFIGS.parent / "results" / f"{BENCHMARK}.json")
        for path in write_configs(p, args.write_configs, files):
            print(f"wrote {path}")
        files.mkdir(parents=True, exist_ok=True)
        text = sources().sample(p["corpus_bytes"], SOURCES["seed"])
        (files / CORPUS_FILE).write_text(text, encoding="ascii")
        print(f"wrote {files / CORPUS_FILE} (the corpus the configurations read)")
        return 0
    if args.threads is None:
        args.threads = 1  # one thread: on a shared 2-core machine 2 threads ran 7x slower
    setup(args)
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    state = resume_state(args)
    if "plan" in state:  # a state without a plan (a new run) passes
        stored = state["plan"]
        if p["seeds"] < stored.get("seeds", p["seeds"]):
            refuse(
                f"--seeds {p['seeds']} is fewer than the {stored['seeds']} seeds of the stored "
                f"run {state_path(args.json)}: resume with --seeds {stored['seeds']} or more"
            )
        try:  # more seeds than stored: the stored trainings are the first seeds' own
            check_resume_settings(
                {**stored, "seeds": p["seeds"]}, p, state_path(args.json), what="plan"
            )
        except ValueError as err:
            refuse(str(err))
    state["plan"] = p
    path = state_path(args.json) if args.json is not None else None
    pieces = Pieces(state, piece_deadline(args), path)
    pieces.save()  # the plan, so that a piece that trains nothing can be resumed
    warn_if_busy()
    other = OtherLoad()
    corpus = corpus_of(p)
    src = sources()
    vx, vy = validation_windows(corpus.val, MODEL["seq_len"], 16 * p["eval_batches"])
    floor = float(src.bayes_loss(vx, vy).mean())
    log(f"corpus {corpus.sources}; floor {floor:.4f} nats/byte; seeds {seeds}")
    try:
        for E, k in p["configs"]:
            for seed in seeds:
                for method in METHODS:
                    key = run_key(E, k, method, seed)
                    pieces.get(
                        key,
                        lambda E=E, k=k, m=method, s=seed, key=key: {
                            key: one_run(p, E, k, m, s, corpus)
                        },
                    )
    except Stop as stop:
        print(f"stopped before {stop} (--max-hours); continue with --resume")
        return 0
    rows: list[Row] = []
    table, runs, floors = [], {}, {}
    for E, k in p["configs"]:
        case = f"{E}c{k}"
        runs[case] = {m: [state[run_key(E, k, m, s)] for s in seeds] for m in METHODS}
        floors[case] = floor
        rows += [
            Row(case, "floor", floor, "nats"),
            Row(case, "oracle_rate", src.oracle_entropy_rate(), "nats"),
        ]
        more, line = case_rows(case, runs[case], seeds, floor)
        rows += more
        table.append(line)
    print_table(
        [
            "case",
            "floor",
            "top-k loss",
            "default loss",
            "default wins",
            "top-k excess %",
            "default excess %",
            "top-k tok→target",
            "default tok→target",
            "top-k grad density",
            "default grad density",
            "flat runs",
        ],
        table,
        f"Top-K vs Default MoE on Markov sources, {p['steps']} steps, seeds {seeds}",
    )
    if args.plots is not None:
        stem = Path(args.json).stem if args.json is not None else BENCHMARK
        for saved in save_plots(runs, floors, args.plots, stem):
            print(f"saved {saved}")
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=seeds,
        plan=p,
        sources=SOURCES,
        model=MODEL,
        flat_rule=FLAT_RULE,
        curves={
            case: {
                m: [{"tokens": h["tokens"], "val_loss": h["val_loss"]} for h in v]
                for m, v in r.items()
            }
            for case, r in runs.items()
        },
        training_s_total=round(
            sum(v.get("wall_s", 0.0) for v in state.values() if isinstance(v, dict)), 1
        ),
        contention=other.report(),
        command=" ".join(["python", *sys.argv]),
    )
    if args.json is not None:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
