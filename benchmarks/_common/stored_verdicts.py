"""Verdicts from what a stored run kept, when the per-seed pairs are not at hand.

From an interval (:func:`interval_verdict`), from means and deviations over seeds
(:func:`summary_verdict`), from the stored paired differences (:func:`difference_verdict`),
and from the rows of a results JSON (:func:`seed_verdict`: per-seed rows when stored, else
the summaries; :func:`row_value` reads one row). Every verdict is a
:func:`~_common.verdicts.verdict_entry`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .verdicts import (
    MIN_EFFECT,
    decide_verdict,
    few_seeds_note,
    margin_clause,
    margin_test,
    verdict_entry,
)

__all__ = [
    "difference_verdict",
    "interval_verdict",
    "row_value",
    "seed_values",
    "seed_verdict",
    "summary_verdict",
]


def interval_verdict(
    claim: str,
    *,
    metric: str,
    ours: float,
    low: float,
    high: float,
    baseline: str,
    baseline_value: float,
    higher_is_better: bool,
    seeds: int,
    converged: bool,
    level: str = "95 %",
    note: str = "",
) -> dict:
    """The verdict on "ours is better than ``baseline_value``" from an interval, by a fixed rule.

    For a run that stores an interval of ``ours`` (``low`` to ``high``, e.g. a bootstrap
    interval) instead of per-seed values: ``"reproduced"`` when the whole interval lies on the
    better side of ``baseline_value`` (``higher_is_better`` says which), ``"contradicted"``
    when it lies wholly on the worse side, ``"not decided"`` when it contains the baseline.
    No paired test stands behind it (``p_value`` is ``None``), so it is never decisive.
    Returns :func:`verdict_entry`'s dict; ``why`` states the figures (plus ``note``).
    """
    if not (low <= ours <= high):
        raise ValueError(f"interval [{low}, {high}] does not contain ours = {ours}")
    above, below = low > baseline_value, high < baseline_value
    better, worse = (above, below) if higher_is_better else (below, above)
    verdict = "reproduced" if better else "contradicted" if worse else "not decided"
    where = "lies above" if above else "lies below" if below else "contains"
    why = (
        f"{metric} {ours:.4g}, {level} interval {low:.4g}-{high:.4g} "
        f"{where} the {baseline} value {baseline_value:.4g}"
        f" ({'higher' if higher_is_better else 'lower'} is better); "
        f"{'converged' if converged else 'not trained to convergence'}"
    )
    if note:
        why = f"{why}; {note}"
    return verdict_entry(
        claim,
        verdict=verdict,
        why=why,
        metric=metric,
        ours=ours,
        baseline=baseline,
        baseline_value=baseline_value,
        seeds=seeds,
        p_value=None,
        converged=converged,
        decisive=False,
    )


def summary_verdict(
    claim: str,
    *,
    metric: str,
    ours: tuple[float, float, int],
    baseline: str,
    baseline_stats: tuple[float, float, int],
    higher_is_better: bool,
    converged: bool,
    ddof: int,
    expect: str = "better",
    alpha: float = 0.05,
    note: str = "",
    margin: float | None = MIN_EFFECT,
) -> dict:
    """The verdict on "ours is ``expect`` than the baseline" from stored means and deviations.

    For runs that stored ``(mean, sd, n)`` over seeds but not the per-seed values:
    Welch's two-sample t-test from these summaries (``scipy.stats.ttest_ind_from_stats``;
    ``ddof`` says how the stored sd was computed, 0 for ``numpy.std``, 1 for
    ``statistics.stdev``; a baseline with sd 0, e.g. a deterministic one, makes it a
    one-sample test). Unpaired, so it ignores what seed ``i`` of both sides shares: it
    resolves less than a paired test would, not more. The rule is :func:`decide_verdict`'s:
    "not decided" at ``p >= alpha``, else reproduced or contradicted by the side of the
    mean difference; decisive only when converged and resolved; and an unresolved
    difference whose Welch 95 % interval lies wholly below ``margin`` of the baseline's
    mean (:func:`~_common.verdicts.margin_test`) contradicts the claim.
    """
    from scipy import stats

    if expect not in ("better", "worse"):
        raise ValueError(f"expect must be 'better' or 'worse', got {expect!r}")
    (m1, s1, n1), (m2, s2, n2) = ours, baseline_stats
    if min(n1, n2) < 2 or (s1 == 0 and s2 == 0):
        raise ValueError("summary_verdict needs n >= 2 per side and a non-zero deviation")

    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (numpy.std) or 1 (statistics.stdev), got {ddof!r}")

    def sample_sd(sd, n):  # the sample standard deviation (ddof 1) the test needs
        return sd * math.sqrt(n / (n - 1)) if ddof == 0 else sd

    p = float(
        stats.ttest_ind_from_stats(
            m1, sample_sd(s1, n1), n1, m2, sample_sd(s2, n2), n2, equal_var=False
        ).pvalue
    )
    better = m1 > m2 if higher_is_better else m1 < m2
    if p >= alpha:
        verdict = "not decided"
    elif better == (expect == "better"):
        verdict = "reproduced"
    else:
        verdict = "contradicted"
    why = (
        f"{metric} {m1:.4g} (sd {s1:.2g}, n {n1}) vs {m2:.4g} (sd {s2:.2g}, n {n2}) "
        f"({'higher' if higher_is_better else 'lower'} is better); Welch t-test from the "
        f"stored means and deviations p = {p:.2g} ({'<' if p < alpha else '>='} {alpha})"
    )
    if p >= alpha and margin is not None:
        v1, v2 = sample_sd(s1, n1) ** 2 / n1, sample_sd(s2, n2) ** 2 / n2
        df = (v1 + v2) ** 2 / (
            (v1**2 / (n1 - 1) if v1 else 0.0) + (v2**2 / (n2 - 1) if v2 else 0.0)
        )
        sign = 1.0 if higher_is_better == (expect == "better") else -1.0
        delta = margin * abs(m2)
        mt = margin_test(sign * (m1 - m2), math.sqrt(v1 + v2), df, delta, alpha)
        if mt["below"]:
            verdict, p = "contradicted", mt["p"]
            why = f"{why}; {margin_clause(mt, delta, margin, 'Welch t-test')}"
    why = f"{why}; {'converged' if converged else 'not trained to convergence'}"
    few = few_seeds_note(min(n1, n2)) if converged and p < alpha else ""
    return verdict_entry(
        claim,
        verdict=verdict,
        why="; ".join(x for x in (why, few, note) if x),
        metric=metric,
        ours=m1,
        baseline=baseline,
        baseline_value=m2,
        seeds=min(n1, n2),
        p_value=p,
        converged=converged,
        decisive=converged and p < alpha and not few,
        alpha=alpha,
    )


def difference_verdict(
    claim: str,
    *,
    metric: str,
    ours: float,
    baseline: str,
    baseline_value: float,
    difference: tuple[float, float, int],
    higher_is_better: bool,
    converged: bool,
    ddof: int,
    alpha: float = 0.05,
    note: str = "",
    margin: float | None = MIN_EFFECT,
) -> dict:
    """The verdict on "ours is better than the baseline" from the stored paired differences.

    For runs that stored, per claim, the mean and standard deviation over seeds of the
    per-seed difference ``ours - baseline`` (``difference = (mean, sd, n)``, the sd computed
    with ``ddof``): the paired t-test is the one-sample t-test of that mean against zero,
    which these summaries determine exactly. The rule is :func:`decide_verdict`'s, the
    ``margin`` reading included.
    """
    from scipy import stats

    mean, sd, n = difference
    if n < 2 or ddof not in (0, 1):
        raise ValueError("difference_verdict needs n >= 2 and ddof 0 or 1")
    sd1 = sd * math.sqrt(n / (n - 1)) if ddof == 0 else sd
    if sd1 == 0:
        p = 1.0 if mean == 0 else 0.0
    else:
        t = mean / (sd1 / math.sqrt(n))
        p = float(2 * stats.t.sf(abs(t), n - 1))
    better = mean > 0 if higher_is_better else mean < 0
    verdict = "not decided" if p >= alpha else "reproduced" if better else "contradicted"
    why = (
        f"{metric} {ours:.4g} vs {baseline_value:.4g} "
        f"({'higher' if higher_is_better else 'lower'} is better); per-seed difference "
        f"{mean:.3g} (sd {sd:.2g}, n {n}); paired t-test from the stored differences p = "
        f"{p:.2g} ({'<' if p < alpha else '>='} {alpha})"
    )
    if p >= alpha and margin is not None:
        sign = 1.0 if higher_is_better else -1.0
        delta = margin * abs(baseline_value)
        mt = margin_test(sign * mean, sd1 / math.sqrt(n), n - 1, delta, alpha)
        if mt["below"]:
            verdict, p = "contradicted", mt["p"]
            why = f"{why}; {margin_clause(mt, delta, margin, 'paired t-test')}"
    why = f"{why}; {'converged' if converged else 'not trained to convergence'}"
    few = few_seeds_note(n) if converged and p < alpha else ""
    return verdict_entry(
        claim,
        verdict=verdict,
        why="; ".join(x for x in (why, few, note) if x),
        metric=metric,
        ours=ours,
        baseline=baseline,
        baseline_value=baseline_value,
        seeds=n,
        p_value=p,
        converged=converged,
        decisive=converged and p < alpha and not few,
        alpha=alpha,
    )


def seed_values(doc: dict, case: str, metric: str, seeds: Sequence | None = None):
    """The per-seed values of ``case``: its rows of metric ``"{metric} seed {s}"``.

    ``seeds`` defaults to the JSON's ``machine.seeds``. Returns the list in the seeds'
    order, or ``None`` when a seed has no such row or more than one.
    """
    seeds = list(doc["machine"]["seeds"] if seeds is None else seeds)
    out = []
    for s in seeds:
        found = [
            r["value"]
            for r in doc["rows"]
            if r["case"] == case and r["metric"] == f"{metric} seed {s}"
        ]
        if len(found) != 1:
            return None
        out.append(found[0])
    return out


def seed_verdict(
    claim: str,
    doc: dict,
    *,
    metric: str,
    ours: str,
    baseline: str,
    higher_is_better: bool,
    converged: bool,
    seeds: Sequence | None = None,
    expect: str = "better",
    note: str = "",
    sd_metric: str | None = None,
    ddof: int = 1,
) -> dict:
    """:func:`decide_verdict` on the per-seed rows of results JSON ``doc``, or a fallback.

    The per-seed values of case ``ours`` are its rows of metric ``"{metric} seed {s}"`` for
    every seed ``s`` of ``seeds`` (default: the JSON's ``machine.seeds``; the seed goes into
    the metric, so that a page's ``CASE | METRIC`` selectors of the means never match a
    seed's row); likewise for ``baseline``. When every one of them is stored, the
    verdict is :func:`decide_verdict`'s (paired t-test). When not (a run that stored only
    the means over seeds), and ``sd_metric`` names the rows of the standard deviation over
    the seeds (computed with ``ddof``), it is :func:`summary_verdict`'s (Welch t-test from
    the mean rows, cases ``ours`` and ``baseline``, and their sd rows). Without these, the
    verdict is "not decided", ``why`` says that a rerun is needed, and ``ours`` /
    ``baseline_value`` are the mean rows.
    """
    seeds = list(doc["machine"]["seeds"] if seeds is None else seeds)
    a, b = seed_values(doc, ours, metric, seeds), seed_values(doc, baseline, metric, seeds)
    if a is not None and b is not None and len(a) >= 2:
        return decide_verdict(
            claim,
            metric=metric,
            ours=a,
            baseline=baseline,
            baseline_values=b,
            higher_is_better=higher_is_better,
            converged=converged,
            expect=expect,
            note=note,
        )
    mean_a, mean_b = row_value(doc, ours, metric), row_value(doc, baseline, metric)
    n = len(seeds)
    sds = (0.0, 0.0)
    if sd_metric is not None:
        sds = (row_value(doc, ours, sd_metric), row_value(doc, baseline, sd_metric))
    if n >= 2 and any(sds):
        sd_a, sd_b = sds
        return summary_verdict(
            claim,
            metric=metric,
            ours=(mean_a, sd_a, n),
            baseline=baseline,
            baseline_stats=(mean_b, sd_b, n),
            higher_is_better=higher_is_better,
            converged=converged,
            ddof=ddof,
            expect=expect,
            note=note,
        )
    lack = (
        "one seed, so the difference cannot be tested"
        if n < 2
        else "rerun needed: this JSON stores no per-seed rows, so the difference cannot be tested"
    )
    why = (
        f"{metric} {mean_a:.4g} vs {mean_b:.4g} (means of {n} seeds; "
        f"{'higher' if higher_is_better else 'lower'} is better); {lack}"
    )
    return verdict_entry(
        claim,
        verdict="not decided",
        why=f"{why}; {note}" if note else why,
        metric=metric,
        ours=mean_a,
        baseline=baseline,
        baseline_value=mean_b,
        seeds=len(seeds),
        p_value=None,
        converged=converged,
        decisive=False,
    )


def row_value(doc: dict, case: str, metric: str, field: str = "value"):
    """``field`` of the one row of results JSON ``doc`` with ``case`` and ``metric``.

    Raises
    ------
    ValueError
        When no row or more than one row has that case and metric.
    """
    found = [r for r in doc["rows"] if r["case"] == case and r["metric"] == metric]
    if len(found) != 1:
        raise ValueError(f"{len(found)} rows with case {case!r} and metric {metric!r}, not one")
    return found[0][field]
