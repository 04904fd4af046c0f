"""The verdicts of ``run.py``: one per claim, from the per-seed rows, and the re-judging of curves.

:func:`verdicts` (paired t-test over the seeds) reads a result document (``rows``, as
``run.py`` writes it); :func:`rejudge` judges a stored document's curves flat again by the
current rule (``run.py --rejudge``). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import _common
import numpy as np
from _cycles import flat, lm_flat

__all__ = [
    "lms_converged",
    "rejudge",
    "verdicts",
]


def rejudge(doc: dict) -> dict:
    """``doc`` (a results JSON of this script, parsed) with the convergence rows judged again
    by :func:`flat` (byte classifier) and :func:`lm_flat` (LMs) from its ``curves`` -- the
    byte classifier's ``converged_seeds`` and ``converged seed s``, every LM's ``converged
    seed s`` and their seed means and spreads -- and the verdicts recomputed; no other row
    changes (the verdicts only when the JSON has them)."""
    rows = {(r["case"], r["metric"]): r for r in doc["rows"]}
    K = len(doc.get("names") or []) or 4

    def judge(case, by_seed, rule):
        conv = []
        for s, curve in sorted(by_seed.items(), key=lambda kv: int(kv[0])):
            conv.append(float(rule(curve)))
            if (key := (case, f"converged seed {s}")) in rows:
                rows[key]["value"] = conv[-1]
        if conv and (case, "converged") in rows:
            rows[(case, "converged")]["value"] = float(np.mean(conv))
            rows[(case, "converged_seed_std")]["value"] = float(np.std(conv))
        return conv

    conv = judge(f"{K}-way byte_lm", doc["curves"].get("byte_lm", {}), flat)
    if (key := (f"{K}-way byte_lm", "converged_seeds")) in rows:
        rows[key]["value"] = float(sum(conv))
    for name, by_seed in doc["curves"].get("lm", {}).items():
        judge(f"propagation LM {name}", by_seed, lm_flat)
    if "verdicts" in doc:
        doc["verdicts"] = [_common.verdict_entry(**v) for v in verdicts(doc)]
    return doc


# ---------------------------------------------------------------------------- verdicts
def _per_seed(doc, case, metric):
    """The per-seed values of ``case``/``metric`` for the seeds that ran (a run finished
    early with ``--finish`` may lack the last propagation seeds)."""
    seeds = doc["machine"]["settings"]["seeds"]
    want = {f"{metric} seed {s}": s for s in range(seeds)}
    found = {
        want[r["metric"]]: r["value"]
        for r in doc["rows"]
        if r["case"] == case and r["metric"] in want
    }
    return [found[s] for s in sorted(found)]


def _decide(claim, *, ours, baseline_values, **kw) -> dict:
    """:func:`_common.decide_verdict`, or "not decided" when fewer than two seeds ran."""
    if len(ours) >= 2 and len(ours) == len(baseline_values):
        return _common.decide_verdict(claim, ours=ours, baseline_values=baseline_values, **kw)
    return _common.verdict_entry(
        claim,
        verdict="not decided",
        why=f"only {len(ours)} seed(s) ran: no paired test",
        metric=kw["metric"],
        ours=float(np.mean(ours)),
        baseline=kw["baseline"],
        baseline_value=float(np.mean(baseline_values)),
        seeds=max(len(ours), 1),
        p_value=None,
        converged=kw["converged"],
        decisive=False,
    )


def lms_converged(doc) -> bool:
    """Every propagation LM of every seed has a flat validation curve."""
    rows = [
        r
        for r in doc["rows"]
        if r["case"].startswith("propagation LM") and r["metric"].startswith("converged seed")
    ]
    return bool(rows) and all(r["value"] == 1.0 for r in rows)


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the abstract, by fixed rules on the run's per-seed rows.

    Each tested claim is :func:`_common.decide_verdict` (paired t-test over the seeds, alpha
    0.05) of per-seed values against a per-seed baseline: chance for "classified above
    chance"; the bag-of-words model on the raw text for "formatting carries fingerprints";
    own-pipeline perplexity for "cross-dataset generalisation suffers"; the uniform guess's
    L1 error for the mixture read-back (only when the generations are told apart above
    chance; otherwise "not decided"). "Better than a human" and "fine-tuning data sources"
    are not tested here ("not decided"). Converged: logistic regressions always; the byte
    classifier when every seed's validation accuracy is flat; the LMs when every LM's
    validation perplexity is flat (< 1 % better over the last 20 % of steps); nothing in a
    ``--quick`` run.
    """
    seeds = doc["machine"]["settings"]["seeds"]
    full = not doc["machine"]["settings"].get("quick", True)  # a quick run never converges
    val = _common.row_value
    K = len(doc.get("names") or []) or 4
    byte_conv = full and val(doc, f"{K}-way byte_lm", "converged_seeds") == seeds
    lm_conv = full and lms_converged(doc)

    def vs_chance(claim, case, converged, note=""):
        chance = val(doc, case, "chance")
        ours = _per_seed(doc, case, "accuracy")
        return _decide(
            claim,
            metric=f"{case} accuracy",
            ours=ours,
            baseline="chance",
            baseline_values=[chance] * len(ours),
            higher_is_better=True,
            converged=converged,
            note=note,
        )

    neural = {f"{K}-way byte_lm": byte_conv, f"{K}-way minilm_linear": full}
    neural = {c: v for c, v in neural.items() if any(r["case"] == c for r in doc["rows"])}
    best = max(neural, key=lambda c: val(doc, c, "accuracy"))
    out = [
        vs_chance(
            "neural networks classify which dataset a single text sequence belongs to",
            best,
            neural[best],
            f"the better neural classifier of {', '.join(neural)}; bag-of-words "
            f"{val(doc, f'{K}-way bow', 'accuracy'):.3f}",
        )
    ]
    out.append(
        _common.verdict_entry(
            "they do so significantly better than a human can",
            verdict="not decided",
            why="no human annotation here; not tested",
            metric=f"{best} accuracy",
            ours=val(doc, best, "accuracy"),
            baseline="human",
            baseline_value=None,
            seeds=seeds,
            p_value=None,
            converged=neural[best],
            decisive=False,
        )
    )
    null = val(doc, "null control bow (document split)", "accuracy")
    out.append(
        vs_chance(
            "small differences in filtering and processing pipelines induce fingerprints",
            "2-way bow c4 vs dedup",
            full,
            f"c4 and dedup differ only by MinHash line deduplication; the null control "
            f"(same pipeline, two seeds) scores {null:.3f} against chance 0.5",
        )
    )
    raw = f"{K}-way bow"
    nof = f"{K}-way bow formatting removed"
    out.append(
        _decide(
            "the fingerprints are evident in formatting",
            metric=f"{K}-way bow accuracy",
            ours=_per_seed(doc, raw, "accuracy"),
            baseline="bag-of-words on the text with formatting removed",
            baseline_values=_per_seed(doc, nof, "accuracy"),
            higher_is_better=True,
            converged=full,
            note="removing the formatting must cost accuracy",
        )
    )
    out.append(
        vs_chance(
            "the fingerprints are evident in vocabulary and content distributions",
            nof,
            full,
            "words alone, formatting removed",
        )
    )
    out.append(
        _decide(
            "such fingerprints can negatively impact cross-dataset generalization",
            metric="ppl",
            ours=_per_seed(doc, "cross-pipeline ppl", "ppl"),
            baseline="own-pipeline validation perplexity",
            baseline_values=_per_seed(doc, "own-pipeline ppl", "ppl"),
            higher_is_better=False,
            converged=lm_conv,
            expect="worse",
            note="mean over the single-pipeline LMs of their perplexity on the other "
            "pipelines' validation text vs on their own",
        )
    )
    gen = "propagation single-LM generations"
    wr = np.mean(
        [
            r["value"]
            for r in doc["rows"]
            if r["metric"].startswith("word_rate seed") and r["case"].startswith("propagation LM")
        ]
    )
    gen_acc = _per_seed(doc, gen, "accuracy")
    prop = _decide(
        "the fingerprints propagate through training: generations are classified by a "
        "classifier trained on the original datasets",
        metric=f"{gen} accuracy",
        ours=gen_acc,
        baseline="chance",
        baseline_values=[1 / 3] * len(gen_acc),
        higher_is_better=True,
        converged=lm_conv,
        note=f"mean word rate of the generations {wr:.2f}",
    )
    out.append(prop)
    err = _per_seed(doc, "mixture adjusted count", "l1_error")
    uni = _per_seed(doc, "mixture uniform guess", "l1_error")
    claim = "pretraining mixture proportions can be read back from generations"
    if prop["verdict"] != "reproduced":
        out.append(
            _common.verdict_entry(
                claim,
                verdict="not decided",
                why="the generations are not told apart above chance, so there is nothing "
                f"to read back; adjusted-count L1 error {np.mean(err):.3g} vs uniform guess "
                f"{np.mean(uni):.3g}",
                metric="mixture adjusted count l1_error",
                ours=float(np.mean(err)),
                baseline="uniform guess",
                baseline_value=float(np.mean(uni)),
                seeds=len(err),
                p_value=None,
                converged=lm_conv,
                decisive=False,
            )
        )
    else:
        out.append(
            _decide(
                claim,
                metric="mixture adjusted count l1_error",
                ours=err,
                baseline="uniform guess",
                baseline_values=uni,
                higher_is_better=False,
                converged=lm_conv,
            )
        )
    out.append(
        _common.verdict_entry(
            "fine-tuning data sources can be read back",
            verdict="not decided",
            why="no fine-tuning stage in this benchmark; not tested",
            metric="none",
            ours=0.0,
            baseline="none",
            baseline_value=None,
            seeds=seeds,
            p_value=None,
            converged=False,
            decisive=False,
        )
    )
    return out
