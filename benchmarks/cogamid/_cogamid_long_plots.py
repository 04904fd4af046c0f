"""The figures of ``long.py``: :func:`_plot` draws the mIoU per step and the learning curves.

A helper module: ``long.py`` imports it (and its method labels, :data:`LABELS`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = [
    "LABELS",
]

LABELS = {
    "finetune": "fine-tune",
    "prototype": "prototype replay",
    "gmm": "GMM replay",
    "gmm_da": "GMM + DA",
    "gmm_grc": "GMM + GRC",
    "gmm_da_grc": "GMM + DA + GRC",
}


def _plot(doc: dict, folder: Path, methods: list[str], stem: str) -> list[Path]:
    """Write ``<stem>_miou.png`` and ``<stem>_curves.png`` into ``folder`` (stem: the JSON's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    runs, seeds = doc["runs"], [s for s in doc["machine"]["seeds"] if str(s) in doc["runs"]]
    colours = {m: f"C{i}" for i, m in enumerate(methods)}
    written = []
    # mIoU per step: all, old and new classes (mean +- sd over seeds).
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), sharey=True)
    for ax, key in zip(axes, ("miou_all", "miou_old", "miou_new"), strict=True):
        for m in methods:
            per = np.array(
                [[st[key] for st in runs[str(s)]["methods"][m]] for s in seeds], dtype=float
            )
            ts = np.arange(per.shape[1])
            if key == "miou_old":
                ts, per = ts[1:], per[:, 1:]
            ax.errorbar(
                ts,
                per.mean(0),
                yerr=per.std(0),
                marker="o",
                capsize=3,
                label=LABELS[m],
                color=colours[m],
            )
        ax.set_xticks(range(per.shape[1] + (key == "miou_old")))
        ax.set_xlabel("step (3 base classes, then +1 class per step)")
        ax.set_title(
            {"miou_all": "all seen", "miou_old": "old", "miou_new": "new"}[key] + " classes"
        )
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"test mIoU (mean, sd over {len(seeds)} seeds)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = folder / f"{stem}_miou.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    # Learning curves of the first seed: validation mIoU against optimiser steps, the
    # steps of the sequence one after the other.
    s = str(seeds[0])
    fig, axes = plt.subplots(2, 3, figsize=(14, 6.5), sharey=True)
    for ax, m in zip(axes.flat, methods, strict=False):
        curves = [runs[s]["curves"]["base"], *runs[s]["curves"][m]]
        offset = 0
        for t, c in enumerate(curves):
            ev = np.array(c["evals"], dtype=float)
            ax.plot(ev[:, 0] + offset, ev[:, 1], color=colours[m] if t else "k", lw=1)
            best = c["best_step"]
            if best is not None:
                ax.axvline(offset + best, color="grey", lw=0.5, ls=":")
            offset += c["step"]
            ax.axvline(offset, color="grey", lw=0.6)
        ax.set_title(f"{LABELS[m]} (seed {s}; black: base step)", fontsize=9)
        ax.set_xlabel("optimiser steps (step boundaries: grey lines)")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("validation mIoU (seen classes)")
    fig.tight_layout()
    path = folder / f"{stem}_curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
