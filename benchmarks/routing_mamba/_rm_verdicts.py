"""The verdicts of ``run.py``: one per claim, from the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it); ``run.py --verdicts-only JSON`` re-derives them. A helper module: ``run.py`` imports
it.
"""

from __future__ import annotations

import math

from _common import MIN_DECISIVE_SEEDS, paired_test, seed_values, seed_verdict, verdict_entry
from _rm_plan import CLAIMED_HYBRID_SAVING, CLAIMED_RATIO, HYBRID_RATIOS, RATIOS

__all__ = [
    "CLAIMS",
    "HYBRID_SAVING_CLAIM",
    "RATIO_METRIC",
    "verdicts",
]


def _converged(doc: dict, *cases) -> bool:
    """Every run of ``cases`` met the flatness criterion."""
    done = [r for r in doc["rows"] if r["case"] in cases and r["metric"] == "converged_runs"]
    runs = len(doc["machine"]["seeds"])
    return len(done) == len(cases) and all(r["value"] == runs for r in done)


RATIO_METRIC = "dense_equivalent_ratio"


def _paired_worse(doc: dict, ours: str, baseline: str) -> tuple[float | None, bool, int]:
    """The paired t-test of ``ours`` against ``baseline`` on the seeds' final bits per byte.

    Returns ``(p, worse, n)``: the two-sided p-value (``None`` without a per-seed row for
    every seed of ``machine.seeds``), whether ``ours`` has the higher mean (worse) and the
    number of seeds.
    """
    seeds = list(doc["machine"]["seeds"])
    a, b = seed_values(doc, ours, "val_bpb"), seed_values(doc, baseline, "val_bpb")
    if a is None or b is None or len(a) < 2:
        return None, False, len(seeds)
    res = paired_test(a, b)
    return res["t"], res["mean_diff"] > 0, res["n"]


def _decided_by_test(p, worse, n, conv, side="worse", alpha=0.05) -> tuple[bool, str]:
    """Whether an interval verdict is decisive, and the ``why`` clause: the paired test
    shows ours on ``side`` (``"worse"`` for a contradicting interval, ``"better"`` for a
    reproducing one) of the model the claim compares it with (``p < alpha``), every run is
    flat and there are at least :data:`MIN_DECISIVE_SEEDS` seeds."""
    if side not in ("worse", "better"):
        raise ValueError(f"side must be 'worse' or 'better', got {side!r}")
    if p is None:
        return False, "no per-seed rows for the paired test"
    clause = f"paired t-test p = {p:.2g}"
    if worse != (side == "worse"):
        return False, clause + f" (ours not {side})"
    if p >= alpha:
        return False, clause + f" (>= {alpha})"
    if n < MIN_DECISIVE_SEEDS:
        return False, clause + f"; only {n} seeds (decisive needs >= {MIN_DECISIVE_SEEDS})"
    return conv, clause


#: The abstract's claims in its order: (claim, metric, ours, baseline). Every claim is a
#: paired seed comparison (lower bits per byte is better) except the one on
#: :data:`RATIO_METRIC`, decided by :func:`_ratio_verdict`.
CLAIMS = (
    ("RoM beats dense Mamba at equal active parameters", "val_bpb", "RoM", "dense 1x"),
    (
        f"RoM matches a dense Mamba with {CLAIMED_RATIO:g}x its active parameters",
        RATIO_METRIC,
        "RoM",
        "dense 1x-3x scaling fit",
    ),
    (
        "RoM's advantage over dense Mamba holds across context lengths (4x the training one)",
        "val_bpb_ctx4x",
        "RoM",
        "dense 1x",
    ),
    (
        "RoM beats dense in hybrid (attention + Mamba) models at equal active FLOPs",
        "val_bpb",
        "hybrid RoM",
        "hybrid dense",
    ),
)


def _ratio_verdict(doc: dict, claim: str, ours: str, baseline: str) -> dict:
    """The dense-equivalent ratio's verdict: its 95 % bootstrap interval decides."""

    def value(metric):
        found = [r["value"] for r in doc["rows"] if r["case"] == ours and r["metric"] == metric]
        return found[0] if found else None

    ratio = value(RATIO_METRIC)
    lo, hi = value(f"{RATIO_METRIC}_ci_low"), value(f"{RATIO_METRIC}_ci_high")
    conv = _converged(doc, ours, *(f"dense {r:g}x" for r in RATIOS))
    target = f"dense {CLAIMED_RATIO:g}x"
    p, worse, n = _paired_worse(doc, ours, target)
    decisive, test = False, ""
    if ratio is None or lo is None or hi is None:
        verdict, why = (
            "not decided",
            "no dense-equivalent ratio with an interval (scaling fit failed or one seed)",
        )
    elif hi < CLAIMED_RATIO:
        verdict = "contradicted"
        why = (
            f"RoM equals a dense model of {ratio:.2f}x its active parameters "
            f"(95 % CI {lo:.2f}-{hi:.2f}), below {CLAIMED_RATIO:g}x"
        )
        decisive, test = _decided_by_test(p, worse, n, conv)
        test = f"worse than {target}: " + test
    elif lo > 1.0:
        verdict = "reproduced"
        why = (
            f"RoM equals a dense model of {ratio:.2f}x its active parameters "
            f"(95 % CI {lo:.2f}-{hi:.2f}); a match is an equivalence no paired test here "
            "shows, so never decisive"
        )
    else:
        verdict = "not decided"
        why = (
            f"the 95 % CI of the dense-equivalent ratio ({lo:.2f}-{hi:.2f}) "
            f"includes 1 and {CLAIMED_RATIO:g}"
        )
    why = "; ".join(x for x in (why, test) if x)
    return verdict_entry(
        claim,
        verdict=verdict,
        why=why + ("" if conv else "; not every run met the flatness criterion"),
        metric=RATIO_METRIC,
        ours=ratio if ratio is not None and math.isfinite(ratio) else 0.0,
        baseline=baseline,
        baseline_value=CLAIMED_RATIO,
        seeds=len(doc["machine"]["seeds"]),
        p_value=p if verdict == "contradicted" else None,
        converged=conv,
        decisive=decisive,
    )


