"""The plot of a ``run.py --grid-peers`` run: sci-moe over transformers' grouped_mm, per case.

A helper of ``_grid_peers.py`` (no entry point of its own): :func:`plot_grid_peers` draws,
per dtype, a heat map of the ratio ``t_grouped_mm / t_sci-moe`` (the ``ratio`` of the
``vs=... transformers grouped_mm`` row: the median over the repeats of the per-repeat
ratio; above 1: sci-moe faster) with the tokens ``T`` and width ``d`` of the run's cases
(measured or planned) down and the experts ``E`` and top-``k`` across, each cell labelled
with its ratio. Cases not measured (yet) or without grouped_mm stay blank.
"""

from __future__ import annotations

from pathlib import Path

from _moe_layer import DTYPES, GROUPED, SCI, parse_label

__all__ = ["grouped_ratios", "plot_grid_peers"]


def grouped_ratios(doc: dict) -> dict[str, float]:
    """``{case label: ratio to grouped_mm}`` of the cases of ``doc`` that raced it."""
    out = {}
    for r in doc["rows"]:
        if r["metric"] == "tokens_per_s" and str(r.get("vs") or "").endswith(f" {GROUPED}"):
            out[r["case"][: -len(f" {SCI}")]] = r["ratio"]
    return out


def plot_grid_peers(doc: dict, out: Path) -> Path:
    """Write the heat maps of ``doc``'s ratios to grouped_mm (one panel per dtype) to ``out``.

    The colour is ``log2`` of the ratio, clipped to a factor of two either way (white:
    level); the cell text is the ratio itself. Returns ``out``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ratios = grouped_ratios(doc)
    planned = [parse_label(lab) for lab in [*doc["runs"], *doc["machine"]["cases_not_run"]]]
    rows = sorted({(c.T, c.d) for c in planned})
    cols = sorted({(c.E, c.k) for c in planned})
    fig, axes = plt.subplots(1, len(DTYPES), figsize=(6.5 * len(DTYPES), 6.2), sharey=True)
    image = None
    for ax, dtype in zip(np.atleast_1d(axes), DTYPES, strict=True):
        grid = np.full((len(rows), len(cols)), np.nan)
        for label, ratio in ratios.items():
            case = parse_label(label)
            if case.dtype == dtype:
                grid[rows.index((case.T, case.d)), cols.index((case.E, case.k))] = ratio
        image = ax.imshow(np.log2(grid), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
        for i, j in zip(*np.nonzero(np.isfinite(grid)), strict=True):
            ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(cols)), [f"E={E},k={k}" for E, k in cols], rotation=90)
        ax.set_yticks(range(len(rows)), [f"T={T},d={d}" for T, d in rows])
        ax.tick_params(axis="y", labelleft=ax is np.atleast_1d(axes)[0])
        done = int(np.isfinite(grid).sum())
        ax.set_title(f"{dtype}: sci-moe speed / grouped_mm ({done} cases)")
    bar = fig.colorbar(image, ax=axes, shrink=0.8, ticks=[-1, -0.5, 0, 0.5, 1])
    bar.ax.set_yticklabels([f"{2**t:.2g}" for t in (-1, -0.5, 0, 0.5, 1)])
    bar.set_label("t_grouped_mm / t_sci-moe (> 1: sci-moe faster)")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return out
