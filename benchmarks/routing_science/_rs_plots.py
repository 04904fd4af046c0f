"""The figures of ``run.py``: :func:`save_plots` draws the curves of the three experiments.

A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "save_plots",
]


# --------------------------------------------------------------------------- plots


def save_plots(runs: dict, p: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    saved = []
    cases = [tuple(c) for c in p["configs"]]
    fig, axes = plt.subplots(1, len(cases), figsize=(3.6 * len(cases), 3.2), squeeze=False)
    for ax, (E, k) in zip(axes[0], cases, strict=True):
        for method, color in (("top-k", "tab:blue"), ("default", "tab:red")):
            hs = runs[(E, k)][method]
            tok = np.array(hs[0]["tokens"][1:]) / 1e3
            ppl = np.array([h["val_ppl"][1:] for h in hs])
            m = ppl.mean(0)
            ax.plot(tok, m, color=color, label=method)
            if len(hs) > 1:
                ax.fill_between(tok, ppl.min(0), ppl.max(0), color=color, alpha=0.2)
        ax.set_yscale("log")
        ax.set_title(f"{E} experts, k={k}")
        ax.set_xlabel("training tokens (thousands)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("validation perplexity (bytes)")
    axes[0][0].legend()
    fig.tight_layout()
    path = out / "routing_science_curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    saved.append(path)

    # per seed: Default MoE's final perplexity against Top-K's (below the diagonal: Default
    # better), and the router-gradient density of both
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for (E, k), color in zip(cases, ("tab:purple", "tab:orange", "tab:green"), strict=False):
        t = [h["val_ppl"][-1] for h in runs[(E, k)]["top-k"]]
        d = [h["val_ppl"][-1] for h in runs[(E, k)]["default"]]
        axes[0].scatter(t, d, color=color, label=f"{E} experts, k={k}", s=18)
        for j, method in enumerate(("top-k", "default")):
            dens = [h["grad_end"]["density"] for h in runs[(E, k)][method]]
            x = cases.index((E, k)) * 3 + j
            axes[1].scatter([x] * len(dens), dens, color=color, s=12)
    lo, hi = axes[0].get_xlim()
    axes[0].plot([lo, hi], [lo, hi], color="gray", lw=0.8)
    axes[0].set_xlabel("Top-K final perplexity")
    axes[0].set_ylabel("Default MoE final perplexity (same seed)")
    axes[0].legend(fontsize=8)
    axes[1].set_xticks(
        [i * 3 + j for i in range(len(cases)) for j in (0, 1)],
        [f"{E}c{k}\n{m}" for E, k in cases for m in ("top-k", "default")],
        fontsize=8,
    )
    axes[1].set_ylabel("non-zero share of dL/d(router logits)")
    axes[1].set_ylim(0, 1.05)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "routing_science_default_seeds.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    saved.append(path)

    for E in p["balance_experts"]:
        hs = runs[("balance", E)]
        names = [n for n in ("switch", "bias", "none") if hs[n]]
        fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.2), squeeze=False)
        for ax, name in zip(axes[0], names, strict=True):
            h = hs[name][0]
            # load of the last MoE layer at every evaluation, as a multiple of uniform
            load = np.array([d[-1]["load"] for d in h["diagnostics"]]) * E
            im = ax.imshow(
                load.T,
                aspect="auto",
                cmap="viridis",
                vmin=0,
                vmax=3,
                extent=(0, h["tokens"][-1] / 1e3, E - 0.5, -0.5),
            )
            ax.set_title(f"{name} (seed {p['seed0']})")
            ax.set_xlabel("training tokens (thousands)")
        axes[0][0].set_ylabel("expert (last MoE layer)")
        fig.colorbar(im, ax=axes[0].tolist(), label="load / uniform load")
        path = out / f"routing_science_load_{E}e.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        saved.append(path)

    ft = runs["finetune"]
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for name, color in (("baseline", "tab:blue"), ("L_o+L_v", "tab:green")):
        for i, h in enumerate(ft[name]):
            ax.plot(
                h["step"], h["val_loss"], color=color, alpha=0.8, label=name if i == 0 else None
            )
    ax.set_xlabel("fine-tuning step")
    ax.set_ylabel("news validation loss (nats/byte)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "routing_science_finetune.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    saved.append(path)
    return saved
