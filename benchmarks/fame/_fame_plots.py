"""The figures of ``run.py``: :func:`plot` draws the learning curves and the drop curves.

A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _common import (
    row_value,
)
from _fame_fit import DROPS, METRIC, TASKS

__all__ = [
    "plot",
]


def plot(doc: dict, folder: Path, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TASKS), figsize=(4.2 * len(TASKS), 3.6))
    for ax, task in zip(axes, TASKS, strict=True):
        for i, (name, per_seed) in enumerate(doc["curves"].get(task, {}).items()):
            for j, curve in enumerate(per_seed.values()):
                c = np.array(curve)
                ax.plot(c[:, 0], c[:, 1], color=f"C{i}", alpha=0.6, label=name if j == 0 else None)
        ax.set(xlabel="step", ylabel="validation relative L2", yscale="log", title=task)
        ax.legend(fontsize=7)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / ("fame_curves_quick.png" if quick else "fame_curves.png"), dpi=100)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(TASKS), figsize=(4.2 * len(TASKS), 3.6))
    for ax, task in zip(axes, TASKS, strict=True):
        metric = METRIC[task]
        names = sorted(
            {
                r["case"].split("% ", 1)[1]
                for r in doc["rows"]
                if r["case"].startswith(f"{task} drop=") and r["metric"] == metric
            }
        )
        for name in names:
            ds = [
                d
                for d in DROPS
                if any(r["case"] == f"{task} drop={d}% {name}" for r in doc["rows"])
            ]
            m = [row_value(doc, f"{task} drop={d}% {name}", metric) for d in ds]
            sd = [row_value(doc, f"{task} drop={d}% {name}", f"{metric}_sd") for d in ds]
            ax.errorbar(ds, m, yerr=sd, marker="o", capsize=3, label=name)
        ax.set(
            xlabel="% of test observation times dropped", ylabel=metric, yscale="log", title=task
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / ("fame_drop_quick.png" if quick else "fame_drop.png"), dpi=100)
    plt.close(fig)
