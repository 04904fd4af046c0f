"""The figures of ``run.py``: :func:`_plots` draws the mIoU per step, the held-out
log-likelihoods and example predictions.

A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from _cogamid_rows import WORLDS, _mean, _std

__all__ = [
    "COLOURS",
    "LABELS",
]

LABELS = {
    "finetune": "fine-tune",
    "prototype": "prototype",
    "gmm_k1": "GMM K=1",
    "gmm_k3": "GMM K=3",
    "gmm_k3_da_grc": "GMM K=3 +DA+GRC",
}
COLOURS = {
    "finetune": "C0",
    "prototype": "C1",
    "gmm_k1": "C2",
    "gmm_k3": "C3",
    "gmm_k3_da_grc": "C4",
}


def _plots(prefix: str, results: dict, quick: bool) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    written = []
    size = "32 x 32 (quick)" if quick else "64 x 64"

    # mIoU per step, mean +- std over seeds.
    panels = [("multimodal", "miou_all"), ("multimodal", "miou_old"), ("unimodal", "miou_all")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, (world, key) in zip(axes, panels, strict=True):
        runs = results[world][0]
        for name, per_seed in runs.items():
            steps = range(len(per_seed[0]))
            ts = [t for t in steps if not (key == "miou_old" and t == 0)]
            vals = torch.tensor([[r[t][key] for t in ts] for r in per_seed])
            mean, std = vals.mean(0), vals.std(0, unbiased=False)
            ax.errorbar(
                ts, mean, yerr=std, marker="o", capsize=3, label=LABELS[name], color=COLOURS[name]
            )
        ax.set_xticks(list(steps))
        ax.set_xlabel("step (4-1: classes 1-4, +5, +6)")
        ax.set_title(f"{world}: {'all seen' if key == 'miou_all' else 'old'} classes")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mIoU (mean ± std over seeds)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"CoGaMiD benchmark, {size}")
    fig.tight_layout()
    path = prefix.with_name(prefix.name + "_miou.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # Held-out log-likelihood bars.
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    dens = [("gmm_k3", "GMM K=3"), ("gaussian_k1", "one Gaussian"), ("prototype", "prototype")]
    width = 0.27
    for i, (name, label) in enumerate(dens):
        means, stds = [], []
        for world in WORLDS:
            vals = results[world][1][name]
            means.append(_mean(vals))
            stds.append(_std(vals))
        xs = [j + (i - 1) * width for j in range(len(WORLDS))]
        ax.bar(xs, means, width, yerr=stds, capsize=3, label=label)
    ax.set_xticks(range(len(WORLDS)), [f"{w} classes" for w in WORLDS])
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylabel("held-out log-lik. / feature dim (nat)")
    ax.set_title(f"True base-class features, step-0 model ({size})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = prefix.with_name(prefix.name + "_loglik.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # Example predictions after the last step (first seed, multimodal world).
    ex = results["multimodal"][2]
    names = ["truth", *results["multimodal"][0]]
    cmap = ListedColormap(
        ["#000000", "#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#ffff33"]
    )
    n = ex["image"].shape[0]
    fig, axes = plt.subplots(n, len(names) + 1, figsize=(1.9 * (len(names) + 1), 1.9 * n))
    for i in range(n):
        axes[i, 0].imshow(ex["image"][i].permute(1, 2, 0).numpy())
        for j, name in enumerate(names):
            axes[i, j + 1].imshow(ex[name][i].numpy(), cmap=cmap, vmin=0, vmax=6)
        for a in axes[i]:
            a.set_xticks([])
            a.set_yticks([])
    axes[0, 0].set_title("image", fontsize=9)
    for j, name in enumerate(names):
        axes[0, j + 1].set_title(LABELS.get(name, "ground truth"), fontsize=9)
    fig.suptitle(
        "After step 2 (multimodal world, first seed); colours = classes 1-6, black = background",
        fontsize=9,
    )
    fig.tight_layout()
    path = prefix.with_name(prefix.name + "_predictions.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
