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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common.py

from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    row_value,
    seed_verdict,
    setup,
    verdict_entry,
    verdicts_only,
    warn_if_busy,
    write_json_doc,
)
from _routing_science import FLAT_RULE, MODEL, SWITCH_COEF, flat

BENCHMARK = "routing_science_orthogonality"
ORTHO = (0.0, 1e-3, 1e-2)  # orthogonality_coef (L_o, per-token mean)
VAR = (0.0, 0.1, 1.0)  # variance_coef (L_v, per-token mean)
TASKS = ("topic", "sentiment")
BASELINE = "o0_v0"
METRICS = {  # metric: (unit, higher is better)
    "val_loss": ("nats/byte", False),
    "overlap": ("cos", False),
    "score_variance": ("score^2", True),
    "max_violation": ("MaxVio", False),
    "probe_acc": ("accuracy", True),
}
UNITS = {"converged": "bool", "steps": "steps"}
DIAG = ("overlap", "score_variance", "max_violation")  # routing diagnostics of evaluate()
FULL = dict(
    model=MODEL,
    experts=8,
    top_k=2,
    batch_size=16,
    eval_batches=8,
    seeds=3,
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


def case_name(ortho: float, var: float) -> str:
    return f"o{ortho:g}_v{var:g}"


def grid(p: dict) -> list[tuple[str, float, float]]:
    return [(case_name(o, v), o, v) for o in p["ortho"] for v in p["var"]]


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


def concat(cycles: list[dict]) -> tuple[list[int], list[float]]:
    """The validation curve of consecutive cycles on one step axis (a later cycle's
    evaluation before its first step repeats the previous end and is left out)."""
    steps, loss, offset = [], [], 0
    for i, c in enumerate(cycles):
        for s, v in zip(c["step"], c["val_loss"], strict=True):
            if i and s == 0:
                continue
            steps.append(offset + s)
            loss.append(v)
        offset += c["step"][-1]
    return steps, loss


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
        train_keys(p, "pretrain"), 100 * c, env, load_corpus(), init, files / "pretrained.pt"
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
    init = check_pretrained(files, state["pretrain"])
    cycles, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for c in range(p["ft_cycles"]):
            save = Path(tmp) / f"cycle{c}.pt"
            keys = train_keys(p, "ft", ortho, var)
            rec, h, model = one_cycle(keys, seed + 100 * c, env, corpus, init, save)
            cycles.append(rec)
            if c == 0:  # the pretrained model on the news validation windows
                initial = {"val_loss": h["val_loss"][0]}
                initial.update({k: mean_over_layers(h["diagnostics"][0], k) for k in DIAG})
            init = save
            if flat(*concat(cycles)):
                break
    steps, loss = concat(cycles)
    diag = h["diagnostics"][-1]
    out = {
        "cycles": cycles,
        "initial": initial,
        "val_loss": loss[-1],
        **{k: mean_over_layers(diag, k) for k in DIAG},
        "probe": {
            t: probe_accuracy(model_features(model, x), y, g) for t, (x, y, g) in tasks.items()
        },
        "steps": steps[-1],
        "converged": flat(steps, loss),
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


def probe_tasks(per_class: int) -> dict:
    """The held-out tasks: ``{name: (texts, labels, groups or None)}`` (fixed seed 0)."""
    import numpy as np

    from sci_moe.data.fed_tasks import task_sentences
    from sci_moe.data.newsgroups import newsgroup_sentences

    texts, labels, groups = newsgroup_sentences(6, 40, max_per_class=per_class, seed=0)
    s_texts, s_labels = task_sentences("sentiment", min(per_class, 100), seed=0)
    return {
        "topic": (texts, labels.astype(int), groups),
        "sentiment": (list(s_texts), np.asarray(s_labels, dtype=int), None),
    }


def model_features(model, texts: list[str]):
    """Frozen features of each text, shape ``(len(texts), (n_layers + 1) d_model + M E)``:
    the mean over its bytes of the residual stream after every block and of the final
    normalised hidden state, and each of the ``M`` MoE layers' share of the text's
    assignments per expert (its expert usage: what specialisation would change). Texts
    longer than ``seq_len`` run as consecutive windows."""
    import numpy as np
    import torch

    from sci_moe.language import encode

    L = model.config.seq_len
    device = next(model.parameters()).device
    seen: dict = {}
    hooks = [model.norm.register_forward_hook(lambda _m, _i, out: seen.__setitem__("norm", out))]
    for i, block in enumerate(model.blocks):
        hooks.append(
            block.register_forward_hook(lambda _m, _i, out, i=i: seen.__setitem__(i, out[0]))
        )
    was = model.training
    model.eval()
    feats = []
    try:
        with torch.no_grad():
            for text in texts:
                ids = encode(text).long().to(device)
                sums, loads = 0, 0
                for start in range(0, ids.numel(), L):
                    _, _, infos = model(ids[start : start + L].unsqueeze(0))
                    keys = [*range(len(model.blocks)), "norm"]
                    sums = sums + torch.cat([seen[k][0].sum(0).cpu() for k in keys])
                    loads = loads + torch.cat([inf.routing.load.float().cpu() for inf in infos])
                n_moe = len(model.moe_layers())
                usage = loads / (loads.sum() / max(1, n_moe)).clamp_min(1)
                feats.append(torch.cat([sums / ids.numel(), usage]).double().cpu().numpy())
    finally:
        for h in hooks:
            h.remove()
        model.train(was)
    return np.stack(feats)


def byte_features(texts: list[str]):
    """Normalised byte histograms (256 features): the non-learned reference."""
    import numpy as np

    out = np.zeros((len(texts), 256))
    for i, t in enumerate(texts):
        b = np.frombuffer(t.encode("utf-8"), dtype=np.uint8)
        out[i] = np.bincount(b, minlength=256) / max(1, b.size)
    return out


def probe_accuracy(X, y, groups=None, folds: int = 5) -> float:
    """Mean 5-fold accuracy of a standardised logistic regression (folds grouped by
    ``groups`` when given, stratified, fixed seed)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if groups is None:
        cv = StratifiedKFold(folds, shuffle=True, random_state=0)
    else:
        cv = StratifiedGroupKFold(folds, shuffle=True, random_state=0)
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    return float(cross_val_score(clf, X, y, groups=groups, cv=cv).mean())


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
        steps, loss = concat(runs["pretrain"])
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


def make_rows(p: dict, seeds: list[int], runs: dict) -> list[Row]:
    """Rows of the finished part: the pretraining, the reference probes, and per grid
    point the seed means (``vs`` the baseline, ratio > 1: the losses' side better), sds
    and per-seed values of the seeds whose whole grid is done."""
    rows: list[Row] = []
    if not runs.get("pretrain"):
        return rows
    steps, loss = concat(runs["pretrain"])
    rows += [
        Row("pretrain", "val_loss", loss[-1], "nats/byte"),
        Row("pretrain", "steps", float(steps[-1]), "steps"),
        Row("pretrain", "cycles", float(len(runs["pretrain"])), "cycles"),
        Row("pretrain", "converged", float(flat(steps, loss)), "bool"),
    ]
    ref = runs.get("reference")
    if ref is not None:
        for case in ("pretrained", "bytes"):
            for t in TASKS:
                rows.append(Row(case, f"probe_{t}", ref[case][t], "accuracy"))
            rows.append(Row(case, "probe_acc", statistics.fmean(ref[case].values()), "accuracy"))
        rows.append(Row("chance", "probe_acc", 0.5, "accuracy"))
    ft = runs.get("finetune", {})
    if ft:  # every fine-tune starts from the same weights: the first one's initial evaluation
        first = next(iter(ft.values()))["initial"]
        rows += [Row("pretrained", m, v, METRICS[m][0]) for m, v in first.items()]
    done = [s for s in seeds if all(f"{n}/s{s}" in ft for n, _, _ in grid(p))]
    if not done:
        return rows
    value = {
        m: (lambda r, m=m: statistics.fmean(r["probe"].values()) if m == "probe_acc" else r[m])
        for m in METRICS
    }
    for t in TASKS:
        value[f"probe_{t}"] = lambda r, t=t: r["probe"][t]
    value["converged"] = lambda r: float(r["converged"])
    value["steps"] = lambda r: float(r["steps"])
    means = {}
    for name, _, _ in grid(p):
        recs = [ft[f"{name}/s{s}"] for s in done]
        for m, get in value.items():
            vals = [get(r) for r in recs]
            means[(name, m)] = statistics.fmean(vals)
            unit, higher = METRICS.get(m, (UNITS.get(m, "accuracy"), True))
            vs = ratio = None
            if name != BASELINE and m in METRICS:
                base = means[(BASELINE, m)]
                vs = BASELINE
                ratio = (
                    (means[(name, m)] / base if higher else base / means[(name, m)])
                    if (base and means[(name, m)])
                    else None
                )
            rows.append(Row(name, m, means[(name, m)], unit, vs, ratio))
            if len(vals) > 1:
                rows.append(Row(name, f"{m}_sd", statistics.stdev(vals), unit))
            rows += [Row(name, f"{m} seed {s}", x, unit) for s, x in zip(done, vals, strict=True)]
    return rows


def best_point(doc: dict) -> str | None:
    """The non-baseline grid point with the lowest mean news validation loss."""
    cases = {
        r["case"] for r in doc["rows"] if r["metric"] == "val_loss" and r["case"].startswith("o")
    }
    cases.discard(BASELINE)
    if not cases:
        return None
    return min(sorted(cases), key=lambda c: row_value(doc, c, "val_loss"))


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the abstract, by a fixed rule (issue 44).

    The best grid point (:func:`best_point`: lowest mean news validation loss of the
    non-baseline points; chosen on the same seeds, which favours it on that metric) against
    the auxiliary-loss-only baseline ``o0_v0``: expert overlap lower, routing-score
    variance higher, MaxVio not higher ("preserves balance": a resolved rise contradicts
    it), news validation loss lower, held-out probe accuracy higher. Paired t-test over
    the seeds whose whole grid is done (:func:`_common.seed_verdict`); converged when the
    pretraining and every fine-tune of both points are flat. No verdicts before a seed's
    grid is complete.
    """
    best = best_point(doc)
    if best is None:
        return []
    has = {(r["case"], r["metric"]) for r in doc["rows"]}
    seeds = sorted(
        int(m.rsplit(" ", 1)[1]) for c, m in has if c == BASELINE and m.startswith("val_loss seed")
    )
    conv = row_value(doc, "pretrain", "converged") == 1 and all(
        row_value(doc, c, "converged") == 1 for c in (best, BASELINE)
    )
    note = f"best grid point {best} (lowest mean news validation loss of the non-baseline points)"
    claims = (
        ("L_o + L_v reduce expert overlap", "overlap"),
        ("L_o + L_v increase the routing-score variance", "score_variance"),
        ("L_o + L_v preserve load balance (global MaxVio not higher)", "max_violation"),
        ("L_o + L_v improve the fine-tuned LM (news validation loss)", "val_loss"),
        ("L_o + L_v improve held-out downstream tasks (linear-probe accuracy)", "probe_acc"),
    )
    return [
        seed_verdict(
            claim,
            doc,
            metric=metric,
            ours=best,
            baseline=BASELINE,
            higher_is_better=METRICS[metric][1],
            converged=conv,
            seeds=seeds,
            note=note,
        )
        for claim, metric in claims
    ]


# -------------------------------------------------------------------------- plots


def save_plots(p: dict, seeds: list[int], runs: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    steps, loss = concat(runs["pretrain"])
    axes[0].plot(steps, loss, color="black")
    axes[0].set_title("pretraining (all text)")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("validation loss (nats/byte)")
    cmap = plt.get_cmap("viridis")
    ft = runs.get("finetune", {})
    for i, (name, _, _) in enumerate(grid(p)):
        for j, s in enumerate(seeds):
            rec = ft.get(f"{name}/s{s}")
            if rec is None:
                continue
            st, lo = concat(rec["cycles"])
            color = "tab:red" if name == BASELINE else cmap(i / max(1, len(grid(p)) - 1))
            axes[1].plot(st, lo, color=color, alpha=0.7, lw=0.9, label=name if j == 0 else None)
    axes[1].set_title("fine-tuning on news (every seed)")
    axes[1].set_xlabel("step")
    axes[1].legend(fontsize=6, ncol=2)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    paths = [out / "routing_science_orthogonality_curves.png"]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    done = [s for s in seeds if all(f"{n}/s{s}" in ft for n, _, _ in grid(p))]
    if done:
        fig, axes = plt.subplots(1, len(METRICS), figsize=(3.2 * len(METRICS), 3.0))
        for ax, m in zip(axes, METRICS, strict=True):
            img = np.array(
                [
                    [
                        statistics.fmean(
                            statistics.fmean(ft[f"{case_name(o, v)}/s{s}"]["probe"].values())
                            if m == "probe_acc"
                            else ft[f"{case_name(o, v)}/s{s}"][m]
                            for s in done
                        )
                        for v in p["var"]
                    ]
                    for o in p["ortho"]
                ]
            )
            im = ax.imshow(img, cmap="viridis")
            ax.set_xticks(range(len(p["var"])), [f"{v:g}" for v in p["var"]])
            ax.set_yticks(range(len(p["ortho"])), [f"{o:g}" for o in p["ortho"]])
            ax.set_xlabel("variance coef")
            ax.set_title(m, fontsize=9)
            fig.colorbar(im, ax=ax, fraction=0.046)
        axes[0].set_ylabel("orthogonality coef")
        fig.tight_layout()
        paths.append(out / "routing_science_orthogonality_grid.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


# --------------------------------------------------------------------------- main


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
        same = (old["machine"].get(k) for k in ("plan", "seeds", "device"))
        if list(same) != [p, seeds, args.device or "cpu"]:
            raise SystemExit("--resume: the stored JSON has another plan, seeds or device")
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
