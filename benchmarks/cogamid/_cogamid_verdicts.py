"""The verdicts of ``run.py``: one per claim of CoGaMiD, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim; ``run.py --verdicts-only JSON`` re-derives
them. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from _common import (
    decide_verdict,
    difference_verdict,
    row_value,
    summary_verdict,
)

__all__ = [
    "verdicts",
]


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the paper, by rules applied to the run's rows (issue 41).

    Method comparisons use the per-seed last-step mIoU rows (``<method>/seed<N>``) in
    :func:`_common.decide_verdict` (paired t-test, alpha 0.05; seed ``N`` of every method
    shares the base model). Density claims and the multimodal-vs-unimodal comparison have
    only means and population standard deviations over seeds: Welch's t-test from them
    (:func:`_common.summary_verdict`, ``ddof=0``), except GMM vs one Gaussian, whose per-seed
    gain is stored with its deviation: the paired test from it
    (:func:`_common.difference_verdict`).

    * feature replay prevents forgetting: GMM K=3 replay vs fine-tuning;
    * a GMM describes the class features better than a prototype, and than one Gaussian
      (held-out log-likelihood per dimension, multimodal world);
    * GMM replay beats prototype replay (the main claim), and K = 3 beats K = 1;
    * the gain comes from multimodal classes: the GMM-minus-prototype gap is larger in the
      multimodal world than in the unimodal control;
    * Dynamic Adjustment and GRC improve GMM replay (where the run has them).

    Fixed iteration budgets, no validation plateau: nothing is converged or decisive.
    """
    seeds = doc["machine"]["seeds"]
    n = len(seeds)

    def last(method):
        return [row_value(doc, f"{method}/seed{s}", "miou_all_last") for s in seeds]

    def compare(claim, ours, base, note=""):
        return decide_verdict(
            claim,
            metric="last-step mIoU (all classes)",
            ours=last(ours),
            baseline=base,
            baseline_values=last(base),
            higher_is_better=True,
            converged=False,
            note=note,
        )

    def stats(case, metric):
        return (row_value(doc, case, metric), row_value(doc, case, f"{metric}_std"), n)

    def density(claim, ours, base):
        return summary_verdict(
            claim,
            metric="held-out log-likelihood per dimension (nat)",
            ours=stats(f"heldout/{ours}", "loglik_per_dim"),
            baseline=base,
            baseline_stats=stats(f"heldout/{base}", "loglik_per_dim"),
            higher_is_better=True,
            converged=False,
            ddof=0,
        )

    out = [
        compare("replaying stored features prevents forgetting", "gmm_k3", "finetune"),
        density(
            "a Gaussian mixture fits the class features better than a prototype",
            "gmm_k3",
            "prototype",
        ),
        difference_verdict(
            "a Gaussian mixture fits the class features better than one Gaussian",
            metric="held-out log-likelihood per dimension (nat)",
            ours=row_value(doc, "heldout/gmm_k3", "loglik_per_dim"),
            baseline="gaussian_k1",
            baseline_value=row_value(doc, "heldout/gaussian_k1", "loglik_per_dim"),
            difference=stats("heldout/gmm_k3", "loglik_gain_vs_gaussian_k1"),
            higher_is_better=True,
            converged=False,
            ddof=0,
        ),
        compare("GMM replay gives higher mIoU than prototype replay", "gmm_k3", "prototype"),
        compare("three mixture components beat one", "gmm_k3", "gmm_k1"),
        summary_verdict(
            "the gain of GMM replay comes from multimodal classes (gap larger than in the "
            "unimodal control)",
            metric="last-step mIoU gap GMM K=3 minus prototype",
            ours=stats("gmm_k3", "miou_all_last_gap_vs_prototype"),
            baseline="the same gap with unimodal classes",
            baseline_stats=stats("unimodal/gmm_k3", "miou_all_last_gap_vs_prototype"),
            higher_is_better=True,
            converged=False,
            ddof=0,
        ),
    ]
    if any(r["case"] == f"gmm_k3_da_grc/seed{seeds[0]}" for r in doc["rows"]):
        out.append(
            compare(
                "Dynamic Adjustment and GRC improve GMM replay",
                "gmm_k3_da_grc",
                "gmm_k3",
                note="both in this package's reading of the unpublished formulas",
            )
        )
    return out
