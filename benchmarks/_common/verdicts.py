"""Verdicts on a paper's claims (issue 41): the checked entry and the paired rule.

:func:`verdict_entry` makes one entry of a results JSON's ``verdicts`` list and checks it
against the rules (a verdict of :data:`VERDICTS`; decisive only when converged and resolved
by a paired test); :func:`paired_test` compares per-seed values and :func:`decide_verdict`
turns that comparison into a verdict by a fixed rule. A seed comparison is decisive only
on at least :data:`MIN_DECISIVE_SEEDS` seeds (the issues' rule: >= 5, paired).

A claim "ours is better" that the test cannot resolve is not always undecided: when the
95 % confidence interval of the gain lies wholly below the smallest gain worth claiming
(:data:`MIN_EFFECT` of the baseline's mean; :func:`margin_test`), the seeds *do* resolve
it, against the claim: whatever the true gain is, it is smaller than that. This is the
standard non-superiority reading of a confidence interval; it can only ever contradict.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "MIN_DECISIVE_SEEDS",
    "MIN_EFFECT",
    "VERDICTS",
    "VERDICT_KEYS",
    "decide_verdict",
    "few_seeds_note",
    "holm",
    "margin_test",
    "paired_test",
    "verdict_entry",
]


#: The three verdicts a claim can get (issue 41).
VERDICTS = ("reproduced", "contradicted", "not decided")
#: The keys of one entry of a JSON's top-level ``verdicts`` list, in order.
VERDICT_KEYS = (
    "claim",
    "verdict",
    "decisive",
    "metric",
    "ours",
    "baseline",
    "baseline_value",
    "seeds",
    "p_value",
    "converged",
    "why",
)
_TESTS = ("t", "wilcoxon", "sign")
#: The fewest seeds on which a comparison over seeds can be decisive (a p-value of two or
#: three seeds resolves nothing the seed spread can be trusted to show).
MIN_DECISIVE_SEEDS = 5
#: The smallest gain a claim "ours is better than the baseline" is taken to mean, as a
#: fraction of the baseline's mean (1 %): a paired 95 % interval of the gain wholly below
#: it contradicts the claim (:func:`margin_test`). One value for every benchmark, fixed
#: before the runs were read, so that no margin is tuned to a verdict.
MIN_EFFECT = 0.01


def few_seeds_note(n: int, min_seeds: int = MIN_DECISIVE_SEEDS) -> str:
    """The ``why`` clause of a resolved comparison on too few seeds to be decisive ("" when
    enough); the rules add it only where it is what keeps a verdict from being decisive."""
    if n >= min_seeds:
        return ""
    return f"only {n} seed{'s' if n != 1 else ''} (decisive needs >= {min_seeds})"


def _finite(x: object) -> bool:
    return (
        isinstance(x, int | float) and not isinstance(x, bool) and x == x and abs(x) != float("inf")
    )


def paired_test(ours: Sequence[float], baseline: Sequence[float]) -> dict:
    """Paired comparison of per-seed values (seed ``i`` of ``ours`` with that of ``baseline``).

    Returns ``n``, ``mean_diff`` (mean of ``ours - baseline``), ``wins`` / ``losses`` /
    ``ties`` (seeds where ``ours`` is above / below / equal) and the two-sided p-values of
    the paired t-test (``t``), the Wilcoxon signed-rank test (``wilcoxon``, exact for small
    ``n``) and the sign test (``sign``, binomial on wins vs losses, ties left out). With
    three seeds the Wilcoxon and sign tests cannot go below 0.25: only the t-test can
    resolve a difference there. Differences that are all zero give p = 1 everywhere.
    """
    from scipy import stats

    a = [float(x) for x in ours]
    b = [float(x) for x in baseline]
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(
            f"paired_test needs two equally long per-seed lists of at least 2 values "
            f"(got {len(a)} and {len(b)}); pass the same seeds in the same order"
        )
    if not all(_finite(x) for x in a + b):
        raise ValueError("paired_test got a non-finite value: drop or fix the diverged seed")
    diff = [x - y for x, y in zip(a, b, strict=True)]
    wins = sum(d > 0 for d in diff)
    losses = sum(d < 0 for d in diff)
    out = {
        "n": len(diff),
        "mean_diff": sum(diff) / len(diff),
        "wins": wins,
        "losses": losses,
        "ties": len(diff) - wins - losses,
    }
    if wins + losses == 0:
        return {**out, "t": 1.0, "wilcoxon": 1.0, "sign": 1.0}
    if max(diff) == min(diff):
        # Identical non-zero differences: no spread, the t statistic is infinite.
        t_p = 0.0
    else:
        t_p = float(stats.ttest_rel(a, b).pvalue)
    w_p = float(stats.wilcoxon(diff, zero_method="wilcox").pvalue)
    s_p = float(stats.binomtest(wins, wins + losses, 0.5).pvalue)
    return {**out, "t": t_p, "wilcoxon": w_p, "sign": s_p}


def holm(p: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values: a family of tests at one family-wise level.

    Parameters
    ----------
    p : sequence of float, shape (m,)
        The tests' p-values.

    Returns
    -------
    list of float, shape (m,)
        The adjusted p-values, in the input's order: the ``k``-th smallest is
        ``max_{j <= k} min(1, (m - j + 1) p_(j))``; a test is rejected at family-wise
        level ``alpha`` when its adjusted p is below ``alpha``.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p = [float(x) for x in p]
    adj = [0.0] * len(p)
    running = 0.0
    for rank, i in enumerate(sorted(range(len(p)), key=p.__getitem__)):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adj[i] = running
    return adj


def margin_test(mean_gain: float, se: float, df: float, delta: float, alpha: float = 0.05) -> dict:
    """Is the gain smaller than ``delta``? The t interval of a mean gain against a margin.

    ``mean_gain`` is the mean gain in the claim's direction (positive: the claim holds),
    ``se`` its standard error and ``df`` the t distribution's degrees of freedom (``n - 1``
    for a paired test; Welch-Satterthwaite for two samples). Returns ``low`` and ``high``,
    the two-sided ``1 - alpha`` confidence interval of the gain; ``p``, the one-sided
    p-value of the null hypothesis "the gain is at least ``delta``"; and ``below``, true
    when the whole interval lies below ``delta`` (then ``p < alpha / 2``). An ``se`` of 0
    (identical differences) gives the point itself as the interval.
    """
    from scipy import stats

    if not (_finite(mean_gain) and _finite(se) and se >= 0 and _finite(delta) and df > 0):
        raise ValueError(
            f"margin_test needs a finite gain, se >= 0, delta and df > 0 "
            f"(got {mean_gain!r}, {se!r}, {delta!r}, {df!r})"
        )
    if se == 0:
        low = high = float(mean_gain)
        p = 0.0 if mean_gain < delta else 1.0
    else:
        half = float(stats.t.ppf(1 - alpha / 2, df)) * se
        low, high = float(mean_gain) - half, float(mean_gain) + half
        p = float(stats.t.cdf((mean_gain - delta) / se, df))
    return {"low": low, "high": high, "p": p, "below": high < delta}


def margin_clause(test: dict, delta: float, margin: float, name: str) -> str:
    """The ``why`` clause of a claim contradicted by :func:`margin_test` (``test`` its result)."""
    return (
        f"no gain resolved, but its 95 % interval {test['low']:.3g} to {test['high']:.3g} lies "
        f"below the smallest gain the claim needs ({margin:.0%} of the baseline, {delta:.3g}): "
        f"one-sided {name} of a gain >= that, p = {test['p']:.2g}"
    )


def verdict_entry(
    claim: str,
    *,
    verdict: str,
    why: str,
    metric: str,
    ours: float,
    baseline: str,
    baseline_value: float | None,
    seeds: int,
    p_value: float | None,
    converged: bool,
    decisive: bool,
    alpha: float = 0.05,
) -> dict:
    """One entry of a results JSON's ``verdicts`` list, checked against the rules of issue 41.

    ``verdict`` is ``"reproduced"``, ``"contradicted"`` or ``"not decided"``. ``decisive``
    may be true only when the verdict is not ``"not decided"``, ``converged`` is true (our
    models and the baseline trained to a flat validation curve) and the paired test
    resolves the difference (``p_value < alpha``). ``ours`` and ``baseline_value`` are the
    compared figures of ``metric`` (``baseline_value`` may be ``None`` when the claim has
    no baseline); ``seeds`` is the number of paired seeds behind them.

    Raises
    ------
    ValueError
        When a field is missing, of the wrong kind, or ``decisive`` breaks the rule above.
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
    for name, text in (("claim", claim), ("why", why), ("metric", metric), ("baseline", baseline)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"verdict {name} must be a non-empty string, got {text!r}")
    if not _finite(ours):
        raise ValueError(f"verdict 'ours' must be a finite number, got {ours!r}")
    if baseline_value is not None and not _finite(baseline_value):
        raise ValueError(
            f"verdict baseline_value must be a finite number or None, got {baseline_value!r}"
        )
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(
            f"verdict seeds must be a positive int (the number of seeds), got {seeds!r}"
        )
    if p_value is not None and not (_finite(p_value) and 0.0 <= p_value <= 1.0):
        raise ValueError(f"verdict p_value must be in [0, 1] or None, got {p_value!r}")
    for name, flag in (("converged", converged), ("decisive", decisive)):
        if not isinstance(flag, bool):
            raise ValueError(f"verdict {name} must be True or False, got {flag!r}")
    if decisive:
        if verdict == "not decided":
            raise ValueError(f"{claim!r}: a 'not decided' verdict cannot be decisive")
        if not converged:
            raise ValueError(f"{claim!r}: decisive needs converged models; set decisive=False")
        if p_value is None or p_value >= alpha:
            raise ValueError(
                f"{claim!r}: decisive needs the paired test to resolve the difference "
                f"(p_value {p_value!r} is not < {alpha}); set decisive=False"
            )
    return {
        "claim": claim,
        "verdict": verdict,
        "decisive": decisive,
        "metric": metric,
        "ours": float(ours),
        "baseline": baseline,
        "baseline_value": None if baseline_value is None else float(baseline_value),
        "seeds": seeds,
        "p_value": None if p_value is None else float(p_value),
        "converged": converged,
        "why": why,
    }


