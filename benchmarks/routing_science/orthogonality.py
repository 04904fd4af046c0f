"""Orthogonality + variance losses (Guo et al. 2025) fine-tuning a pretrained MoE LM, decided.

Guo et al., "Advancing Expert Specialization for Better MoE" (NeurIPS 2025, arXiv
2505.22323) fine-tune a pretrained MoE with ``L = L_task + a L_aux + b L_o + g L_v`` and
claim lower expert overlap, higher routing-score variance, preserved load balance and
better downstream scores than fine-tuning with the auxiliary loss alone. Here (issue 44,
item 3), all on the shared trainer (:func:`sci_moe.language.run_training`, every training
one ``sci-moe train lm`` configuration, ``--write-configs DIR``; ``configs/`` holds the
full run's):

1. **Pretraining** (a resumable stage): the byte-level MoE LM of ``_routing_science.py``
   (``MODEL``: d_model 16, 3 blocks, first FFN dense, 8 experts top-2, Switch loss 0.01)
   on the shipped Wikipedia excerpt + Lee news (:func:`~sci_moe.language.load_corpus`),
   in cycles of ``pretrain_steps`` (warm-up + cosine; cycle ``c > 1`` starts from cycle
   ``c - 1``'s weights with a fresh optimiser and batch seed ``100 (c - 1)``) until the
   concatenated validation curve is flat (``FLAT_RULE``: the best loss of the last 20 %
   of the steps is < 1 % below the best before) or ``pretrain_cycles`` are spent. The
   package ships no converged LM checkpoint and no real MoE ships offline for
   :func:`~sci_moe.moe.from_transformers`, hence this stage.
2. **Fine-tuning** on the news stream alone (the "downstream" domain, its own 90/10
   split) over the grid ``orthogonality_coef`` x ``variance_coef`` (``ORTHO`` x ``VAR``,
   ``0 x 0`` = the auxiliary-loss-only baseline; both losses are per-token means, the
   Switch loss stays on everywhere) x ``seeds`` paired seeds (seed ``s`` fixes the batch
   order of every grid point; all start from the same pretrained weights), each in cycles
   of ``ft_steps`` until its news validation curve is flat (at most ``ft_cycles``).
3. **Measures** of each fine-tuned model (final weights, news validation windows, means
   over the MoE layers): LM loss (nats/byte), expert-output overlap, routing-score
   variance, global MaxVio; and a **downstream** measure on held-out tasks whose text the
   LM never saw: linear-probe accuracy (logistic regression, 5-fold cross-validation,
   topic folds grouped by post) on frozen features of the fine-tuned model (the
   byte-mean of every block's residual stream and of the final hidden state, and every
   MoE layer's expert usage on the text: :func:`model_features`) for (a) 20-Newsgroups
   sentences ``alt.atheism`` vs ``sci.space`` (400 per class) and (b) Pang-Lee
   movie-review polarity (100 per class), both shipped in gensim's wheel
   (:func:`sci_moe.data.newsgroups.newsgroup_sentences`,
   :func:`sci_moe.data.fed_tasks.task_sentences`). Reference points measured in the same
   run: the pretrained model, a byte-histogram probe (non-learned features) and chance.
4. **Verdicts** (:func:`verdicts`): the best grid point (lowest mean news validation loss
   of the non-baseline points) against the baseline, paired t-test over the seeds on
   every measure; decisive only when p < 0.05 and the pretraining and every compared
   fine-tune are flat.

Rows (cases): ``pretrain`` (validation loss on all text, steps, cycles, converged),
``pretrained`` (before fine-tuning: news validation loss, overlap, variance, MaxVio, probe
accuracies), ``bytes`` and ``chance`` (probe accuracies), and per grid point
``o<ortho>_v<var>`` the seed mean, ``_sd`` and ``<metric> seed <s>`` of ``val_loss``,
``overlap``, ``score_variance``, ``max_violation``, ``probe_acc`` (mean of the tasks),
``probe_<task>``, ``converged`` and ``steps`` (``vs`` ``o0_v0``; ratio > 1: better in the
paper's direction), for the seeds whose whole grid is done.

The results JSON holds every finished unit (``runs``: pretraining cycles, reference
probes, fine-tunes) and ``complete``, and is rewritten after each unit; ``--max-hours H``
starts no unit after H hours, ``--resume`` continues. The pretrained weights live beside
the JSON in ``<json stem>_files/pretrained.pt`` (with ``lee_news.txt``, the fine-tuning
text the configurations read); keep them with a partial JSON (the JSON stores their
SHA-256 and a resume checks it). Run:
``python benchmarks/routing_science/orthogonality.py --threads 1 --json
benchmarks/routing_science/results/routing_science_orthogonality.json --plots
docs/results/img --max-hours 0.6 [--resume]`` (``--quick``: a toy run in seconds;
``--device cuda`` trains on a GPU, the CPU run stays the reference).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import (
    CYCLE_SEED,
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
    until_flat,
    verdict_entry,
    verdicts_only,
    warn_if_busy,
    write_json_doc,
)
from _orthogonality import (
    DIAG,
    METRICS,
    ORTHO,
    VAR,
    byte_features,
    curve_flat,
    cycles_curve,
    grid,
    make_rows,
    model_features,
    probe_accuracy,
    probe_tasks,
    record_curve,
    save_plots,
    unzip,
    verdicts,
)
from _routing_science import FLAT_RULE, MODEL, SWITCH_COEF, flat

BENCHMARK = "routing_science_orthogonality"
FULL = dict(
    model=MODEL,
    experts=8,
    top_k=2,
    batch_size=16,
    eval_batches=8,
    seeds=5,  # the house minimum for a paired test (the issue asks 3)
    ortho=ORTHO,
    var=VAR,
    pretrain_steps=12000,
    pretrain_cycles=10,
    pretrain_lr=3e-3,
    pretrain_eval=400,
    ft_steps=1000,
    ft_cycles=4,
    ft_lr=1e-3,
    ft_eval=50,
    probe_per_class=400,
)
QUICK = dict(
    FULL,
    model=dict(d_model=8, n_layers=2, n_heads=2, seq_len=32, d_hidden=8, dense_first_layer=True),
    experts=4,
    batch_size=8,
    eval_batches=2,
    seeds=2,
    ortho=(0.0, 1e-2),
    var=(0.0, 1.0),
    pretrain_steps=30,
    pretrain_cycles=2,
    pretrain_eval=10,
    ft_steps=20,
    ft_cycles=2,
    ft_eval=5,
    probe_per_class=20,
)
CONFIGS = Path("benchmarks/routing_science/configs")  # where the shipped ones live
FILES = "_files"  # <json stem>_files/: pretrained.pt, lee_news.txt


class Stop(Exception):
    """This piece may start no more units (``--max-hours``, ``--max-units``)."""


def files_dir(json_path: Path | None) -> Path | None:
    return None if json_path is None else json_path.with_name(json_path.stem + FILES)


# ------------------------------------------------------------------ configurations


def train_keys(p: dict, stage: str, ortho: float = 0.0, var: float = 0.0) -> dict:
    """``sci-moe train lm`` keys of the pretraining (``stage="pretrain"``) or of one
    fine-tuning cycle of grid point ``(ortho, var)`` (the seed is ``--seed``)."""
    keys = dict(
        p["model"],
        num_experts=p["experts"],
        top_k=p["top_k"],
        load_balance_coef=SWITCH_COEF,
        batch_size=p["batch_size"],
        weight_decay=0.1,
        eval_batches=p["eval_batches"],
    )
    if stage == "pretrain":
        keys.update(
            steps=p["pretrain_steps"],
            lr=p["pretrain_lr"],
            warmup=0.02,
            eval_every=p["pretrain_eval"],
        )
    else:
        keys.update(steps=p["ft_steps"], lr=p["ft_lr"], warmup=0.05, eval_every=p["ft_eval"])
        if ortho:
            keys["orthogonality_coef"] = ortho
        if var:
            keys["variance_coef"] = var
    return keys


def lm_config(keys: dict, seed: int, env: dict):
    """The :class:`~sci_moe.language.LMConfig` of ``keys`` with the run's ``env``
    (``threads``, ``device``: they do not go into the configuration files)."""
    from sci_moe.language import LMConfig

    return LMConfig(**keys, seed=seed, progress=False, **env)


def write_configs(p: dict, folder: Path, files: Path) -> list[Path]:
    """One TOML per training row: the pretraining cycle and each grid point's fine-tune
    cycle, reading the pretrained weights and news text from ``files`` (a path relative
    to where ``sci-moe`` runs, the repository root for ``configs/``)."""
    folder.mkdir(parents=True, exist_ok=True)
    cycle = "cycle c > 1 adds --init-from <cycle c-1's DIR>/model.pt"
    rows = {
        "pretrain": (
            train_keys(p, "pretrain"),
            f"pretraining cycle c: --seed 100(c-1) ({cycle})",
        )
    }
    for name, o, v in grid(p):
        keys = dict(
            train_keys(p, "ft", o, v),
            init_from=str(files / "pretrained.pt"),
            text_file=str(files / "lee_news.txt"),
        )
        rows[name] = (keys, f"fine-tune seed s, cycle c: --seed s+100(c-1) ({cycle})")
    paths = []
    for name, (keys, note) in rows.items():
        path = folder / f"orthogonality_{name}.toml"
        lines = [
            f"# {name}: sci-moe train lm --config {CONFIGS / path.name} --seed S --out DIR",
            f"# from the repository root; {note}",
        ]
        for k, val in keys.items():
            text = str(val).lower() if isinstance(val, bool) else repr(val)
            lines.append(f"{k} = {text}".replace("'", '"'))
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


# ------------------------------------------------------------------------ training


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def news_text() -> str:
    """The Lee news stream exactly as :func:`~sci_moe.language.load_corpus` joins it."""
    from sci_moe.language.data import lee_documents

    return "\n\n".join(lee_documents()) + "\n\n"


def one_cycle(keys, seed, env, corpus, init_from, save_to: Path | None):
    """One training of ``keys`` (an LMConfig's worth); returns its record and model."""
    from sci_moe.language import run_training, save_model

    cfg = lm_config(keys, seed, env)
    t0 = time.perf_counter()
    run = run_training(cfg.model_config(), cfg, None, init_from=init_from, corpus=corpus)
    h = run.history
    if save_to is not None:
        save_model(save_to, cfg.model_config(), run.model.state_dict(), run.result.step)
    rec = {
        "seed": seed,
        "step": h["step"],
        "val_loss": h["val_loss"],
        "seconds": time.perf_counter() - t0,
        "step_ms": 1e3 * statistics.median(h["step_time"]),
    }
    return rec, h, run.model


def pretrain_cycle(p, state, env, files: Path) -> dict:
    """The next pretraining cycle, from the previous one's weights (``files``)."""
    from sci_moe.language import load_corpus

    cycles = state["pretrain"]
    c = len(cycles)
    init = None
    if c:
        init = check_pretrained(files, cycles)
    rec, _, _ = one_cycle(
        train_keys(p, "pretrain"), CYCLE_SEED * c, env, load_corpus(), init, files / "pretrained.pt"
    )
    rec["sha256"] = sha256(files / "pretrained.pt")
    return rec


def check_pretrained(files: Path, cycles: list[dict]) -> Path:
    path = files / "pretrained.pt"
    if not path.is_file() or sha256(path) != cycles[-1]["sha256"]:
        raise SystemExit(
            f"{path} is missing or is not the weights of pretraining cycle {len(cycles)} "
            "(SHA-256 in the JSON): restore it (commit it with the partial JSON) or start "
            "afresh without --resume"
        )
    return path


def mean_over_layers(diag: list[dict], key: str) -> float:
    return statistics.fmean(layer[key] for layer in diag)


def finetune_unit(p, state, env, files: Path, name, ortho, var, seed, tasks) -> dict:
    """Fine-tune the pretrained model at one grid point and seed until flat; measure it."""
    from sci_moe.language import text_corpus

    corpus = text_corpus(news_text(), name="lee_news")
    last = {"init": check_pretrained(files, state["pretrain"])}  # the latest cycle's
    cycles, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:

        def cycle(c: int, cycle_seed: int) -> list[list[float]]:
            save = Path(tmp) / f"cycle{c}.pt"
            keys = train_keys(p, "ft", ortho, var)
            rec, h, last["model"] = one_cycle(keys, cycle_seed, env, corpus, last["init"], save)
            cycles.append(rec)
            if c == 0:  # the pretrained model on the news validation windows
                initial = {"val_loss": h["val_loss"][0]}
                initial.update({k: mean_over_layers(h["diagnostics"][0], k) for k in DIAG})
                last["initial"] = initial
            last["init"], last["diag"] = save, h["diagnostics"][-1]
            return record_curve(rec)

        curve, _, converged = until_flat(cycle, curve_flat, p["ft_cycles"], seed)
    steps, loss = unzip(curve)
    diag, model = last["diag"], last["model"]
    out = {
        "cycles": cycles,
        "initial": last["initial"],
        "val_loss": loss[-1],
        **{k: mean_over_layers(diag, k) for k in DIAG},
        "probe": {
            t: probe_accuracy(model_features(model, x), y, g) for t, (x, y, g) in tasks.items()
        },
        "steps": steps[-1],
        "converged": converged,
        "seconds": time.perf_counter() - t0,
    }
    print(
        f"  {name} seed {seed}: news val loss {out['val_loss']:.4f}, overlap "
        f"{out['overlap']:.4f}, variance {out['score_variance']:.4g}, MaxVio "
        f"{out['max_violation']:.3f}, probe {out['probe']}, {len(cycles)} cycle(s), "
        f"flat {out['converged']} ({out['seconds']:.0f} s)",
        flush=True,
    )
    return out


# ------------------------------------------------------------------------- probes


def reference_unit(state, files: Path, tasks: dict) -> dict:
    """Probe accuracy of the pretrained model and of byte histograms."""
    import torch

    from sci_moe.language import MoELMConfig, MoETransformerLM, load_checkpoint

    ck = load_checkpoint(check_pretrained(files, state["pretrain"]))
    model = MoETransformerLM(MoELMConfig(**ck["model_config"]))
    model.load_state_dict(ck["model"])
    torch.manual_seed(0)
    return {
        "pretrained": {
            t: probe_accuracy(model_features(model, x), y, g) for t, (x, y, g) in tasks.items()
        },
        "bytes": {t: probe_accuracy(byte_features(x), y, g) for t, (x, y, g) in tasks.items()},
    }


# --------------------------------------------------------------------- run, rows


def run_units(p, seeds, runs, env, files: Path, deadline: float, budget: list, save) -> None:
    """Every unit not yet in ``runs``, in order, while the piece has time (``budget``:
    units this piece may still start, ``[None]`` for no limit)."""

    def may_start(what: str) -> None:
        if time.perf_counter() > deadline or budget[0] == 0:
            raise Stop(what)
        if budget[0] is not None:
            budget[0] -= 1

    runs.setdefault("pretrain", [])
    files.mkdir(parents=True, exist_ok=True)
    (files / "lee_news.txt").write_text(news_text(), encoding="utf-8")
    while not runs.get("pretrain_done"):
        may_start(f"pretraining cycle {len(runs['pretrain']) + 1}")
        runs["pretrain"].append(pretrain_cycle(p, runs, env, files))
        steps, loss = cycles_curve(runs["pretrain"])
        done = flat(steps, loss) or len(runs["pretrain"]) >= p["pretrain_cycles"]
        runs["pretrain_done"] = done
        print(
            f"  pretraining cycle {len(runs['pretrain'])}: val loss {loss[-1]:.4f} after "
            f"{steps[-1]} steps, flat {flat(steps, loss)} "
            f"({runs['pretrain'][-1]['seconds']:.0f} s)",
            flush=True,
        )
        save()
    tasks = None
    if "reference" not in runs:
        may_start("the reference probes")
        tasks = probe_tasks(p["probe_per_class"])
        runs["reference"] = reference_unit(runs, files, tasks)
        save()
    ft = runs.setdefault("finetune", {})
    for s in seeds:
        for name, o, v in grid(p):
            key = f"{name}/s{s}"
            if key in ft:
                continue
            may_start(f"fine-tune {key}")
            tasks = tasks or probe_tasks(p["probe_per_class"])
            ft[key] = finetune_unit(p, runs, env, files, name, o, v, s, tasks)
            save()


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    piece_arguments(parser, unit="training unit")
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument(
        "--max-units",
        type=int,
        default=None,
        metavar="N",
        help="start at most N units in this piece (a deterministic --max-hours, for tests)",
    )
    parser.add_argument(
        "--write-configs",
        type=Path,
        default=None,
        metavar="DIR",
        help="write one sci-moe train lm configuration per training row into DIR (and the "
        "news text they read beside the JSON's weights) and stop",
    )
    parser.add_argument(
        "--device",
        default=None,
        help="torch device of the trainings (default: the CPU, the reference; e.g. cuda)",
    )
    args = parser.parse_args(argv)
    if (code := verdicts_only(args)) is not None:
        return code
    p = json.loads(json.dumps(QUICK if args.quick else FULL))
    if args.write_configs is not None:
        default = Path("benchmarks/routing_science/results") / f"{BENCHMARK}.json"
        files = files_dir(args.json or default)
        for path in write_configs(p, args.write_configs, files):
            print(f"wrote {path}")
        files.mkdir(parents=True, exist_ok=True)
        (files / "lee_news.txt").write_text(news_text(), encoding="utf-8")
        print(f"wrote {files / 'lee_news.txt'} (the fine-tuning text the configurations read)")
        return 0
    if args.threads is None:
        args.threads = 1  # one thread: on a shared 2-core machine 2 threads ran 7x slower
    setup(args)
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    runs: dict = {}
    pieces: list = []
    if (old := previous_run(args)) is not None:
        now = {"plan": p, "seeds": seeds, "device": args.device or "cpu"}
        try:
            check_resume_settings({k: old["machine"].get(k) for k in now}, now, args.json)
        except ValueError as err:
            refuse(str(err))
        runs, pieces = old["runs"], old["machine"].get("pieces", [])
    tmp = None
    files = files_dir(args.json)
    if files is None:
        tmp = tempfile.TemporaryDirectory()
        files = Path(tmp.name)
    warn_if_busy()
    other = OtherLoad()
    deadline = piece_deadline(args)
    budget = [args.max_units]
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=seeds,
        plan=p,
        device=args.device or "cpu",
        flat_rule=FLAT_RULE,
        downstream="linear probes (logistic regression, 5-fold CV) on frozen features (byte-"
        "mean residual streams and expert usage): 20-Newsgroups sentences (alt.atheism vs "
        "sci.space, folds grouped by post) and Pang-Lee movie-review polarity",
        command=" ".join(["python", *sys.argv]) if argv is None else "main(" + repr(argv) + ")",
    )

    def save() -> dict:
        machine["pieces"] = [*pieces, other.report()]
        rows = make_rows(p, seeds, runs)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [vars(r) for r in rows]}
        doc["runs"] = runs
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)]
        ft = runs.get("finetune", {})
        doc["complete"] = bool(runs.get("pretrain_done")) and all(
            f"{n}/s{s}" in ft for n, _, _ in grid(p) for s in seeds
        )
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    try:
        env = {"threads": args.threads, "device": args.device}
        run_units(p, seeds, runs, env, files, deadline, budget, save)
    except Stop as stop:
        print(f"stopped before {stop}: continue with --resume", flush=True)
    doc = save()
    if tmp is not None:
        tmp.cleanup()
    table = []
    for name, _, _ in grid(p):
        if (name, "val_loss") in {(r["case"], r["metric"]) for r in doc["rows"]}:
            table.append(
                [name] + [row_value(doc, name, m) for m in (*METRICS, "steps", "converged")]
            )
    if table:
        print_table(
            ["grid point", *METRICS, "steps", "flat"], table, "fine-tuned on news, seed means"
        )
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5} p={v['p_value']}  {v['claim']}")
    if args.plots is not None and runs.get("pretrain"):
        for path in save_plots(p, seeds, runs, args.plots):
            print(f"saved {path}")
    print(f"complete: {doc['complete']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
