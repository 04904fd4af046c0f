"""The verdicts of ``run.py``: the paper's central claims, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim; ``run.py --verdicts-only JSON`` re-derives
them. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import re

import _common

__all__ = [
    "AGREE_FACTOR",
    "verdicts",
]


#: "MD agrees with i.i.d.": the MD JS at most this multiple of the i.i.d. JS (issue 28).
AGREE_FACTOR = 1.5


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

    Training has a fixed budget and no validation plateau is recorded: not decisive.
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
        md_plain = [val[(case(plain, s), md)] for s in ss]
        iid_plain = [val[(case(plain, s), iid)] for s in ss]
        md_fp = [val[(case(fp, s), md)] for s in seeds(fp)]
        iid_fp = [val[(case(fp, s), iid)] for s in seeds(fp)]
        tag = f"{where}, {plain} / {fp}"
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
                        converged=False,
                        expect="better" if claim.startswith("FP") else "worse",
                    )
                )
            else:
                out.append(
                    _common.verdict_entry(
                        f"{claim} ({tag})",
                        verdict="not decided",
                        why=f"{md} {sum(ours) / len(ours):.4g} vs {sum(base) / len(base):.4g}; "
                        "one seed in this run: nothing to test (the other seeds are in "
                        "other runs)",
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
        out.append(
            _common.verdict_entry(
                f"with FP, MD agrees with i.i.d. sampling ({tag})",
                verdict=verdict,
                why=f"MD / i.i.d. JS per seed {', '.join(f'{r:.3g}' for r in ratios)}: "
                f"{inside} of {len(ratios)} within a factor {AGREE_FACTOR} (rule: all reproduce, "
                "none contradict)",
                metric=f"{md} / {iid}",
                ours=max(ratios),
                baseline=f"agreement within {AGREE_FACTOR}x",
                baseline_value=AGREE_FACTOR,
                seeds=len(ratios),
                p_value=None,
                converged=False,
                decisive=False,
            )
        )
    return out
