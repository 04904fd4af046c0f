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
``--verdicts-only PATH`` recomputes a stored JSON's verdicts.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import (
    OtherLoad,
    Row,
    base_parser,
    check_resume_settings,
    machine_info,
    paired_test,
    piece_arguments,
    piece_deadline,
    print_table,
    refuse,
    resume_state,
    row_value,
    seed_verdict,
    setup,
    state_path,
    verdicts_only,
    warn_if_busy,
    write_json,
)
from _routing_science import (
    BETA,
    FLAT_RULE,
    GRAD_WINDOWS,
    MODEL,
    SWITCH_COEF,
    Pieces,
    Stop,
    flat,
    log,
    router_gradient,
    slim,
    tokens_to,
)

from sci_moe.language import (
    LMConfig,
    MarkovSources,
    TextCorpus,
    markov_corpus,
    run_training,
    validation_windows,
)

BENCHMARK = "routing_science_default_moe"
CONFIGS = Path("benchmarks/routing_science/configs")  # where the shipped ones live
CORPUS_FILE = "markov_sources.txt"  # in <json stem>_files/, read by the configurations
# the generator (MarkovSources.random's arguments) and the corpus drawn from it
SOURCES = dict(num_sources=4, alphabet_size=8, concentration=0.1, mean_length=128.0, seed=0)
METHODS = ("top-k", "default")
LOWER_BETTER = ("val_loss", "excess", "tokens_to_target")


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            seeds=2,
            steps=60,
            eval_interval=20,
            eval_batches=2,
            corpus_bytes=100_000,
            configs=[[8, 2]],
        )
    return dict(
        seeds=12,
        steps=5000,
        eval_interval=125,
        eval_batches=8,
        corpus_bytes=1_000_000,
        configs=[[8, 2], [32, 2]],
    )


def sources() -> MarkovSources:
    return MarkovSources.random(**SOURCES)


def corpus_of(p: dict) -> TextCorpus:
    """The plan's corpus (its sample seed is ``SOURCES["seed"]``, not the model's)."""
    return markov_corpus(sources(), p["corpus_bytes"], seed=SOURCES["seed"])


