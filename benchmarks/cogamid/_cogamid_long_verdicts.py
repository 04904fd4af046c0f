"""The verdicts of ``long.py``: one per claim of the abstract the long run tests.

:func:`verdicts` reads a result document (``machine``, ``runs`` and ``rows``, as ``long.py``
writes it) and returns one verdict entry per claim of :data:`CLAIMS` (paired t-tests over the
seeds); ``long.py --verdicts-only JSON`` re-derives them. A helper module: ``long.py``
imports it.
"""

from __future__ import annotations

from _common import (
    row_value,
    seed_verdict,
    verdict_entry,
)

__all__ = [
    "CLAIMS",
    "METRIC_TEXT",
    "verdicts",
]


#: (claim, ours, baseline, metric): the claims of the abstract the long run tests.
CLAIMS = [
    (
        "replaying stored features prevents forgetting of old classes",
        "gmm",
        "finetune",
        "miou_old_last",
    ),
    (
        "GMM replay gives higher mIoU than single-prototype replay",
        "gmm",
        "prototype",
        "miou_all_last",
    ),
    (
        "GMM replay keeps old classes better than single-prototype replay",
        "gmm",
        "prototype",
        "miou_old_last",
    ),
    ("Dynamic Adjustment improves GMM replay", "gmm_da", "gmm", "miou_all_last"),
    (
        "the Gaussian representation constraint (GRC) improves GMM replay",
        "gmm_grc",
        "gmm",
        "miou_all_last",
    ),
    (
        "Dynamic Adjustment and GRC together improve GMM replay",
        "gmm_da_grc",
        "gmm",
        "miou_all_last",
    ),
    (
        "the full method (GMM + DA + GRC) beats single-prototype replay",
        "gmm_da_grc",
        "prototype",
        "miou_all_last",
    ),
]
METRIC_TEXT = {
    "miou_all_last": "mIoU over all 8 classes after the last step",
    "miou_old_last": "mIoU over the old classes (1-7) after the last step",
}


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim: paired t-test (alpha 0.05) over the seeds of the per-seed rows.

    ``converged`` is true when every training run behind both compared methods (and the
    shared base models) is flat (:func:`flat`; the ``converged_fraction`` rows are 1).
    With fewer than 5 seeds a resolved difference is still reported, but never decisive
    (the issue asks for >= 5), and the ``why`` says so.
    """
    seeds = [s for s in doc["machine"]["seeds"] if str(s) in doc.get("runs", {})]
    if not seeds:
        return []
    out = []
    have = {r["case"] for r in doc["rows"]}
    base_flat = row_value(doc, "base", "converged_fraction") == 1.0
    for claim, ours, base, metric in CLAIMS:
        if ours not in have or base not in have:
            continue  # a run without one of the compared methods (--methods)
        conv = (
            base_flat
            and row_value(doc, ours, "converged_fraction") == 1.0
            and row_value(doc, base, "converged_fraction") == 1.0
        )
        few = len(seeds) < 5
        v = seed_verdict(
            claim,
            doc,
            metric=metric,
            ours=ours,
            baseline=base,
            higher_is_better=True,
            converged=conv,
            seeds=seeds,
            note=(
                f"only {len(seeds)} seeds (< 5): not decisive"
                if few
                else "every training run flat"
                if conv
                else "not every training run flat"
            ),
        )
        v["metric"] = METRIC_TEXT[metric]
        if few:
            v["decisive"] = False
        out.append(verdict_entry(**v))
    return out
