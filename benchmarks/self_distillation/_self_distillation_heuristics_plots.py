"""The figures of ``--heuristics``: :func:`plot_bias` (part a) and :func:`plot_stopping` (part b).

A helper module: ``_self_distillation_heuristics.py`` imports it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from _self_distillation_bias import bias_case

__all__ = [
    "plot_bias",
    "plot_stopping",
]


# -------------------------------------------------------------------------- plots


def plot_bias(details: dict, rows: list[dict], cfg: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    val = {(r["case"], r["metric"]): r["value"] for r in rows}
    losses, alphas, rhos = cfg["losses"], cfg["alphas"], cfg["rhos"]
    fig, axes = plt.subplots(
        len(losses), len(alphas), figsize=(4.2 * len(alphas), 3.4 * len(losses)), squeeze=False
    )
    style = {
        ("0-SD", "learned"): ("C0", "--", "o"),
        ("1-SD hard", "learned"): ("C0", "-", "s"),
        ("0-SD", "fixed"): ("C1", "--", "o"),
        ("1-SD hard", "fixed"): ("C1", "-", "s"),
    }
    for i, loss in enumerate(losses):
        for j, alpha in enumerate(alphas):
            ax = axes[i, j]
            for (label, kind), (color, ls, mk) in style.items():
                cases = [f"{bias_case(loss, alpha, r)} {label} {kind}" for r in rhos]
                th = [val[(c, "error")] for c in cases]
                sm = [val[(c, "sim_error")] for c in cases]
                se = [val[(c, "sim_sem")] for c in cases]
                ax.plot(rhos, th, ls, color=color, label=f"{kind} bias {label} (theory)")
                ax.errorbar(rhos, sm, se, fmt=mk, color=color, ms=4, capsize=2)
            ax.plot(rhos, [min(r, 1 - r) for r in rhos], ":k", label="majority class")
            ax.set_xscale("log")
            ax.set_xticks(rhos, [f"{r:g}" for r in rhos])
            ax.minorticks_off()
            ax.set_title(f"{loss.upper()}, alpha = {alpha:g}")
            ax.set_xlabel("class ratio rho")
            ax.set_ylabel("test error")
    axes[0, 0].legend(fontsize=6)
    fig.suptitle("bias fixing: replica theory (lines), finite-N simulation (markers)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_stopping(details: dict, cfg: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12.5, 3.6))
    stages = np.arange(cfg["n_stages"] + 1)
    for k, theta in enumerate(cfg["thetas"]):
        runs = details[f"stop theta={theta:g}"]
        color = f"C{k}"
        for ax, proto in zip(axes[:2], ("retuned", "fixed ridge"), strict=True):
            test = np.array([r[proto]["test_acc"] for r in runs])
            sem = test.std(axis=0, ddof=1) / math.sqrt(len(runs))
            ax.errorbar(stages, test.mean(axis=0), sem, color=color, marker="o", ms=3, capsize=2,
                        label=f"noise {theta:.0%}")  # fmt: skip
            cen = np.mean([r["baselines"]["nearest centroid"] for r in runs])
            ax.axhline(cen, color=color, ls=":", lw=0.8)
            ax.set_title(f"{proto}: clean test accuracy")
        val = np.array([r["retuned"]["val_acc"] for r in runs])
        axes[2].plot(stages, val.mean(axis=0), "o-", color=color, ms=3)
    axes[2].set_title("retuned: validation accuracy (noisy labels)")
    for ax in axes:
        ax.set_xlabel("SD stage (0 = plain training)")
        ax.set_xticks(stages)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=7, title="dotted: nearest centroid", title_fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
