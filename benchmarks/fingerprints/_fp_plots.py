"""The plot of ``run.py``: accuracies against chance and the propagation results (PNG).

Reads a result document (``rows``, as ``run.py`` writes it). A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

from pathlib import Path

import _common
import numpy as np
from _cycles import flat, lm_flat

__all__ = [
    "plot",
]


# ---------------------------------------------------------------------------- output
def plot(doc: dict, folder: Path, quick: bool) -> None:
    """Learning curves (byte classifier, fine-tuned MiniLM, LMs) and the bag-of-words
    confusion, as PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    tag = "fingerprints_quick" if quick else "fingerprints"
    curves = doc["curves"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for s, c in curves.get("byte_lm", {}).items():
        a = np.array(c)
        ls = "-" if flat(c) else "--"
        axes[0].plot(a[:, 0], a[:, 1], marker=".", ls=ls, label=f"byte seed {s}")
    for s, c in curves.get("minilm_finetune", {}).items():  # fingerprints_v3 on
        a = np.array(c)
        ls = "-" if flat(c) else "--"
        axes[0].plot(a[:, 0], a[:, 1], marker="x", ls=ls, alpha=0.7, label=f"MiniLM top seed {s}")
    axes[0].axhline(0.25, color="grey", ls=":", label="chance")
    axes[0].set(xlabel="step", ylabel="validation accuracy")
    title = "fine-tuned classifiers" if curves.get("minilm_finetune") else "byte-level classifier"
    axes[0].set_title(f"{title} (dashed: not flat)")
    axes[0].legend(fontsize=7)
    colors = dict(zip(["c4", "gopher", "norm", "mixture"], ["C0", "C1", "C2", "C3"], strict=True))
    for n, per in curves.get("lm", {}).items():
        for j, (_s, c) in enumerate(per.items()):
            a = np.array(c)
            ls = "-" if lm_flat(c) else "--"
            label = n if j == 0 else None
            axes[1].plot(a[:, 0], a[:, 1], color=colors[n], ls=ls, alpha=0.8, label=label)
    axes[1].set(xlabel="step", ylabel="validation perplexity (tokens)", yscale="log")
    axes[1].set_title("propagation LMs, all seeds (dashed: not flat)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / f"{tag}_curves.png", dpi=110)
    plt.close(fig)
    names = doc.get("names", [])
    if names:
        K = len(names)
        conf = np.array(
            [
                [_common.row_value(doc, f"confusion bow {a}->{b}", "rate") for b in names]
                for a in names
            ]
        )
        fig, ax = plt.subplots(figsize=(4.6, 4))
        ax.imshow(conf, vmin=0, vmax=1, cmap="Blues")
        for i in range(K):
            for j in range(K):
                ax.text(
                    j,
                    i,
                    f"{conf[i, j]:.2f}",
                    ha="center",
                    va="center",
                    color="white" if conf[i, j] > 0.5 else "black",
                )
        ax.set_xticks(range(K), names)
        ax.set_yticks(range(K), names)
        ax.set_xlabel("predicted pipeline")
        ax.set_ylabel("true pipeline")
        ax.set_title("bag-of-words (cased), all seeds")
        fig.tight_layout()
        fig.savefig(folder / f"{tag}_confusion.png", dpi=110)
        plt.close(fig)
    print(f"wrote plots to {folder}")
