"""The figures of ``run.py``: :func:`plot` from a result document, the expert assignment map.

A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _common import (
    row_value,
)
from _more_brain_report import TRANSFER

__all__ = [
    "plot",
]


def _plot_assign(assign, roi, perm, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = np.argsort(perm)  # subject columns in reference (planted) order
    fig, axes = plt.subplots(2, 1, figsize=(8, 2.4))
    for a, r, ax, name in zip(assign, roi, axes, ("networks", "regions"), strict=True):
        ax.imshow(
            np.stack([r[order], a[order]]), aspect="auto", cmap="tab20", interpolation="nearest"
        )
        ax.set_yticks([0, 1], ["planted", "learned"])
        ax.set_xticks([])
        ax.set_title(f"{name}: {int(r.max()) + 1} planted groups", fontsize=8)
    axes[-1].set_xlabel("voxel (planted order)")
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / "more_brain_assignments.png", dpi=110)
    plt.close(fig)


def plot(doc: dict, folder: Path) -> None:
    """Learning curves and the transfer panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = doc["curves"]
    new = [c for c in curves if c.startswith("new subject ")]
    amounts = sorted({int(c.split()[2]) for c in new})
    fig, axes = plt.subplots(1, 2 + len(amounts), figsize=(3.2 * (2 + len(amounts)), 3))
    colors = {"flat MoE": "C0", "MoRE-Brain": "C1", "router-only": "C2"}
    colors.update({"full fine-tuning": "C3", "scratch": "C4", "linear MoRE-Brain": "C1"})
    for ax, cases in ((axes[0], ("flat MoE", "MoRE-Brain")), (axes[1], ("linear MoRE-Brain",))):
        for case in cases:
            for i, c in enumerate(curves[case].values()):
                s, v = zip(*c, strict=True)
                ax.plot(s, v, color=colors[case], alpha=0.7, label=case if i == 0 else None)
        for old in (100, 300):  # the step counts of the issue-41 quick and default runs
            ax.axvline(old, color="grey", ls=":", lw=1)
        ax.set(xlabel="step", ylabel="validation top-1 (among 150)")
        ax.legend(fontsize=7)
    axes[0].set_title("nonlinear data, subjects 1-2", fontsize=9)
    axes[1].set_title("linear data (diagnosis), subject 1", fontsize=9)
    for ax, n in zip(axes[2:], amounts, strict=True):
        for case in TRANSFER[:3]:
            for i, c in enumerate(curves[f"new subject {n} rows {case}"].values()):
                s, v = zip(*c, strict=True)
                ax.plot(s, v, color=colors[case], alpha=0.7, label=case if i == 0 else None)
        ax.set(title=f"new subject, {n} rows", xlabel="step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / "more_brain_curves.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4.5, 3))
    for case in TRANSFER:
        m = [row_value(doc, f"new subject {n} rows {case}", "top5") for n in amounts]
        sd = [row_value(doc, f"new subject {n} rows {case}", "top5_sd") for n in amounts]
        ax.errorbar(amounts, m, yerr=sd, marker="o", capsize=3, label=case)
    ax.set(xscale="log", xlabel="new-subject training rows", ylabel="test top-5")
    ax.set_xticks(amounts, [str(n) for n in amounts])
    ax.minorticks_off()
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "more_brain_transfer.png", dpi=110)
    plt.close(fig)
