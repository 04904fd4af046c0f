"""The rows and figures of ``default_moe.py``.

:data:`PER_SEED` names the per-seed metrics, :func:`case_rows` summarises one
configuration's runs (mean, sd, per-seed rows, the paired tests) into rows and a table
line, :func:`save_plots` draws the learning curves and the per-seed final losses. A helper
module: ``default_moe.py`` imports it.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from _common import (
    Row,
    paired_test,
)
from _routing_science import (
    tokens_to,
)
from _rs_dm_train import LOWER_BETTER, METHODS

__all__ = [
    "PER_SEED",
    "case_rows",
    "save_plots",
]


PER_SEED = {  # metric: (unit, value of a run; tokens_to_target and excess come apart)
    "val_loss": ("nats", lambda h: h["val_loss"][-1]),
    "excess": ("%", None),
    "tokens_to_target": ("tokens", None),
    "converged": ("bool", lambda h: float(h["converged"])),
    "router_grad_density": ("share", lambda h: h["grad_end"]["density"]),
    "router_grad_unselected": ("share", lambda h: h["grad_end"]["unselected_share"]),
    "router_grad_norm": ("norm", lambda h: h["grad_end"]["norm"]),
    "router_grad_density_early": ("share", lambda h: h["grad_early"]["density"]),
    "router_grad_unselected_early": ("share", lambda h: h["grad_early"]["unselected_share"]),
    "router_grad_norm_early": ("norm", lambda h: h["grad_early"]["norm"]),
}


def case_rows(case: str, hs: dict, seeds: list[int], floor: float) -> tuple[list[Row], list]:
    """Rows and the table line of one configuration from its runs ``hs[method]``."""
    final = {m: [h["val_loss"][-1] for h in hs[m]] for m in METHODS}
    target = max(final["top-k"] + final["default"])
    vals = {}
    for m in METHODS:
        for metric, (_unit, get) in PER_SEED.items():
            if metric == "tokens_to_target":
                v = [tokens_to(h["tokens"], h["val_loss"], target) for h in hs[m]]
            elif metric == "excess":
                v = [100.0 * (x - floor) / floor for x in final[m]]
            else:
                v = [get(h) for h in hs[m]]
            vals[(metric, m)] = v
    rows = [Row(case, "target_loss", target, "nats")]
    for metric, (unit, _get) in PER_SEED.items():
        t, d = vals[(metric, "top-k")], vals[(metric, "default")]
        mt, md = statistics.fmean(t), statistics.fmean(d)
        if metric in LOWER_BETTER:
            ratio = mt / md if md > 0 else None
        else:  # (a Top-K share of exactly 0 up to rounding has no meaningful ratio)
            ratio = md / mt if abs(mt) > 1e-9 else None
        sd = {m: statistics.stdev(v) if len(v) > 1 else 0.0 for m, v in (("t", t), ("d", d))}
        rows += [
            Row(f"{case}/top-k", metric, mt, unit),
            Row(f"{case}/top-k", f"{metric}_sd", sd["t"], unit),
            Row(f"{case}/default", metric, md, unit, f"{case}/top-k", ratio),
            Row(f"{case}/default", f"{metric}_sd", sd["d"], unit),
        ]
        rows += [
            Row(f"{case}/{m}", f"{metric} seed {s}", v, unit)
            for m in METHODS
            for s, v in zip(seeds, vals[(metric, m)], strict=True)
        ]
        if metric in ("val_loss", "tokens_to_target") and len(seeds) >= 2:
            res = paired_test(d, t)  # both p-values on the page; the t-test decides
            rows += [
                Row(f"{case}/default", f"{metric} p_t", res["t"], "p"),
                Row(f"{case}/default", f"{metric} p_sign", res["sign"], "p"),
                Row(f"{case}/default", f"{metric} wins", float(res["losses"]), "seeds"),
            ]
    wins = sum(x < y for x, y in zip(final["default"], final["top-k"], strict=True))
    n_flat = sum(vals[("converged", "top-k")] + vals[("converged", "default")])
    line = [
        case,
        floor,
        statistics.fmean(final["top-k"]),
        statistics.fmean(final["default"]),
        f"{wins}/{len(seeds)}",
        statistics.fmean(vals[("excess", "top-k")]),
        statistics.fmean(vals[("excess", "default")]),
        statistics.fmean(vals[("tokens_to_target", "top-k")]),
        statistics.fmean(vals[("tokens_to_target", "default")]),
        statistics.fmean(vals[("router_grad_density", "top-k")]),
        statistics.fmean(vals[("router_grad_density", "default")]),
        f"{n_flat:.0f}/{2 * len(seeds)}",
    ]
    return rows, line


# --------------------------------------------------------------------------- plots


def save_plots(
    runs: dict, floors: dict, out: Path, stem: str = "routing_science_default_moe"
) -> list[Path]:
    """Learning curves (mean and range over seeds, the floor dashed) and per seed the final
    losses and router-gradient densities: ``<stem>_curves.png`` and ``<stem>_seeds.png``
    (``stem``: the results JSON's, so that every run keeps its own)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    cases = list(runs)
    fig, axes = plt.subplots(1, len(cases), figsize=(3.8 * len(cases), 3.2), squeeze=False)
    for ax, case in zip(axes[0], cases, strict=True):
        for method, color in (("top-k", "tab:blue"), ("default", "tab:red")):
            hs = runs[case][method]
            tok = np.array(hs[0]["tokens"][1:]) / 1e3
            loss = np.array([h["val_loss"][1:] for h in hs])
            ax.plot(tok, loss.mean(0), color=color, label=method)
            ax.fill_between(tok, loss.min(0), loss.max(0), color=color, alpha=0.2)
        ax.axhline(floors[case], color="k", ls="--", lw=0.8, label="Bayes floor")
        ax.set_yscale("log")
        ax.set_title(case.replace("c", " experts, k=") if "c" in case else case)
        ax.set_xlabel("training tokens (thousands)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("validation loss (nats/byte)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    paths = [out / f"{stem}_curves.png"]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    colors = ("tab:purple", "tab:orange", "tab:green")
    for i, (case, color) in enumerate(zip(cases, colors, strict=False)):
        t = [h["val_loss"][-1] for h in runs[case]["top-k"]]
        d = [h["val_loss"][-1] for h in runs[case]["default"]]
        axes[0].scatter(t, d, color=color, label=case, s=18)
        for j, method in enumerate(METHODS):
            dens = [h["grad_end"]["density"] for h in runs[case][method]]
            axes[1].scatter([i * 3 + j] * len(dens), dens, color=color, s=12)
    lo, hi = axes[0].get_xlim()
    axes[0].plot([lo, hi], [lo, hi], color="gray", lw=0.8)
    axes[0].set_xlabel("Top-K final validation loss")
    axes[0].set_ylabel("Default MoE, same seed")
    axes[0].legend(fontsize=8)
    axes[1].set_xticks(
        [i * 3 + j for i in range(len(cases)) for j in (0, 1)],
        [f"{c}\n{m}" for c in cases for m in METHODS],
        fontsize=8,
    )
    axes[1].set_ylabel("non-zero share of dL/d(router logits)")
    axes[1].set_ylim(0, 1.05)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out / f"{stem}_seeds.png")
    fig.savefig(paths[1], dpi=110)
    plt.close(fig)
    return paths
