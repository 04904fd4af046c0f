"""The rows of ``run.py``: :func:`rows_of` summarises the finished seeds of the state.

Mean, sd (ddof 1) and per-seed rows per task, drop and model, and the learning curves;
:func:`finished_seeds` says which seeds are complete. A helper module: ``run.py`` imports
it.
"""

from __future__ import annotations

import numpy as np
from _common import (
    Row,
    print_table,
)
from _fame_fit import DROPS, METRIC, unit_names

__all__ = [
    "finished_seeds",
    "rows_of",
]


# ------------------------------------------------------------------------- report


def finished_seeds(state: dict, cfg: dict, task: str, seed0: int) -> list[int]:
    """The seeds whose every unit of ``task`` is in ``state``."""
    return [
        seed0 + s
        for s in range(cfg["seeds"])
        if all(f"{task}|{n}|{seed0 + s}" in state for n in unit_names(task, cfg))
    ]


def rows_of(state: dict, cfg: dict, seeds_of: dict) -> tuple[list[Row], dict]:
    """Mean / sd / per-seed rows of each task's finished seeds (tasks with at least two),
    and the learning curves."""
    rows: list[Row] = []
    curves: dict = {}
    for task, seeds in seeds_of.items():
        metric = METRIC[task]
        names = unit_names(task, cfg) + (["climatology", "persistence"] if task == "elnino" else [])
        table = []
        for name in names:
            units = [state[f"{task}|{name}|{s}"] for s in seeds]
            cells = [name]
            for d in DROPS:
                if str(d) not in units[0]["error"]:
                    cells.append("-")
                    continue
                e = [u["error"][str(d)] for u in units]
                case = f"{task} drop={d}% {name}"
                rows.append(Row(case, metric, float(np.mean(e)), ""))
                rows.append(Row(case, f"{metric}_sd", float(np.std(e, ddof=1)), ""))
                rows += [
                    Row(case, f"{metric} seed {s}", float(v), "")
                    for s, v in zip(seeds, e, strict=True)
                ]
                cells.append(f"{np.mean(e):.4f} ± {np.std(e, ddof=1):.4f}")
            case = f"{task} {name}"
            if "fit_seconds" in units[0]:
                rows.append(
                    Row(case, "fit_seconds", float(np.mean([u["fit_seconds"] for u in units])), "s")
                )
            if "steps" in units[0]:
                rows.append(Row(case, "steps", float(np.mean([u["steps"] for u in units])), ""))
                rows.append(
                    Row(case, "flat_fraction", float(np.mean([u["flat"] for u in units])), "")
                )
                rows += [
                    Row(case, f"flat seed {s}", float(u["flat"]), "")
                    for s, u in zip(seeds, units, strict=True)
                ]
                capped = [u.get("reason") == "completed" for u in units]  # at the cap
                rows.append(Row(case, "capped_fraction", float(np.mean(capped)), ""))
                curves.setdefault(task, {})[name] = {
                    str(s): u["curve"] for s, u in zip(seeds, units, strict=True)
                }
            for extra in ("entropy", "regime_purity"):
                if extra in units[0]:
                    rows.append(Row(case, extra, float(np.mean([u[extra] for u in units])), ""))
            table.append(cells)
        print_table(["model", *(f"drop {d}%" for d in DROPS)], table, title=f"{task}: {metric}")
    return rows, curves
