"""The plots of ``run.py``: parity, test MAE per target and model, learning curves (PNG).

:func:`plot` draws them from a run's results, :func:`replot` from a finished JSON
(``run.py --replot JSON --plots DIR``). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from _spice import load_set
from _spice_verdicts import ENSEMBLE, SINGLE, SPICE

__all__ = [
    "plot",
    "replot",
]


def replot(args) -> None:
    """Redraw the plots of a finished run from its JSON (``--replot JSON --plots DIR``)."""
    doc = json.loads(args.replot.read_text())
    det = doc["details"]
    ms = load_set(args.data)
    if ms.content_sha256() != doc["machine"]["data_sha256"]:
        raise SystemExit(f"{args.data} is not the data set of {args.replot} (content hash)")
    runs = det["runs"]
    for m, pred in det["parity_seed0"].items():
        runs[m][0]["test_pred"] = pred
    plot(
        args.plots or Path("."),
        args.replot.stem,
        det["targets"],
        det["units"],
        runs,
        det["references"],
        list(runs),
        ms,
        det["tests"],
    )


def _panels(plt, n: int, size: float, ncols: int = 6):
    """A grid of ``n`` axes, at most ``ncols`` wide (unused axes hidden)."""
    cols = min(n, ncols)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def plot(folder: Path, prefix, targets, units, runs, refs, models, ms, tests) -> None:
    """Parity (seed 0), test MAE per target and model, learning curves (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    T = len(targets)
    # parity: SPiCE and the best baseline of each target, seed 0
    fig, axes = _panels(plt, T, 3.0)
    for k, ax in enumerate(axes):
        shown = ["spice"] if "spice" in models else []
        b = tests.get(targets[k], {}).get("spice vs best baseline", {}).get("b")
        shown += [b] if b else []
        for m in shown:
            r = runs[m][0]
            y = ms.targets[r["test_index"], k]
            ax.scatter(y, np.asarray(r["test_pred"])[:, k], s=10, label=m, alpha=0.7)
        y = ms.targets[:, k]
        ax.plot([y.min(), y.max()], [y.min(), y.max()], "k--", lw=0.8)
        ax.set_xlabel(f"label ({units[k]})", fontsize=8)
        ax.set_ylabel("prediction", fontsize=8)
        ax.set_title(targets[k], fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle("test-set parity, seed 0")
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_parity.png", dpi=90 if T > 6 else 110)
    plt.close(fig)

    names = list(models) + list(refs)
    vals = {
        m: np.asarray([r["test_mae"] for r in runs[m]], dtype=float).reshape(-1, T) for m in models
    }
    vals.update({m: np.asarray(refs[m], dtype=float).reshape(-1, T) for m in refs})
    if T > 6:
        # many targets: test MAE / std of the target (mean over seeds) as a table-like heatmap
        scale = np.nanstd(ms.targets, axis=0, ddof=1)
        mat = np.stack([vals[m].mean(0) / scale for m in names])
        fig, ax = plt.subplots(figsize=(0.55 * T + 3, 0.42 * len(names) + 2))
        im = ax.imshow(mat, cmap="viridis_r", aspect="auto", vmin=0, vmax=1.5)
        best = np.argmin(mat[: len(models)], axis=0)
        for (i, k), v in np.ndenumerate(mat):
            weight = "bold" if i < len(models) and best[k] == i else "normal"
            ax.text(
                k,
                i,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=6,
                weight=weight,
                color="w" if v > 0.9 else "k",
            )
        ax.set_xticks(range(T))
        ax.set_xticklabels(targets, rotation=70, ha="right", fontsize=7)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        ax.axhline(len(models) - 0.5, color="w", lw=2)
        fig.colorbar(im, ax=ax, fraction=0.02, label="test MAE / target std")
        ax.set_title("test MAE / target std, mean over seeds (bold: best model per target)")
    else:
        colors = {
            **{m: "C1" for m in SPICE},
            **{m: "C0" for m in ENSEMBLE},
            **{m: "C2" for m in SINGLE},
            "gnn2d": "C4",
        }
        fig, axes = _panels(plt, T, 3.6)
        for k, ax in enumerate(axes):
            v = [vals[m][:, k] for m in names]
            ax.bar(
                range(len(names)),
                [x.mean() for x in v],
                yerr=[x.std(ddof=1) if len(x) > 1 else 0 for x in v],
                capsize=2,
                color=[colors.get(m, "0.6") for m in names],
            )
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
            ax.set_title(f"{targets[k]} test MAE ({units[k]})")
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_mae.png", dpi=110)
    plt.close(fig)

    # learning curves (chosen configs, mean over seeds): training loss and validation score
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, m in enumerate(models):
        loss = np.mean([r["history"]["train_loss"] for r in runs[m]], axis=0)
        val = np.mean([r["history"]["val_score"] for r in runs[m]], axis=0)
        ep = np.arange(1, len(loss) + 1)
        style = "-" if m in SPICE else "--"
        axes[0].plot(ep, loss, style, color=f"C{i % 10}", label=m)
        axes[1].plot(ep, val, style, color=f"C{i % 10}", label=m)
    axes[0].set_yscale("log")
    axes[0].set_title("training loss (z-scored MSE), mean over seeds")
    axes[1].set_title("validation MAE / target std (mean over targets and seeds)")
    for ax in axes:
        ax.set_xlabel("epoch")
    axes[1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_curves.png", dpi=110)
    plt.close(fig)
