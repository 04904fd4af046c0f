"""The verdicts of ``run.py``: one per claim of MvCGE, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim (paired t-tests over the seeds, against
:func:`strongest_baseline`); ``run.py --verdicts-only JSON`` re-derives them. A helper
module: ``run.py`` imports it.
"""

from __future__ import annotations

from _common import (
    row_value,
    seed_verdict,
)
from _mvcge_train import ABLATION_SETTINGS, BASELINES, SETTINGS

__all__ = [
    "strongest_baseline",
    "verdicts",
]


def strongest_baseline(doc: dict, setting: str) -> str:
    """The baseline with the highest mean test accuracy in ``setting``."""
    return max(BASELINES, key=lambda b: row_value(doc, f"{setting} {b}", "test_accuracy"))


def verdicts(doc: dict) -> list[dict]:
    """The paper's claims, each decided by a paired t-test over the seeds (the rule).

    Per setting: MvCGE vs late fusion and vs the strongest baseline of the run (test
    accuracy); L_le: MvCGE vs ``-L_le`` in accuracy and in the last layer's expert-usage
    entropy (collapse); L_gd: MvCGE vs ``-L_gd`` in accuracy and in the views' embedding
    MMD^2 (complementarity). ``converged``: every run of both sides met the flatness
    criterion. Decisive when converged and p < 0.05.
    """
    seeds = doc["machine"]["seeds"]
    out = []
    for setting in SETTINGS:
        if not any(r["case"].startswith(f"{setting} MvCGE") for r in doc["rows"]):
            continue
        done = [
            s
            for s in seeds
            if any(r["metric"] == f"test_accuracy seed {s}" and r["case"] == f"{setting} MvCGE"
                   for r in doc["rows"])
        ]  # fmt: skip

        def conv(*cases):
            return all(row_value(doc, c, "converged_fraction") == 1.0 for c in cases)

        def claim(text, metric, ours, base, note="", setting=setting, done=done):
            o, b = f"{setting} {ours}", f"{setting} {base}"
            return seed_verdict(
                f"{text} ({setting} views)",
                doc,
                metric=metric,
                ours=o,
                baseline=b,
                higher_is_better=True,
                converged=conv(o, b),
                seeds=done,
                note=note,
            )

        best = strongest_baseline(doc, setting)
        out.append(claim("MvCGE beats late fusion", "test_accuracy", "MvCGE", "late fusion"))
        out.append(
            claim(
                "MvCGE beats the strongest baseline",
                "test_accuracy",
                "MvCGE",
                best,
                note=f"the strongest baseline by mean test accuracy is {best}",
            )
        )
        if setting not in ABLATION_SETTINGS:
            continue
        out.append(
            claim("The load-equilibrium loss improves accuracy", "test_accuracy", "MvCGE",
                  "MvCGE -L_le")
        )  # fmt: skip
        out.append(
            claim(
                "The load-equilibrium loss prevents expert collapse",
                "usage_entropy",
                "MvCGE",
                "MvCGE -L_le",
                note="last layer's expert-usage entropy, eval mode (log 4 = uniform)",
            )
        )
        out.append(
            claim("The graph-discrepancy loss improves accuracy", "test_accuracy", "MvCGE",
                  "MvCGE -L_gd")
        )  # fmt: skip
        out.append(
            claim(
                "The graph-discrepancy loss makes the views' embeddings differ",
                "view_mmd2",
                "MvCGE",
                "MvCGE -L_gd",
                note="mean pairwise MMD^2 of the views' final embeddings",
            )
        )
    return out
