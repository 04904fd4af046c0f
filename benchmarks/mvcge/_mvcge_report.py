"""The rows, table and figure of ``run.py``.

:func:`make_rows` summarises the finished seeds (mean, sd and per-seed rows of every
setting and method), :func:`summary_table` prints them, :func:`curves_of` collects the
validation curves and :func:`plot_curves` draws them. A helper module: ``run.py`` imports
it.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
from _common import (
    Row,
    print_table,
    row_value,
)
from _mvcge_train import DERIVED, SETTINGS, methods_of

__all__ = [
    "curves_of",
    "make_rows",
    "plot_curves",
    "summary_table",
]


def _stats(vals):
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def make_rows(runs: dict, seeds: list[int]) -> list[Row]:
    """Mean, sd and per-seed rows of every setting and method (seeds present in ``runs``)."""
    rows: list[Row] = []
    for setting in SETTINGS:
        done = [s for s in seeds if str(s) in runs.get(setting, {})]
        if not done:
            continue
        per = [runs[setting][str(s)] for s in done]
        for k in ("all", "view 0", "view 1", "view 2", "features"):
            mu, sd = _stats([p["bayes"][k] for p in per])
            rows.append(Row(f"{setting} Bayes oracle ({k})", "accuracy", mu, "1"))
        for m in (*methods_of(setting), *DERIVED):
            case = f"{setting} {m}"
            recs = [p["methods"][m] for p in per]
            for metric in ("test_accuracy", "test_macro_f1"):
                mu, sd = _stats([r[metric] for r in recs])
                rows.append(Row(case, metric, mu, "1"))
                rows.append(Row(case, f"{metric}_std", sd, "1"))
            for s, r in zip(done, recs, strict=True):
                rows.append(Row(case, f"test_accuracy seed {s}", r["test_accuracy"], "1"))
            rows.append(Row(case, "epochs", statistics.fmean(r["epochs"] for r in recs), "1"))
            rows.append(
                Row(case, "converged_fraction", statistics.fmean(r["converged"] for r in recs), "1")
            )
            if m.startswith("MvCGE"):
                for metric in ("usage_entropy", "view_usage_js", "view_mmd2", "top1_agreement"):
                    unit = "nats" if metric in ("usage_entropy", "view_usage_js") else "1"
                    mu, sd = _stats([r[metric] for r in recs])
                    rows.append(Row(case, metric, mu, unit))
                    rows.append(Row(case, f"{metric}_std", sd, unit))
                    for s, r in zip(done, recs, strict=True):
                        rows.append(Row(case, f"{metric} seed {s}", r[metric], unit))
        seconds = sum(r.get("seconds", 0.0) for p in per for r in p["methods"].values())
        rows.append(Row(f"{setting} all methods", "train_seconds", seconds, "s"))
    return rows


def curves_of(runs: dict) -> dict:
    """Per setting and trained method: the seeds' validation curves (step, loss, accuracy)."""
    out = {}
    for setting, per_seed in runs.items():
        out[setting] = {
            m: {s: rec["methods"][m].get("curve") for s, rec in per_seed.items()}
            for m in methods_of(setting)
        }
    return out


def plot_curves(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = ("MLP", "GCN view 0", "early fusion", "late fusion", "attention fusion (HAN)",
             "MvCGE", "MvCGE -L_le", "MvCGE -L_gd")  # fmt: skip
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for col, setting in enumerate(SETTINGS):
        curves = doc.get("curves", {}).get(setting)
        if not curves:
            continue
        for m in shown:
            if m not in curves:
                continue
            per = [np.asarray(c) for c in curves[m].values() if c]
            if not per:
                continue
            n = max(len(c) for c in per)
            steps = next(c[:, 0] for c in per if len(c) == n)
            for row, j in enumerate((1, 2)):
                vals = np.full((len(per), n), np.nan)
                for i, c in enumerate(per):
                    vals[i, : len(c)] = c[:, j]
                    vals[i, len(c) :] = np.nan
                mean = np.nanmean(vals, 0)
                axes[row, col].plot(steps, mean, label=m)
        axes[0, col].set_title(f"{setting} views (mean over seeds still training)")
        axes[0, col].set_ylabel("validation cross-entropy")
        axes[1, col].set_ylabel("validation accuracy")
        axes[1, col].set_xlabel("epoch")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_table(doc: dict) -> None:
    for setting in SETTINGS:
        table = []
        for m in (*methods_of(setting), *DERIVED):
            case = f"{setting} {m}"
            try:
                acc = row_value(doc, case, "test_accuracy")
            except ValueError:
                continue
            table.append(
                [m, acc, row_value(doc, case, "test_accuracy_std"),
                 row_value(doc, case, "epochs"), row_value(doc, case, "converged_fraction")]
            )  # fmt: skip
        if table:
            print_table(["method", "acc", "sd", "epochs", "converged"], table, title=setting)
