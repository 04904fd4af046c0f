"""The verdicts of ``run.py``: one per claim of FAME, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim (paired t-tests over the seeds);
``run.py --verdicts-only JSON`` re-derives them. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from _common import (
    row_value,
    seed_verdict,
)
from _fame_fit import METRIC, TASKS

__all__ = [
    "verdicts",
]


# ----------------------------------------------------------------------- verdicts


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim, by paired t-tests over the seeds (:func:`_common.seed_verdict`).

        Fully observed test inputs unless said. "FAME" is the FAME variant with the lowest mean
        error on that task (chosen after the fact: the test is then slightly optimistic for
        FAME). ``converged`` is true when every trained fit of the comparison (FAME, the GRU;
    the FLM is solved exactly) was flat.

        * FAME beats the functional linear model on the nonlinear (regime) task -- the minimum
          the issue asks for; contradicted when the FLM is resolved better;
        * FAME beats the strongest baseline (FLM or GRU, lowest mean) on each task;
        * more experts help: ``K = 2, 4, 8`` vs ``K = 1`` on the regime task, ``K = 4`` vs 1 on
          the others;
        * FAME is robust to irregular sampling: with 75 % of the observation times dropped,
          FAME vs the FLM on the regime task.
    """
    cases = {r["case"] for r in doc["rows"]}

    def metric(task):
        return METRIC[task]

    def err(task, name, drop=0):
        return row_value(doc, f"{task} drop={drop}% {name}", metric(task))

    def names(task, prefix):
        return [c.split("% ", 1)[1] for c in cases if c.startswith(f"{task} drop=0% {prefix}")]

    def flat_all(task, *models):
        fl = [
            r["value"]
            for r in doc["rows"]
            if r["metric"] == "flat_fraction" and r["case"] in {f"{task} {m}" for m in models}
        ]
        return all(f == 1.0 for f in fl)

    def verdict(claim, task, ours, base, drop=0, **kw):
        return seed_verdict(
            claim,
            doc,
            seeds=doc["machine"]["task_seeds"][task],
            metric=metric(task),
            ours=f"{task} drop={drop}% {ours}",
            baseline=f"{task} drop={drop}% {base}",
            higher_is_better=False,
            converged=flat_all(task, ours, base),
            **kw,
        )

    out = []
    tasks = [t for t in TASKS if f"{t} drop=0% FLM" in cases]
    for task in tasks:
        fame = min(names(task, "FAME"), key=lambda n: err(task, n))
        if task == "regime":
            out.append(
                verdict(
                    "FAME beats the functional linear model (nonlinear regime task)",
                    task,
                    fame,
                    "FLM",
                    note=f"{fame}, the best FAME variant by mean",
                )
            )
        base = min(("FLM", "GRU"), key=lambda n: err(task, n))
        out.append(
            verdict(
                f"FAME beats the strongest baseline ({task} task)",
                task,
                fame,
                base,
                note=f"{fame} vs {base}, the better of FLM and GRU by mean",
            )
        )
    for task in tasks:
        for k in (2, 4, 8):
            if f"{task} drop=0% FAME K={k}" in cases:
                out.append(
                    verdict(
                        f"more experts help: K = {k} vs K = 1 ({task} task)",
                        task,
                        f"FAME K={k}",
                        "FAME K=1",
                    )
                )
    if "regime" in tasks:
        fame = min(names("regime", "FAME"), key=lambda n: err("regime", n))
        out.append(
            verdict(
                "FAME is robust to irregular sampling: 75 % of observation times dropped, "
                "vs the FLM (regime task)",
                "regime",
                fame,
                "FLM",
                drop=75,
            )
        )
    return out