def train_keys(p: dict, E: int, k: int, method: str, text_file: str | None = None) -> dict:
    """``sci-moe train lm`` keys of one training (the seed is ``--seed``): part (a)'s
    model, batches, optimiser and schedule (``_routing_science.tcfg``: 30 warm-up steps)."""
    keys = dict(
        MODEL,
        num_experts=E,
        top_k=k,
        load_balance_coef=SWITCH_COEF,
        batch_size=16,
        lr=3e-3,
        weight_decay=0.1,
        warmup=min(30, p["steps"] // 10) / p["steps"],  # 30 steps (a tenth of tiny runs)
        steps=p["steps"],
        eval_every=p["eval_interval"],
        eval_batches=p["eval_batches"],
    )
    if method == "default":
        keys.update(default_moe=True, default_beta=BETA[(E, k)])
    if text_file is not None:
        keys["text_file"] = text_file
    return keys


def files_dir(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + "_files")


def write_configs(p: dict, folder: Path, files: Path) -> list[Path]:
    """One TOML per configuration and method, reading the corpus text
    ``files / CORPUS_FILE`` (a path relative to where ``sci-moe`` runs)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for E, k in p["configs"]:
        for method in METHODS:
            keys = train_keys(p, E, k, method, str(files / CORPUS_FILE))
            path = folder / f"default_moe_{E}c{k}_{method}.toml"
            lines = [
                f"# {E}c{k} {method}: sci-moe train lm --config {CONFIGS / path.name} "
                "--seed S --out DIR",
                "# from the repository root; the text file comes from python "
                f"benchmarks/routing_science/default_moe.py --write-configs {CONFIGS}",
            ]
            for key, val in keys.items():
                text = str(val).lower() if isinstance(val, bool) else repr(val)
                lines.append(f"{key} = {text}".replace("'", '"'))
            path.write_text("\n".join(lines) + "\n")
            paths.append(path)
    return paths


# ------------------------------------------------------------------------ training


def one_run(p: dict, E: int, k: int, method: str, seed: int, corpus: TextCorpus) -> dict:
    """One training with its router-gradient measurements, flatness and wall time."""
    cfg = LMConfig(**train_keys(p, E, k, method), seed=seed, progress=False)
    gx, gy = validation_windows(corpus.val, MODEL["seq_len"], GRAD_WINDOWS)
    early = {}
    at = max(1, p["steps"] // 10)

    def callback(step, model, _hist):
        if step == at:
            early.update(router_gradient(model, gx, gy))

    t0 = time.perf_counter()
    run = run_training(cfg.model_config(), cfg, corpus=corpus, callback=callback)
    h = run.history
    out = slim(h, full_diagnostics=False)
    out["grad_early"] = early
    out["grad_end"] = router_gradient(run.model, gx, gy)
    out["converged"] = flat(h["step"], h["val_loss"])
    out["wall_s"] = time.perf_counter() - t0
    log(
        f"{E}c{k} {method:7s} seed {seed}: val loss {h['val_loss'][-1]:.4f} flat "
        f"{out['converged']} router-grad density {out['grad_end']['density']:.3f} "
        f"({out['wall_s']:.0f} s)"
    )
    return out


def run_key(E: int, k: int, method: str, seed: int) -> str:
    return f"{E}c{k}/{method}/s{seed}"


PER_SEED = {  # metric: (unit, value of a run; tokens_to_target and excess come apart)
    "val_loss": ("nats", lambda h: h["val_loss"][-1]),
    "excess": ("%", None),
    "tokens_to_target": ("tokens", None),
    "converged": ("bool", lambda h: float(h["converged"])),
    "router_grad_density": ("share", lambda h: h["grad_end"]["density"]),
    "router_grad_unselected": ("share", lambda h: h["grad_end"]["unselected_share"]),
    "router_grad_norm": ("norm", lambda h: h["grad_end"]["norm"]),
    "router_grad_density_early": ("share", lambda h: h["grad_early"]["density"]),
    "router_grad_unselected_early": ("share", lambda h: h["grad_early"]["unselected_share"]),
    "router_grad_norm_early": ("norm", lambda h: h["grad_early"]["norm"]),
}


def case_rows(case: str, hs: dict, seeds: list[int], floor: float) -> tuple[list[Row], list]:
    """Rows and the table line of one configuration from its runs ``hs[method]``."""
    final = {m: [h["val_loss"][-1] for h in hs[m]] for m in METHODS}
    target = max(final["top-k"] + final["default"])
    vals = {}
    for m in METHODS:
        for metric, (_unit, get) in PER_SEED.items():
            if metric == "tokens_to_target":
                v = [tokens_to(h["tokens"], h["val_loss"], target) for h in hs[m]]
            elif metric == "excess":
                v = [100.0 * (x - floor) / floor for x in final[m]]
            else:
                v = [get(h) for h in hs[m]]
            vals[(metric, m)] = v
    rows = [Row(case, "target_loss", target, "nats")]
    for metric, (unit, _get) in PER_SEED.items():
        t, d = vals[(metric, "top-k")], vals[(metric, "default")]
        mt, md = statistics.fmean(t), statistics.fmean(d)
        if metric in LOWER_BETTER:
            ratio = mt / md if md > 0 else None
        else:  # (a Top-K share of exactly 0 up to rounding has no meaningful ratio)
            ratio = md / mt if abs(mt) > 1e-9 else None
        sd = {m: statistics.stdev(v) if len(v) > 1 else 0.0 for m, v in (("t", t), ("d", d))}
        rows += [
            Row(f"{case}/top-k", metric, mt, unit),
            Row(f"{case}/top-k", f"{metric}_sd", sd["t"], unit),
            Row(f"{case}/default", metric, md, unit, f"{case}/top-k", ratio),
            Row(f"{case}/default", f"{metric}_sd", sd["d"], unit),
        ]
        rows += [
            Row(f"{case}/{m}", f"{metric} seed {s}", v, unit)
            for m in METHODS
            for s, v in zip(seeds, vals[(metric, m)], strict=True)
        ]
        if metric in ("val_loss", "tokens_to_target") and len(seeds) >= 2:
            res = paired_test(d, t)  # both p-values on the page; the t-test decides
            rows += [
                Row(f"{case}/default", f"{metric} p_t", res["t"], "p"),
                Row(f"{case}/default", f"{metric} p_sign", res["sign"], "p"),
                Row(f"{case}/default", f"{metric} wins", float(res["losses"]), "seeds"),
            ]
    wins = sum(x < y for x, y in zip(final["default"], final["top-k"], strict=True))
    n_flat = sum(vals[("converged", "top-k")] + vals[("converged", "default")])
    line = [
        case,
        floor,
        statistics.fmean(final["top-k"]),
        statistics.fmean(final["default"]),
        f"{wins}/{len(seeds)}",
        statistics.fmean(vals[("excess", "top-k")]),
        statistics.fmean(vals[("excess", "default")]),
        statistics.fmean(vals[("tokens_to_target", "top-k")]),
        statistics.fmean(vals[("tokens_to_target", "default")]),
        statistics.fmean(vals[("router_grad_density", "top-k")]),
        statistics.fmean(vals[("router_grad_density", "default")]),
        f"{n_flat:.0f}/{2 * len(seeds)}",
    ]
    return rows, line


# --------------------------------------------------------------------------- plots


def save_plots(runs: dict, floors: dict, out: Path) -> list[Path]:
    """Learning curves (mean and range over seeds, the floor dashed) and per seed the final
    losses and router-gradient densities."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    cases = list(runs)
    fig, axes = plt.subplots(1, len(cases), figsize=(3.8 * len(cases), 3.2), squeeze=False)
    for ax, case in zip(axes[0], cases, strict=True):
        for method, color in (("top-k", "tab:blue"), ("default", "tab:red")):
            hs = runs[case][method]
            tok = np.array(hs[0]["tokens"][1:]) / 1e3
            loss = np.array([h["val_loss"][1:] for h in hs])
            ax.plot(tok, loss.mean(0), color=color, label=method)
            ax.fill_between(tok, loss.min(0), loss.max(0), color=color, alpha=0.2)
        ax.axhline(floors[case], color="k", ls="--", lw=0.8, label="Bayes floor")
        ax.set_yscale("log")
        ax.set_title(case.replace("c", " experts, k=") if "c" in case else case)
        ax.set_xlabel("training tokens (thousands)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("validation loss (nats/byte)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    paths = [out / "routing_science_default_moe_curves.png"]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    colors = ("tab:purple", "tab:orange", "tab:green")
    for i, (case, color) in enumerate(zip(cases, colors, strict=False)):
        t = [h["val_loss"][-1] for h in runs[case]["top-k"]]
        d = [h["val_loss"][-1] for h in runs[case]["default"]]
        axes[0].scatter(t, d, color=color, label=case, s=18)
        for j, method in enumerate(METHODS):
            dens = [h["grad_end"]["density"] for h in runs[case][method]]
            axes[1].scatter([i * 3 + j] * len(dens), dens, color=color, s=12)
    lo, hi = axes[0].get_xlim()
    axes[0].plot([lo, hi], [lo, hi], color="gray", lw=0.8)
    axes[0].set_xlabel("Top-K final validation loss")
    axes[0].set_ylabel("Default MoE, same seed")
    axes[0].legend(fontsize=8)
    axes[1].set_xticks(
        [i * 3 + j for i in range(len(cases)) for j in (0, 1)],
        [f"{c}\n{m}" for c in cases for m in METHODS],
        fontsize=8,
    )
    axes[1].set_ylabel("non-zero share of dL/d(router logits)")
    axes[1].set_ylim(0, 1.05)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out / "routing_science_default_moe_seeds.png")
    fig.savefig(paths[1], dpi=110)
    plt.close(fig)
    return paths


# ------------------------------------------------------------------------ verdicts


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim and configuration, by rule (issue 44).

    :func:`_common.seed_verdict` on the per-seed rows: the paired t-test decides (the
    sign test's p-value is quoted in ``why``). Claims: Default MoE lowers the final
    validation loss; reaches the target loss with fewer tokens; gives the router a dense
    gradient (share of non-zero ``dL/dlogits`` at the end). Converged when every run of
    the configuration met ``FLAT_RULE`` (rows ``converged seed <s>``); ``why`` also gives
    the mean excess over the exact floor.
    """
    has = {(r["case"], r["metric"]) for r in doc["rows"]}
    seeds = doc["machine"]["seeds"]
    cases = sorted((c for c, m in has if m == "floor"), key=lambda c: (int(c.split("c")[0]), c))
    out = []
    for case in cases:
        conv = all(
            (f"{case}/{m}", f"converged seed {s}") in has
            and row_value(doc, f"{case}/{m}", f"converged seed {s}") == 1
            for m in METHODS
            for s in seeds
        )
        excess = ", ".join(
            f"{m} {row_value(doc, f'{case}/{m}', 'excess'):.2f} %"
            for m in METHODS
            if (f"{case}/{m}", "excess") in has
        )
        for claim, metric, higher in (
            ("Default MoE lowers the final validation loss", "val_loss", False),
            ("Default MoE reaches the target loss with fewer tokens", "tokens_to_target", False),
            ("Default MoE gives the router a dense gradient", "router_grad_density", True),
        ):
            note = f"final loss above the exact floor: {excess}" if excess else ""
            if (f"{case}/default", f"{metric} p_sign") in has:
                ps = row_value(doc, f"{case}/default", f"{metric} p_sign")
                note = f"sign test p = {ps:.2g}; {note}"
            out.append(
                seed_verdict(
                    f"{claim} ({case}, generated Markov sources)",
                    doc,
                    metric=metric,
                    ours=f"{case}/default",
                    baseline=f"{case}/top-k",
                    higher_is_better=higher,
                    converged=conv,
                    note=note,
                )
            )
    return out


# ---------------------------------------------------------------------------- main


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
    args = parser.parse_args(argv)
    if (code := verdicts_only(args)) is not None:
        return code
    p = plan(args.quick)
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
        try:
            check_resume_settings(state["plan"], p, state_path(args.json), what="plan")
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
        for saved in save_plots(runs, floors, args.plots):
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
