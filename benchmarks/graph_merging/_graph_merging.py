"""The graph-merging benchmark's rows, verdicts and plots (shared by ``run.py``).

``run.py`` trains and evaluates; what is tabulated, decided and drawn from its results
document lives here, one concept per file.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from _common import Row, row_value, seed_verdict

from sci_moe.graphs import FAMILIES

LEARNED = (
    "rank1",
    "rank2",
    "rank3",
    "family_expert",
    "ensemble",
    "merge",
    "merge_tuned",
    "kdem",
    "ppem",
)
HEURISTIC_NAMES = ("common_neighbours", "adamic_adar")
STRATS = (*LEARNED, "no_expert", *HEURISTIC_NAMES)
TUNED = ("merge_tuned", "kdem", "ppem")
RUNS = ("pretrain", *TUNED)
SPLITS = ("train", "unseen")
METRICS = ("auc", "recall", "ndcg", "auc_vs_bayes")
#: The specialisation check: the fraction of (family, seed) pairs in which the family's own
#: expert beats every other expert on the family's unseen graphs should reach this.
SPECIALISATION_TARGET = 0.8


def _metric_name(m: str) -> str:
    return {"recall": "recall@20", "ndcg": "ndcg@20"}.get(m, m)


def _stats(vals):
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def make_rows(
    runs: dict, seeds: list[int], curves: dict | None = None, families=FAMILIES
) -> list[Row]:
    """Means, sds and per-seed rows of every split, strategy and metric (``curves``: the
    learning curves, for where each run's best validation AUC was; ``families``: the
    run's families, in expert order)."""
    done = [s for s in seeds if str(s) in runs]
    rows: list[Row] = []
    if not done:
        return rows
    recs = [runs[str(s)] for s in done]
    for sp in SPLITS:
        for s in STRATS:
            for m in METRICS:
                vals = [r["metrics"][sp][s][m] for r in recs]
                if any(v is None for v in vals):
                    continue
                mean, sd = _stats(vals)
                base = _stats([r["metrics"][sp]["rank1"][m] for r in recs])[0]
                vs, ratio = (None, None) if s == "rank1" else (f"{sp} rank1", mean / base)
                rows.append(Row(f"{sp} {s}", _metric_name(m), mean, "1", vs, ratio))
                rows.append(Row(f"{sp} {s}", f"{_metric_name(m)} sd", sd, "1"))
                if m in ("auc", "recall"):
                    for seed, v in zip(done, vals, strict=True):
                        rows.append(Row(f"{sp} {s}", f"{_metric_name(m)} seed {seed}", v, "1"))
        bayes = [r["metrics"][sp]["rank1"]["bayes_auc"] for r in recs]
        rows.append(Row(f"{sp} bayes-optimal", "auc_known_models", _stats(bayes)[0], "1"))
    for sp in ("train", "val", "unseen"):
        acc = [r["router_family_accuracy"][sp] for r in recs]
        rows.append(Row(f"{sp} router", "rank1_is_family_expert", _stats(acc)[0], "1"))
    wins_all = []
    for f, fam in enumerate(families):
        mats = [r["specialisation_auc"][f] for r in recs]
        own = [m[f] for m in mats]
        other = [max(x for e, x in enumerate(m) if e != f) for m in mats]
        rows.append(Row(f"unseen {fam}", "auc family expert", statistics.fmean(own), "1"))
        rows.append(Row(f"unseen {fam}", "auc best other expert", statistics.fmean(other), "1"))
        for e in range(len(mats[0])):
            v = statistics.fmean(m[e] for m in mats)
            rows.append(Row(f"unseen {fam}", f"auc expert {families[e]}", v, "1"))
        diff = [a - b for a, b in zip(own, other, strict=True)]
        rows.append(
            Row(f"unseen {fam}", "family expert minus best other", statistics.fmean(diff), "1")
        )
        rows.append(
            Row(f"unseen {fam}", "family expert wins", statistics.fmean(d > 0 for d in diff), "1")
        )
        wins_all += [float(d > 0) for d in diff]
    # the specialisation check: (family, seed) pairs where the own expert beats all others
    rows.append(
        Row("specialisation", "family expert wins fraction", statistics.fmean(wins_all), "1")
    )
    rows.append(Row("specialisation", "target", SPECIALISATION_TARGET, "1"))
    rows.append(
        Row(
            "specialisation",
            "target met",
            float(statistics.fmean(wins_all) >= SPECIALISATION_TARGET),
            "1",
        )
    )
    for run in RUNS:
        conv = [float(r["converged"][run]) for r in recs]
        rows.append(Row(run, "converged_fraction", statistics.fmean(conv), "1"))
        st = [r["steps"][run] for r in recs]
        rows.append(Row(run, "steps_mean", statistics.fmean(st), "steps"))
        rows.append(Row(run, "steps_max", max(st), "steps"))
    for run in RUNS:
        got = [(curves or {}).get(run, {}).get(str(s)) for s in done]
        if not all(got):
            continue
        best = [max(c, key=lambda e: e[1]) for c in got]  # first of the best: max keeps it
        rows.append(Row(run, "best_step_mean", statistics.fmean(b[0] for b in best), "steps"))
        first = [float(b[0] == c[0][0]) for b, c in zip(best, got, strict=True)]
        rows.append(Row(run, "best_at_first_eval_fraction", statistics.fmean(first), "1"))
        gain = [b[1] - c[0][1] for b, c in zip(best, got, strict=True)]
        rows.append(Row(run, "best_minus_first_val_auc", statistics.fmean(gain), "1"))
    f1 = statistics.fmean(r["flops"]["rank1"] for r in recs)
    for s in recs[0]["flops"]:
        f = statistics.fmean(r["flops"][s] for r in recs)
        vs, ratio = (None, None) if s == "rank1" else ("unseen rank1", f1 / f)
        rows.append(Row(f"unseen {s}", "inference_flops", f, "FLOP/graph", vs, ratio))
    rows.append(Row("seed", "seconds_mean", statistics.fmean(r["seconds"] for r in recs), "s"))
    return rows


#: The claims (abstract, plus the non-learned baseline check): (claim, ours, baseline,
#: the runs whose flatness the claim needs).


CLAIMS = (
    ("router rank 2 holds an expert that beats the top-1 expert", "rank2", "rank1", ("pretrain",)),
    ("router rank 3 holds an expert that beats the top-1 expert", "rank3", "rank1", ("pretrain",)),
    (
        "the output ensemble of the top-2 experts beats the top-1 expert",
        "ensemble",
        "rank1",
        ("pretrain",),
    ),
    (
        "plain merging falls short of the output ensemble (ensemble better than merge)",
        "ensemble",
        "merge",
        ("pretrain",),
    ),
    (
        "KDEM (KD-enhanced merging) improves the merge over the merge fine-tuned as long "
        "without KD",
        "kdem",
        "merge_tuned",
        ("pretrain", "merge_tuned", "kdem"),
    ),
    (
        "PPEM (parameter-proximity merging) improves the merge over the merge fine-tuned as "
        "long without proximity",
        "ppem",
        "merge_tuned",
        ("pretrain", "merge_tuned", "ppem"),
    ),
    (
        "KDEM improves on plain merging",
        "kdem",
        "merge",
        ("pretrain", "kdem"),
    ),
    (
        "PPEM improves on plain merging",
        "ppem",
        "merge",
        ("pretrain", "ppem"),
    ),
    (
        "the learned model (top-1 expert) beats its parameter-free input (no expert)",
        "rank1",
        "no_expert",
        ("pretrain",),
    ),
    (
        "the learned model (top-1 expert) beats the non-learned Adamic-Adar heuristic",
        "rank1",
        "adamic_adar",
        ("pretrain",),
    ),
)


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of :data:`CLAIMS`, by a fixed rule on the run's rows.

    The rule: :func:`_common.seed_verdict` -- a paired t-test (alpha 0.05) over the seeds
    of the per-seed unseen (zero-shot) AUC of ``ours`` against the baseline; "reproduced"
    when significant in the claimed direction, "contradicted" when significant against it,
    else "not decided". ``converged``: every run the claim needs (the pre-training and the
    fine-tunings compared) was flat on every seed. Seeds: those present in the rows.
    """
    seeds = [s for s in doc["machine"]["seeds"] if _has_seed(doc, s)]
    families = doc["machine"].get("families", FAMILIES)
    note = ""
    try:
        first = row_value(doc, "pretrain", "best_at_first_eval_fraction")
        wins = statistics.fmean(
            row_value(doc, f"unseen {f}", "family expert wins") for f in families
        )
        judged = (
            "little specialisation"
            if wins < SPECIALISATION_TARGET
            else f"specialised: target {SPECIALISATION_TARGET:.0%} met"
        )
        note = (
            f"pre-training's best validation AUC was at its first evaluation on {first:.0%} "
            f"of the seeds; a family's own expert beat the other experts on its unseen graphs "
            f"in {wins:.0%} of (family, seed) pairs ({judged})"
        )
    except ValueError:  # a partial or older JSON without these rows
        pass
    out = []
    for claim, ours, base, runs in CLAIMS:
        conv = all(row_value(doc, r, "converged_fraction") == 1.0 for r in runs)
        out.append(
            seed_verdict(
                claim,
                doc,
                metric="auc",
                ours=f"unseen {ours}",
                baseline=f"unseen {base}",
                higher_is_better=True,
                converged=conv,
                seeds=seeds or None,
                note=note,
            )
        )
    return out


def _has_seed(doc: dict, seed) -> bool:
    return any(r["metric"] == f"auc seed {seed}" for r in doc["rows"])


def plot_curves(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(RUNS), figsize=(3.2 * len(RUNS), 3.0), sharey=True)
    for ax, run in zip(axes, RUNS, strict=True):
        for seed, curve in sorted(doc["curves"].get(run, {}).items()):
            if curve:
                x, y = zip(*curve, strict=True)
                ax.plot(x, y, lw=0.9, alpha=0.8, label=f"seed {seed}")
        ax.set_title(run if run != "pretrain" else "pre-training (family experts)")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation AUC")
    fig.suptitle("validation AUC during training (runs stop when flat)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_auc(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, sp in zip(axes, SPLITS, strict=True):
        means = [row_value(doc, f"{sp} {s}", "auc") for s in STRATS]
        sds = [row_value(doc, f"{sp} {s}", "auc sd") for s in STRATS]
        colors = ["C0"] * 4 + ["C1"] * 5 + ["C2"] * 3
        ax.bar(STRATS, means, yerr=sds, color=colors, capsize=2)
        bayes = row_value(doc, f"{sp} bayes-optimal", "auc_known_models")
        ax.axhline(bayes, color="k", ls="--", lw=0.8, label="Bayes-optimal (known models)")
        ax.set_title(f"{sp}: held-out edge AUC (mean, sd over seeds)")
        ax.set_ylim(0.5, 1.0)
        ax.tick_params(axis="x", rotation=60)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
