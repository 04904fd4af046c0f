"""The rows of ``run.py``: :func:`rows_of` summarises the finished seeds of the state.

Mean, sd (ddof 1) and per-seed rows, and the learning curves. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import numpy as np
from _common import (
    Row,
    print_table,
)

__all__ = [
    "TRANSFER",
    "rows_of",
]


TRANSFER = ("router-only", "full fine-tuning", "scratch", "ridge")


# ------------------------------------------------------------------------- report


def rows_of(state: dict, cfg: dict, seeds: list[int]) -> tuple[list[Row], dict]:
    """Mean, sd (ddof 1) and per-seed rows of the finished seeds, and the learning curves."""
    rows: list[Row] = []
    table = []

    def add(case, metric, values, unit="fraction", vs=None, base=None):
        m, sd = float(np.mean(values)), float(np.std(values, ddof=1))
        ratio = None if base is None or base == 0 else m / base
        rows.append(Row(case, metric, m, unit, vs, ratio))
        rows.append(Row(case, f"{metric}_sd", sd, unit))
        rows.extend(
            Row(case, f"{metric} seed {s}", float(v), unit)
            for s, v in zip(seeds, values, strict=True)
        )
        table.append([case, metric, m, sd, vs or "-", ratio])

    runs = [state[str(s)] for s in seeds]
    curves: dict = {}
    for metric in ("top1", "top5"):
        base = float(np.mean([r["ridge"][metric] for r in runs]))
        for case in ("ridge", "flat MoE", "MoRE-Brain"):
            vals = [r[case][metric] for r in runs]
            vs = None if case == "ridge" else "ridge"
            add(case, metric, vals, vs=vs, base=None if vs is None else base)

    def fit_rows(case, fits):
        """``flat``, ``cycles`` and ``steps`` rows of one learned fit (``fits``: per seed)."""
        add(case, "flat", [float(f["flat"]) for f in fits], "fraction")
        add(case, "cycles", [f["cycles"] for f in fits], "cycles")
        add(case, "steps", [f["steps"] for f in fits], "steps")
        curves[case] = {str(s): f["curve"] for s, f in zip(seeds, fits, strict=True)}

    for case in ("flat MoE", "MoRE-Brain"):
        fit_rows(case, [r[case] for r in runs])
    add("ridge", "alpha", [r["ridge"]["alpha"] for r in runs], "")
    for metric in ("top1", "top5"):
        base = float(np.mean([r["linear"]["ridge"][metric] for r in runs]))
        for case in ("ridge", "old recipe", "MoRE-Brain"):
            vals = [r["linear"][case][metric] for r in runs]
            vs = None if case == "ridge" else "linear ridge"
            add(f"linear {case}", metric, vals, vs=vs, base=None if vs is None else base)
    fit_rows("linear MoRE-Brain", [r["linear"]["MoRE-Brain"] for r in runs])
    for case in runs[0]["groups"]:
        for metric in ("ari", "nmi"):
            add(case, metric, [r["groups"][case][metric] for r in runs], "score")
    for n in cfg["new_rows"]:
        for metric in ("top1", "top5"):
            base = float(np.mean([r[f"new {n}"]["scratch"][metric] for r in runs]))
            for case in TRANSFER:
                vals = [r[f"new {n}"][case][metric] for r in runs]
                vs = None if case == "scratch" else "scratch"
                add(f"new subject {n} rows {case}", metric, vals, vs=vs, base=base)
        for case in TRANSFER[:3]:
            fit_rows(f"new subject {n} rows {case}", [r[f"new {n}"][case] for r in runs])
    print_table(
        ["case", "metric", "mean", "sd", "vs", "ratio"],
        [t for t in table if t[1] in ("top1", "top5", "ari")],
        title=f"MoRE-Brain nonlinear planted fMRI ({len(seeds)} seeds)",
    )
    return rows, curves
