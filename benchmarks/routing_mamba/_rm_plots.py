"""The plots of ``run.py``: validation curves and the scaling fit (PNG).

A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import math
import statistics

from _rm_plan import BENCHMARK

__all__ = [
    "plot_names",
    "save_plots",
]


def plot_names(stem: str) -> dict[str, str]:
    """The PNG file names of the run whose JSON is ``<stem>.json``, by plot."""
    return {
        "curves": f"{stem}_curves.png",
        "hybrid": f"{stem}_hybrid_curves.png",
        "scaling": f"{stem}_scaling.png",
    }


def save_plots(curves, scaling, out_dir, stem: str = BENCHMARK):
    """Validation curves (mean of seeds) and the scaling fit, as PNGs named by
    :func:`plot_names` of ``stem`` (the JSON's stem)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fnames = plot_names(stem)
    paths = []
    for fname, names, title in (
        (
            fnames["curves"],
            [n for n in curves if not n.startswith("hybrid")],
            "Mamba stacks",
        ),
        (
            fnames["hybrid"],
            [n for n in curves if n.startswith("hybrid")],
            "hybrid (Mamba + attention) stacks",
        ),
    ):
        fig, ax = plt.subplots(figsize=(5.5, 3.5))
        for name in names:
            tok, bpb = curves[name]
            ax.plot(tok[1:], bpb[1:], marker="o", ms=3, label=name)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("validation bits per byte (mean of seeds)")
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    panels = [(scaling, "rom_active", "active non-embedding parameters", "RoM", "N")]
    if "hybrid" in scaling:  # the dense hybrids' sizes: the FLOPs saving's curve
        panels.append((scaling["hybrid"], "rom_flops", "active FLOPs per token", "hybrid", "F"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.5), squeeze=False)
    for ax, (sc, at, xlabel, name, var) in zip(axes[0], panels, strict=True):
        _scaling_panel(ax, sc, sc[at], xlabel, name, var)
    fig.tight_layout()
    path = out_dir / fnames["scaling"]
    fig.savefig(path, dpi=120)
    plt.close(fig)
    paths.append(path)
    return paths


def _scaling_panel(ax, sc, rom_x, xlabel, name, var):
    """One scaling panel: the dense models (seeds and mean), their fit ``a + b ln x`` and
    the RoM model at ``rom_x``."""
    ns = sorted(sc["dense"])
    for n in ns:
        v = sc["dense"][n]
        ax.scatter([n] * len(v), v, color="C0", s=8, alpha=0.5)
    ax.plot(ns, [statistics.mean(sc["dense"][n]) for n in ns], "o", color="C0",
            label=f"dense {name if name != 'RoM' else ''}".strip() + " (seeds, mean)")  # fmt: skip
    grid = [ns[0] * (ns[-1] / ns[0]) ** (i / 50) for i in range(51)]
    ax.plot(grid, [sc["a"] + sc["b"] * math.log(n) for n in grid], "-", color="C0",
            label=f"fit a + b ln {var}")  # fmt: skip
    r = sc["rom"]
    ax.scatter([rom_x] * len(r), r, color="C3", s=8, alpha=0.5)
    ax.plot(
        [rom_x],
        [statistics.mean(r)],
        "s",
        color="C3",
        label=f"{name} RoM".replace("RoM RoM", "RoM"),
    )
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("final validation bits per byte")
    ax.legend()
