"""The rows of ``long.py``: :func:`flat` judges a fit's curve, :func:`make_rows` turns the
per-seed raw results into rows (means, standard deviations, per-seed values, per-fit steps
and flat flags).

A helper module: ``long.py`` imports it.
"""

from __future__ import annotations

import numpy as np
from _common import Row

from sci_moe.train import is_flat

__all__ = [
    "FLAT_FRACTION",
    "FLAT_TOL",
    "flat",
    "make_rows",
]

FLAT_FRACTION = 0.2  # the last 20 % of a run's steps ...
FLAT_TOL = 0.01  # ... raise the best validation mIoU by less than 1 % (relative)


def flat(curve: list, reason: str | None = None) -> bool:
    """Whether a training run's validation curve ``[[step, mIoU], ...]`` is flat.

    True when the best value over its last :data:`FLAT_FRACTION` of steps is less than
    :data:`FLAT_TOL` (relative) above the best before (:func:`sci_moe.train.is_flat`, at
    least five evaluations), the house rule. A fit of this script stops at its first flat
    evaluation from its minimum on (reason ``"flat"``), so it is flat unless it ran to its
    cap. ``reason`` is accepted for the stored runs of the patience-stop plan
    (``cogamid_long.json``), whose first rows counted any patience stop
    (``"early_stop"``) as flat; re-derived with ``--rows-only``, those runs are judged by
    their curves like every other run, so ``reason`` no longer changes the answer.
    """
    del reason  # judged by the curve alone
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, tail=FLAT_FRACTION, tol=FLAT_TOL, mode="max")


def _runs_flat(rec: dict, names) -> list[bool]:
    out = []
    for name in names:
        cs = [rec["curves"]["base"]] if name == "base" else rec["curves"][name]
        out += [flat(c["evals"], c["reason"]) for c in cs]
    return out


def make_rows(runs: dict, seeds: list[int], methods: list[str]) -> list[Row]:
    """Rows from the per-seed raw results of the seeds that are done."""
    done = [s for s in seeds if str(s) in runs]
    if not done:
        return []
    recs = [runs[str(s)] for s in done]
    n_steps = len(recs[0]["methods"][methods[0]])
    last = n_steps - 1
    rows: list[Row] = []
    base = [r["base"]["miou_all"] for r in recs]
    rows.append(Row("base", "miou_all", float(np.mean(base)), "IoU"))
    rows.append(Row("base", "miou_all_std", float(np.std(base)), "IoU"))
    stops = [r["curves"]["base"]["step"] for r in recs]
    rows.append(Row("base", "median_steps", float(np.median(stops)), "steps"))
    rows.append(Row("base", "converged_fraction", float(np.mean(_runs_flat_all(recs, "base"))), ""))
    rows.append(Row("base", "max_steps", float(np.max(stops)), "steps"))
    rows += _fit_rows("base", done, [r["curves"]["base"] for r in recs])
    rows.append(Row("base", "capped_fraction", _capped([r["curves"]["base"] for r in recs]), ""))
    for name in methods:
        per = [r["methods"][name] for r in recs]
        for t in range(n_steps):
            for key in ("miou_all", "miou_old", "miou_new"):
                if t == 0 and key == "miou_old":
                    continue
                vals = np.array([p[t][key] for p in per], dtype=float)
                rows.append(Row(f"{name}/step{t}", key, float(vals.mean()), "IoU"))
                rows.append(Row(f"{name}/step{t}", key + "_std", float(vals.std()), "IoU"))
        summary = {
            "miou_all_last": [p[last]["miou_all"] for p in per],
            "miou_old_last": [p[last]["miou_old"] for p in per],
            "miou_new_last": [p[last]["miou_new"] for p in per],
            "miou_all_avg": [float(np.mean([s["miou_all"] for s in p])) for p in per],
            "forgetting_base": [p[0]["miou_base"] - p[last]["miou_base"] for p in per],
        }
        for metric, vals in summary.items():
            rows.append(Row(name, metric, float(np.mean(vals)), "IoU"))
            rows.append(Row(name, metric + "_std", float(np.std(vals)), "IoU"))
            for s, v in zip(done, vals, strict=True):
                rows.append(Row(name, f"{metric} seed {s}", float(v), "IoU"))
        stops = [c["step"] for r in recs for c in r["curves"][name]]
        rows.append(Row(name, "median_steps", float(np.median(stops)), "steps"))
        rows.append(Row(name, "max_steps", float(np.max(stops)), "steps"))
        rows.append(Row(name, "converged_fraction", float(np.mean(_runs_flat_all(recs, name))), ""))
        fits = [c for r in recs for c in r["curves"][name]]
        rows.append(Row(name, "capped_fraction", _capped(fits), ""))
        for t in range(1, n_steps):
            rows += _fit_rows(f"{name}/step{t}", done, [r["curves"][name][t - 1] for r in recs])
    rows.append(Row("all", "wall_time", float(sum(r["seconds"] for r in recs)), "s"))
    rows.append(Row("all", "seconds_per_seed", float(np.mean([r["seconds"] for r in recs])), "s"))
    rows.append(Row("all", "seeds_done", float(len(done)), "count"))
    return rows


def _runs_flat_all(recs: list[dict], name: str) -> list[bool]:
    return [f for r in recs for f in _runs_flat(r, [name])]


def _fit_rows(case: str, seeds: list[int], curves: list[dict]) -> list[Row]:
    """Per fit (one per seed): its optimiser steps and whether it is flat (1) or not (0)."""
    rows = []
    for s, c in zip(seeds, curves, strict=True):
        rows.append(Row(case, f"steps seed {s}", float(c["step"]), "steps"))
        rows.append(Row(case, f"flat seed {s}", float(flat(c["evals"], c["reason"])), ""))
    return rows


def _capped(curves: list[dict]) -> float:
    """The fraction of fits that ran to their cap (the engine's reason ``"completed"``)."""
    return float(np.mean([c["reason"] == "completed" for c in curves]))
