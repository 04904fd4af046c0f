"""The verdicts of ``run.py``: issue 28's target and the model comparison, by fixed rules.

:func:`verdicts` reads a result document (``rows``, as ``run.py`` writes it) and returns
one verdict entry per claim (``_common.verdict_entry``, ``_common.decide_verdict``);
``run.py --verdicts-only JSON`` re-derives them. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from _common import (
    decide_verdict,
    verdict_entry,
)

__all__ = [
    "DEMO_TARGET_JS",
    "verdicts",
]


#: Issue 28's target for the JS divergence ``make demo`` prints (nats).
DEMO_TARGET_JS = 0.04


def verdicts(doc: dict) -> list[dict]:
    """Issue 28's target and the model comparison, by rules applied to the rows.

    * the demo's MD JS is at most :data:`DEMO_TARGET_JS`: reproduced when every MD seed of
      the evaluated model (``after seed <s>``) is at or below it, contradicted when every
      seed is above it, not decided otherwise (a target, not a test: never decisive);
    * the evaluated model beats the model before it, in MD JS and in i.i.d. JS where both
      were run: :func:`_common.decide_verdict` over the paired seeds (lower is better; the
      models are not trained to convergence, so not decisive).

    A JSON without ``after seed`` MD rows (the floors, a ``--label before`` run) has none.
    """

    def seeds_of(label, metric):
        out = {}
        for r in doc["rows"]:
            case = r["case"].split()
            if len(case) == 3 and case[0] == label and case[1] == "seed" and r["metric"] == metric:
                out[int(case[2])] = r["value"]
        return out

    out = []
    md = seeds_of("after", "md_js")
    if md:
        vals = [md[s] for s in sorted(md)]
        below = sum(v <= DEMO_TARGET_JS for v in vals)
        verdict = (
            "reproduced" if below == len(vals) else "contradicted" if below == 0 else "not decided"
        )
        out.append(
            verdict_entry(
                f"the demo's MD JS is at most {DEMO_TARGET_JS} (issue 28)",
                verdict=verdict,
                why=f"MD JS per seed {', '.join(f'{v:.4g}' for v in vals)}: {below} of "
                f"{len(vals)} seeds at or below the target (rule: all reproduce, none "
                "contradict); a target, not a paired test",
                metric="md_js",
                ours=max(vals),
                baseline="issue 28's target",
                baseline_value=DEMO_TARGET_JS,
                seeds=len(vals),
                p_value=None,
                converged=False,
                decisive=False,
            )
        )
    for metric, what in (("md_js", "MD"), ("iid_js", "i.i.d.")):
        after, before = seeds_of("after", metric), seeds_of("before", metric)
        common = sorted(set(after) & set(before))
        if len(common) >= 2:
            out.append(
                decide_verdict(
                    f"the model beats the one shipped before it ({what} JS)",
                    metric=metric,
                    ours=[after[s] for s in common],
                    baseline="the model shipped before",
                    baseline_values=[before[s] for s in common],
                    higher_is_better=False,
                    converged=False,
                )
            )
    return out