def decide_verdict(
    claim: str,
    *,
    metric: str,
    ours: Sequence[float],
    baseline: str,
    baseline_values: Sequence[float],
    higher_is_better: bool,
    converged: bool,
    expect: str = "better",
    test: str = "t",
    alpha: float = 0.05,
    note: str = "",
    min_seeds: int = MIN_DECISIVE_SEEDS,
    margin: float | None = MIN_EFFECT,
) -> dict:
    """The verdict on a claim "ours is ``expect`` than the baseline", by a fixed rule.

    ``ours`` and ``baseline_values`` are per-seed values of ``metric`` (same seeds, same
    order). The rule: run :func:`paired_test`; if its ``test`` p-value (``"t"``,
    ``"wilcoxon"`` or ``"sign"``) is at least ``alpha`` the claim is ``"not decided"``;
    otherwise it is ``"reproduced"`` when ours is on the side the claim expects
    (``expect="better"`` or ``"worse"``, judged by the mean difference and
    ``higher_is_better``) and ``"contradicted"`` when not. The verdict is decisive when the
    test resolves it, ``converged`` is true and there are at least ``min_seeds`` seeds
    (:data:`MIN_DECISIVE_SEEDS`). An unresolved t-test is read once more against
    ``margin`` (default :data:`MIN_EFFECT`; ``None`` turns it off): when the 95 % interval of
    the paired gain in the claim's direction lies wholly below ``margin`` times the
    baseline's mean magnitude (:func:`margin_test`), the claim is ``"contradicted"`` and
    ``p_value`` is that one-sided test's. Returns :func:`verdict_entry`'s dict, with a
    ``why`` that states the means, the seed count, the wins and the p-value (plus ``note``).
    """
    if expect not in ("better", "worse"):
        raise ValueError(f"expect must be 'better' or 'worse', got {expect!r}")
    if test not in _TESTS:
        raise ValueError(f"test must be one of {_TESTS}, got {test!r}")
    res = paired_test(ours, baseline_values)
    p = res[test]
    ours_mean = sum(ours) / len(ours)
    base_mean = sum(baseline_values) / len(baseline_values)
    better = res["mean_diff"] > 0 if higher_is_better else res["mean_diff"] < 0
    in_favour = res["wins"] if higher_is_better else res["losses"]
    if p >= alpha:
        verdict = "not decided"
    elif better == (expect == "better"):
        verdict = "reproduced"
    else:
        verdict = "contradicted"
    name = {"t": "t-test", "wilcoxon": "Wilcoxon test", "sign": "sign test"}[test]
    why = (
        f"{metric} {ours_mean:.4g} vs {base_mean:.4g} ({'higher' if higher_is_better else 'lower'}"
        f" is better); ours better in {in_favour} of {res['n']} paired seeds; paired {name} "
        f"p = {p:.2g} ({'<' if p < alpha else '>='} {alpha})"
    )
    if p >= alpha and margin is not None and test == "t":
        sign = 1.0 if higher_is_better == (expect == "better") else -1.0
        gain = [sign * (float(x) - float(y)) for x, y in zip(ours, baseline_values, strict=True)]
        n = len(gain)
        mean_gain = sum(gain) / n
        sd = (sum((g - mean_gain) ** 2 for g in gain) / (n - 1)) ** 0.5
        delta = margin * abs(base_mean)
        mt = margin_test(mean_gain, sd / n**0.5, n - 1, delta, alpha)
        if mt["below"]:
            verdict, p = "contradicted", mt["p"]
            why = f"{why}; {margin_clause(mt, delta, margin, 'paired t-test')}"
    why = f"{why}; {'converged' if converged else 'not trained to convergence'}"
    few = few_seeds_note(res["n"], min_seeds) if converged and p < alpha else ""
    why = "; ".join(x for x in (why, few, note) if x)
    return verdict_entry(
        claim,
        verdict=verdict,
        why=why,
        metric=metric,
        ours=ours_mean,
        baseline=baseline,
        baseline_value=base_mean,
        seeds=res["n"],
        p_value=p,
        converged=converged,
        decisive=converged and p < alpha and not few,
        alpha=alpha,
    )
