"""The verdicts of ``run.py``: the paper's central claims, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim; ``run.py --verdicts-only JSON`` re-derives
them. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import math
import re

import _common
import numpy as np
from scipy import stats

__all__ = [
    "AGREE_FACTOR",
    "agreement_p",
    "verdicts",
]


#: "MD agrees with i.i.d.": the MD JS at most this multiple of the i.i.d. JS (issue 28).
AGREE_FACTOR = 1.5


_TEST = {
    "reproduced": "TOST equivalence test of log(MD / i.i.d.) within +-log 1.5",
    "contradicted": "one-sided t-test of |log(MD / i.i.d.)| > log 1.5",
}


def agreement_p(ratios: list[float], verdict: str) -> float | None:
    """The p-value behind the agreement rule's ``verdict`` (``None`` when undecided or
    with fewer than two seeds).

    Reproduced: two one-sided t-tests (TOST) that the mean of ``log(ratio)`` lies inside
    ``(-log f, log f)`` with ``f`` = :data:`AGREE_FACTOR` (the larger of the two
    p-values). Contradicted: a one-sided t-test that the mean of ``|log(ratio)|``
    exceeds ``log f``.
    """
    if verdict == "not decided" or len(ratios) < 2:
        return None
    logs = np.log(np.asarray(ratios, dtype=float))
    bound = math.log(AGREE_FACTOR)
    if verdict == "reproduced":
        low = stats.ttest_1samp(logs, -bound, alternative="greater").pvalue
        high = stats.ttest_1samp(logs, bound, alternative="less").pvalue
        return float(max(low, high))
    return float(stats.ttest_1samp(np.abs(logs), bound, alternative="greater").pvalue)


def verdicts(doc: dict) -> list[dict]:
    """The paper's central claims, by rules applied to the run's rows (issue 41).

    Per seed, the JS divergence of MD with the learned forces and of i.i.d. samples
    (Mueller-Brown at the paper's budget: ScoreMD's JS definition; alanine: phi/psi JS),
    for the models without FP (``plain`` / ``moe``) and with it (``fp`` / ``both``):

    * without FP, MD is worse than i.i.d.: MD JS vs i.i.d. JS of the same models,
      :func:`_common.decide_verdict` over the paired seeds (a run with one seed: not
      decided);
    * with FP, MD agrees with i.i.d.: reproduced when MD JS is within a factor
      :data:`AGREE_FACTOR` of the i.i.d. JS (either way) in every seed, contradicted when
      in none, not decided otherwise;
    * FP improves MD: MD JS with FP vs without, paired over seeds.

    A pair of variants counts as converged when every one of its cases has
    ``train_flat == 1`` (the last stage's loss flat over its final epochs,
    ``_energy_diffusion_paper.last_stage_flatness``); runs that did not record it (before the rule)
    are not converged, so not decisive. The agreement rule is decisive when it is
    unanimous, converged, over at least :data:`_common.MIN_DECISIVE_SEEDS` seeds and its
    test (:func:`agreement_p`) gives p < 0.05.
    A JSON of neither kind (the superseded small run) gets no verdicts.
    """
    cases = {r["case"] for r in doc["rows"]}
    val = {(r["case"], r["metric"]): r["value"] for r in doc["rows"]}
    if any(c.startswith("mb_paper/") for c in cases):
        pairs = [(a, b) for a, b in (("plain", "fp"), ("moe", "both")) if f"mb_paper/{a}" in cases]
        metric = ("md_js_scoremd", "iid_js_scoremd")

        def seeds(v):
            return sorted(
                int(c.rsplit("seed", 1)[1]) for c in cases if c.startswith(f"mb_paper/{v}/seed")
            )

        def case(v, s):
            return f"mb_paper/{v}/seed{s}"

        where = "Mueller-Brown"
    elif any(c.startswith("aldp/") for c in cases):
        heavy = any(re.fullmatch(r"aldp/moe_heavy_seed\d+", c) for c in cases)
        pairs = [("moe_heavy", "both_heavy")] if heavy else [("moe", "both")]
        metric = ("md_js", "iid_js")

        def seeds(v):
            found = (re.fullmatch(rf"aldp/{v}_seed(\d+)", c) for c in cases)
            return sorted(int(m.group(1)) for m in found if m)

        def case(v, s):
            return f"aldp/{v}_seed{s}"

        where = "alanine dipeptide"
    else:
        return []
    md, iid = metric
    out = []
    for plain, fp in pairs:
        ss = seeds(plain)
        if not ss or not seeds(fp):  # a partial run, or one side not run
            continue
        md_plain = [val[(case(plain, s), md)] for s in ss]
        iid_plain = [val[(case(plain, s), iid)] for s in ss]
        md_fp = [val[(case(fp, s), md)] for s in seeds(fp)]
        iid_fp = [val[(case(fp, s), iid)] for s in seeds(fp)]
        tag = f"{where}, {plain} / {fp}"
        flat = [val.get((case(v, s), "train_flat")) for v in (plain, fp) for s in seeds(v)]
        converged = bool(flat) and all(f == 1.0 for f in flat)
        for claim, ours, base, name in (
            (
                "without FP, MD is worse than i.i.d. sampling",
                md_plain,
                iid_plain,
                f"i.i.d. samples of the same {plain} models",
            ),
            ("FP improves MD", md_fp, md_plain, f"MD without FP ({plain})"),
        ):
            if len(ss) >= 2 and len(ours) == len(base):
                out.append(
                    _common.decide_verdict(
                        f"{claim} ({tag})",
                        metric=md,
                        ours=ours,
                        baseline=name,
                        baseline_values=base,
                        higher_is_better=False,
                        converged=converged,
                        expect="better" if claim.startswith("FP") else "worse",
                    )
                )
            else:
                out.append(
                    _common.verdict_entry(
                        f"{claim} ({tag})",
                        verdict="not decided",
                        why=f"{md} {sum(ours) / len(ours):.4g} vs {sum(base) / len(base):.4g}; "
                        f"{min(len(ours), len(base))} paired seed(s) in this run: nothing to "
                        "test (a partial run, or the other seeds are in other runs)",
                        metric=md,
                        ours=sum(ours) / len(ours),
                        baseline=name,
                        baseline_value=sum(base) / len(base),
                        seeds=len(ss),
                        p_value=None,
                        converged=False,
                        decisive=False,
                    )
                )
        ratios = [m / i for m, i in zip(md_fp, iid_fp, strict=True)]
        inside = sum(1 / AGREE_FACTOR <= r <= AGREE_FACTOR for r in ratios)
        verdict = (
            "reproduced"
            if inside == len(ratios)
            else "contradicted"
            if inside == 0
            else "not decided"
        )
        p = agreement_p(ratios, verdict)
        decisive = (
            verdict != "not decided"
            and converged
            and len(ratios) >= _common.MIN_DECISIVE_SEEDS
            and p is not None
            and p < 0.05
        )
        test = "" if p is None else f"; {_TEST[verdict]} p = {p:.2g}"
        out.append(
            _common.verdict_entry(
                f"with FP, MD agrees with i.i.d. sampling ({tag})",
                verdict=verdict,
                why=f"MD / i.i.d. JS per seed {', '.join(f'{r:.3g}' for r in ratios)}: "
                f"{inside} of {len(ratios)} within a factor {AGREE_FACTOR} (rule: all reproduce, "
                f"none contradict){test}",
                metric=f"{md} / {iid}",
                ours=max(ratios),
                baseline=f"agreement within {AGREE_FACTOR}x",
                baseline_value=AGREE_FACTOR,
                seeds=len(ratios),
                p_value=p,
                converged=converged,
                decisive=decisive,
            )
        )
    return out
