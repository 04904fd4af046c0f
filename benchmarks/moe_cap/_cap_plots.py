"""The plots of ``run.py``: the CAP radar and the utilisation against batch size (PNG).

Both read a result document (``machine`` and ``rows``, as ``run.py`` writes it). A helper
module: ``run.py`` imports it.
"""

from __future__ import annotations

import math
from pathlib import Path

from _cap_metrics import cell_case
from _cap_models import DTYPES, MODELS
from _common import row_value

from sci_moe.moe.cap import cap_radar
from sci_moe.moe.cap.radar import RadarAxis

__all__ = [
    "plot_radar",
    "plot_utilisation",
    "radar_systems",
]


def radar_systems(doc: dict) -> list[dict]:
    """The radar's systems: every model x dtype at batch 1, shortest context.

    ``cost``: weights, GB; ``accuracy``: fidelity to float32 (1 for
    float32); ``performance``: TPOT, s.
    """
    m = doc["machine"]
    out = []
    for kind in MODELS:
        c = 0 if kind == "sci-moe" else m["contexts"][0]
        for dtype in DTYPES:
            case = cell_case(kind, dtype, 1, c)
            tpot = row_value(doc, case, "tpot_ms") / 1e3
            mem = row_value(doc, f"{kind} {dtype}", "weights_gb")
            acc = 1.0 if dtype == "float32" else row_value(doc, f"{kind} bfloat16", "fidelity")
            out.append(
                {"name": f"{kind} {dtype}", "cost": mem, "accuracy": acc, "performance": tpot}
            )
    return out


def plot_radar(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = radar_systems(doc)

    def span(x: float) -> float:  # five rings of a round step (1, 2, 2.5 or 5 x 10^n) >= x
        exp = math.floor(math.log10(x / 5))
        step = next(b * 10.0**exp for b in (1, 2, 2.5, 5, 10) if b * 10.0**exp >= x / 5)
        return 5 * step

    cost = span(max(s["cost"] for s in systems))
    tpot = span(max(s["performance"] for s in systems))
    low = 1.0 - span(max(1.1 * (1.0 - min(s["accuracy"] for s in systems)), 1e-4))
    axes = (
        RadarAxis("cost", "Cost: weights (GB)", False, (cost, 0.0)),
        RadarAxis("accuracy", "Accuracy: fidelity to fp32", True, (low, 1.0)),
        RadarAxis("performance", "Performance: TPOT at batch 1 (s)", False, (tpot, 0.0)),
    )
    fig = cap_radar(systems, path, axes=axes, title="CAP radar, measured in this run")
    plt.close(fig)


def plot_utilisation(doc: dict, path: Path) -> None:
    """MBU and MFU (sparse, dense, top-k) against batch, per dtype; activated fraction; TPOT."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = doc["machine"]
    ctx0 = m["contexts"][0]
    colors = dict(zip(MODELS, ("C0", "C1", "C2"), strict=True))
    fig, axs = plt.subplots(2, 3, figsize=(15, 8.5))

    def series(kind, dtype, metric):
        c = 0 if kind == "sci-moe" else ctx0
        xs, ys = [], []
        for b in m["batches"]:
            found = [
                r["value"]
                for r in doc["rows"]
                if r["case"] == cell_case(kind, dtype, b, c) and r["metric"] == metric
            ]
            if found:
                xs.append(b)
                ys.append(found[0])
        return xs, ys

    for row, dtype in enumerate(DTYPES):
        panels = (
            (
                "bandwidth utilisation",
                (
                    ("s_mbu", "-", "S-MBU"),
                    ("dense_mbu", "--", "MBU"),
                    ("topk_mbu", ":", "top-k MBU"),
                ),
            ),
            ("compute utilisation", (("s_mfu", "-", "S-MFU"), ("dense_mfu", "--", "MFU"))),
        )
        for col, (title, metrics) in enumerate(panels):
            ax = axs[row, col]
            for kind in MODELS:
                for metric, ls, label in metrics:
                    xs, ys = series(kind, dtype, metric)
                    ax.plot(
                        xs,
                        [100 * y for y in ys],
                        ls,
                        color=colors[kind],
                        marker="o",
                        ms=3,
                        label=f"{kind} {label}",
                    )
            ax.axhline(100, color="k", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("batch (sequences)")
            ax.set_ylabel(f"% of the measured peak ({dtype})")
            ax.set_title(f"{title}, {dtype}, L={ctx0}")
            ax.legend(fontsize=6, ncol=2)
    ax = axs[0, 2]
    for kind in MODELS:
        xs, ys = series(kind, "float32", "activated_fraction")
        ax.plot(xs, ys, "-o", color=colors[kind], ms=3, label=f"{kind} recorded")
        xs, ys = series(kind, "float32", "activated_uniform")
        ax.plot(xs, ys, ":", color=colors[kind], label=f"{kind} uniform routing")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (sequences)")
    ax.set_ylabel("activated routed-expert fraction")
    ax.set_title("experts a decode step touches")
    ax.legend(fontsize=7)
    ax = axs[1, 2]
    for kind in MODELS:
        for dtype, ls in zip(DTYPES, ("-", "--"), strict=True):
            xs, ys = series(kind, dtype, "tpot_ms")
            ax.plot(xs, ys, ls, color=colors[kind], marker="o", ms=3, label=f"{kind} {dtype}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch (sequences)")
    ax.set_ylabel("time per output token (ms)")
    ax.set_title(f"TPOT, L={ctx0}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
