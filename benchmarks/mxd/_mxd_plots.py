"""The figure of ``run.py``: :func:`_plot` draws the sparsity-faithfulness frontier.

A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import statistics

from _mxd_measure import METHODS

__all__: list[str] = []


def _plot(results, cfg, base_ce, ablated_ce, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    colors = {"mxd": "C3", "transcoder": "C0", "skip_transcoder": "C2"}
    for m in METHODS:
        for ax, metric in zip(axes, ("ce", "nmse"), strict=True):
            mean = [
                statistics.fmean(results[(m, k, s)][metric] for s in cfg["seeds"])
                for k in cfg["ks"]
            ]
            lo = [min(results[(m, k, s)][metric] for s in cfg["seeds"]) for k in cfg["ks"]]
            hi = [max(results[(m, k, s)][metric] for s in cfg["seeds"]) for k in cfg["ks"]]
            ax.plot(cfg["ks"], mean, "o-", color=colors[m], label=m)
            ax.fill_between(cfg["ks"], lo, hi, color=colors[m], alpha=0.2)
    axes[0].axhline(base_ce, color="k", ls="--", lw=1, label="original model")
    axes[0].axhline(ablated_ce, color="gray", ls=":", lw=1, label="mean ablation")
    axes[0].set_ylabel("spliced next-token CE (nats/token)")
    axes[1].set_ylabel("normalised MSE (held-out)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("active units k")
        ax.legend(fontsize=8)
    fig.suptitle(
        f"SmolLM2-135M (Q4_1) layer {cfg['layer']} MLP, equal parameters; band = seed range"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
