"""The summary of ``run.py``'s CPU timings: :func:`summary_rows`, :func:`resummarize`, :func:`plot`.

:func:`summary_rows` gives the medians and extremes the targets are stated in,
:func:`resummarize` recomputes them for a stored JSON (``--resummarize``, ``--merge``),
:func:`plot` draws the ratio-to-dense figure. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import statistics

from _common import (
    Row,
)
from _moe_layer import (
    DENSE,
    DTYPES,
    GRID_D,
    GRID_T,
    HF,
    SCI,
    parse_label,
)

__all__ = [
    "plot",
    "resummarize",
    "summary_rows",
]


def summary_rows(results) -> list[Row]:
    """The medians and extremes the targets are stated in."""
    out = []

    def add(name, sel, idx, stat):
        vals = [r[idx] for r in results if sel(r[0]) and r[idx] is not None]
        if vals:
            out.append(Row(f"summary {name}", stat.__name__, stat(vals), "x"))
            out.append(Row(f"summary {name}", "cases", float(len(vals)), "1"))

    f32, bf = (lambda c: c.dtype == "float32"), (lambda c: c.dtype == "bfloat16")
    add("x dense fp32 d>=128", lambda c: f32(c) and c.d >= 128, 1, statistics.median)
    add("x dense fp32 d=1024", lambda c: f32(c) and c.d == 1024, 1, statistics.median)
    add("x dense fp32 d=64", lambda c: f32(c) and c.d == 64, 1, statistics.median)
    add("x dense bf16 d=1024", lambda c: bf(c) and c.d == 1024, 1, statistics.median)
    add("x dense bf16 all", bf, 1, statistics.median)
    add("x dense fp32 all", f32, 1, min)
    add("x transformers all", lambda c: True, 2, min)
    add("x transformers all", lambda c: True, 2, statistics.median)
    add("x other path fp32", f32, 3, statistics.median)
    add("x other path fp32", f32, 3, min)
    add("x other path fp32 d<=128 E=8", lambda c: f32(c) and c.d <= 128 and c.E <= 8, 3, min)
    add("x other path bf16", bf, 3, statistics.median)
    add("x other path bf16", bf, 3, min)
    for name, sel in (("fp32", f32), ("bf16", bf)):
        add(f"x transformers {name}", sel, 2, min)
        add(f"x transformers {name}", sel, 2, statistics.median)
        # rows per expert (T k / E): where the experts' weights, not FLOPs, set the time
        for tag, lo, hi in (("<=32", 0, 32), ("33-256", 33, 256), (">256", 257, 10**9)):
            add(
                f"x dense {name} d>=128 rows/expert {tag}",
                lambda c, lo=lo, hi=hi, sel=sel: sel(c) and c.d >= 128 and lo <= c.rows() <= hi,
                1,
                statistics.median,
            )
    for name, sel in (("fp32", f32), ("bf16", bf)):
        faster = [r for r in results if sel(r[0]) and r[3] is not None and r[3] < 1]
        if name == "fp32" or faster:
            out.append(Row(f"summary other path faster {name}", "cases", float(len(faster)), "1"))
    for d in GRID_D:
        for name, sel in (("fp32", f32), ("bf16", bf)):
            for stat in (min, statistics.median, max):
                add(f"x dense {name} d={d}", lambda c, d=d, sel=sel: sel(c) and c.d == d, 1, stat)
    return out


def resummarize(path, plot_path=None, merge=()) -> None:
    """Recompute the summary rows of a written JSON from its per-case rows (in place).

    With ``plot_path`` the ratio-to-dense plot is redrawn from the same rows. ``merge``
    names JSONs of later runs (e.g. ``--case`` runs of cases the grid did not reach):
    their per-case rows replace or add to those of ``path``, ``machine.parts`` records
    each part's commit, contention and cases, and ``machine.cases_not_run`` drops the
    merged cases.
    """
    import json
    from dataclasses import asdict

    from _common import write_json_doc

    with open(path) as f:
        doc = json.load(f)
    keep = [r for r in doc["rows"] if not r["case"].startswith("summary")]
    for extra in merge:
        with open(extra) as f:
            part = json.load(f)
        new = [r for r in part["rows"] if not r["case"].startswith("summary")]
        labels = {r["case"].split(" ", 1)[0] for r in new}
        keep = [r for r in keep if r["case"].split(" ", 1)[0] not in labels] + new
        m = doc["machine"]
        if "parts" not in m:
            m["parts"] = [{"file": str(path), "git": m["git"], "contention": m["contention"]}]
        m["parts"].append(
            {
                "file": str(extra),
                "git": part["machine"]["git"],
                "contention": part["machine"]["contention"],
                "cases": sorted(labels),
            }
        )
        m["cases_not_run"] = [c for c in m.get("cases_not_run", []) if c not in labels]
        m["cases_done"] = len({r["case"].split(" ", 1)[0] for r in keep})
    per = {}
    for r in keep:
        if r["case"].endswith(f" {SCI}") and r["metric"] == "tokens_per_s" and r["vs"]:
            label = r["case"][: -len(SCI) - 1]
            kind = 1 if r["vs"].endswith(f" {DENSE}") else 2 if r["vs"].endswith(f" {HF}") else 3
            per.setdefault(label, [parse_label(label), None, None, None])[kind] = r["ratio"]
    doc["rows"] = keep + [asdict(r) for r in summary_rows(list(per.values()))]
    write_json_doc(path, doc)
    if plot_path is not None:
        plot(list(per.values()), plot_path, doc["machine"].get("mode", "grid"))


def plot(results, path, mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 2, figsize=(11, 8.4), sharey=True)
    axes = grid[0]
    markers = {1: "o", 2: "s", 4: "^", 8: "D"}
    colors = {8: "tab:blue", 32: "tab:orange", 64: "tab:green"}
    d_colors = dict(zip(GRID_D, ("tab:grey", "tab:blue", "tab:orange", "tab:red"), strict=True))
    for ax, dt in zip(grid[1], DTYPES, strict=True):
        for case, x_dense, *_ in results:
            if case.dtype == dt:
                ax.scatter(case.rows(), x_dense, color=d_colors[case.d], s=22, alpha=0.8)
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(0.8, color="red", lw=0.8, ls="--")
        ax.set_xlabel("mean rows per expert, T k / E")
        ax.set_title(f"{dt}: the same ratios against rows per expert")
    grid[1][0].set_ylabel("speed ratio to dense")
    grid[1][1].legend(
        handles=[
            plt.Line2D([], [], ls="", marker="o", color=c, label=f"d={d}")
            for d, c in d_colors.items()
        ],
        fontsize=8,
    )
    for ax, dt in zip(axes, DTYPES, strict=True):
        for case, x_dense, *_ in results:
            if case.dtype != dt:
                continue
            pos = GRID_D.index(case.d) + 0.18 * GRID_T.index(case.T) - 0.18
            ax.scatter(pos, x_dense, marker=markers[case.k], color=colors[case.E], s=28, alpha=0.8)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(0.8, color="red", lw=0.8, ls="--")
        ax.set_xticks(range(len(GRID_D)), [f"d={d}" for d in GRID_D])
        ax.set_title(f"{dt}: sci-moe / dense (equal active FLOPs)")
        ax.set_xlabel("d (offsets within a column: T = 256, 1024, 4096)")
    axes[0].set_ylabel("speed ratio to dense (fwd+bwd, > 1: sci-moe faster)")
    handles = [
        plt.Line2D([], [], ls="", marker=m, color="k", label=f"k={k}") for k, m in markers.items()
    ] + [plt.Line2D([], [], ls="", marker="o", color=c, label=f"E={e}") for e, c in colors.items()]
    axes[1].legend(handles=handles, fontsize=8, ncol=2)
    fig.suptitle(f"MoE layer, one CPU core, {mode} grid, {len(results)} cases (seed 0)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