HYBRID_SAVING_CLAIM = (
    "RoM saves active FLOPs in hybrid models at equal perplexity "
    f"(the paper: {CLAIMED_HYBRID_SAVING:.0%})"
)


def _hybrid_saving_verdict(doc: dict) -> dict:
    """The hybrid FLOPs saving's verdict: its 95 % bootstrap interval decides (above 0:
    reproduced, the size set against the paper's; below 0: contradicted; else not
    decided). Decisive when, besides, the paired t-test of the hybrid RoM against the dense
    hybrid of equal active FLOPs (``hybrid dense``) resolves the same sign (worse for a
    contradicted saving, better for a reproduced one), every run is flat and there are at
    least :data:`MIN_DECISIVE_SEEDS` seeds."""

    def value(metric):
        found = [
            r["value"] for r in doc["rows"] if r["case"] == "hybrid RoM" and r["metric"] == metric
        ]
        return found[0] if found else None

    saving = value("flops_saving")
    lo, hi = value("flops_saving_ci_low"), value("flops_saving_ci_high")
    conv = _converged(
        doc, "hybrid RoM", "hybrid dense", *(f"hybrid dense {r:g}x" for r in HYBRID_RATIOS)
    )
    p, worse, n = _paired_worse(doc, "hybrid RoM", "hybrid dense")
    decisive, test = False, ""
    if saving is None or lo is None or hi is None:
        verdict, why = "not decided", "no FLOPs saving with an interval (fit failed or one seed)"
    else:
        interval = f"{saving:.1%} (95 % CI {lo:.1%} to {hi:.1%})"
        if lo > 0:
            paper = f"the paper: {CLAIMED_HYBRID_SAVING:.0%}"
            verdict, why = "reproduced", f"saving {interval}; {paper}"
            decisive, test = _decided_by_test(p, worse, n, conv, side="better")
            test = "better than hybrid dense: " + test
        elif hi < 0:
            verdict, why = "contradicted", f"saving {interval}: the hybrid RoM costs more FLOPs"
            decisive, test = _decided_by_test(p, worse, n, conv)
            test = "worse than hybrid dense: " + test
        else:
            verdict, why = "not decided", f"saving {interval}: the interval includes 0"
    why = "; ".join(x for x in (why, test) if x)
    return verdict_entry(
        HYBRID_SAVING_CLAIM,
        verdict=verdict,
        why=why + ("" if conv else "; not every run met the flatness criterion"),
        metric="flops_saving",
        ours=saving if saving is not None and math.isfinite(saving) else 0.0,
        baseline="dense hybrid scaling fit (1x-3x active FLOPs)",
        baseline_value=CLAIMED_HYBRID_SAVING,
        seeds=len(doc["machine"]["seeds"]),
        p_value=p if verdict != "not decided" else None,
        converged=conv,
        decisive=decisive,
    )


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the abstract (:data:`CLAIMS`), by a fixed rule on the rows.

    Paired comparisons: :func:`_common.seed_verdict`, a paired t-test (alpha 0.05) over
    the seeds' final validation bits per byte (lower is better; seed ``s`` of every model
    shares the batch order). "RoM matches a dense model with 2.3x its active parameters":
    the 95 % bootstrap interval of the dense-equivalent ratio (scaling fit) decides:
    its upper end below 2.3 contradicts the claim, its lower end above 1 with the upper end
    at or above 2.3 reproduces it, anything else is not decided. A contradicting interval
    is decisive when the paired t-test shows RoM worse than the dense 2.3x model itself
    (p < 0.05), every run is flat and there are at least :data:`MIN_DECISIVE_SEEDS` seeds
    (its ``p_value``); a reproducing one is never decisive (a match is an equivalence,
    which no paired test here shows). ``converged``: every run of both sides met the flatness
    criterion. A run with the dense hybrid sizes (the until-flat plan) adds
    :data:`HYBRID_SAVING_CLAIM`, decided by the interval of the saving.
    """
    out = []
    for claim, metric, ours, baseline in CLAIMS:
        if metric == RATIO_METRIC:
            out.append(_ratio_verdict(doc, claim, ours, baseline))
            continue
        out.append(
            seed_verdict(
                claim,
                doc,
                metric=metric,
                ours=ours,
                baseline=baseline,
                higher_is_better=False,
                converged=_converged(doc, ours, baseline),
            )
        )
    if any(r["case"].startswith("hybrid dense ") for r in doc["rows"]):
        out.append(_hybrid_saving_verdict(doc))
    return out
