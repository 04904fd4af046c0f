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
    "cross_dataset_verdict",
    "lms_converged",
    "match_effect",
    "rejudge",
    "verdicts",
]


def rejudge(doc: dict) -> dict:
    """``doc`` (a results JSON of this script, parsed) with the convergence rows judged again
    by :func:`flat` (byte classifier, fine-tuned MiniLM) and :func:`lm_flat` (LMs) from its
    ``curves`` -- the classifiers' ``converged_seeds`` and ``converged seed s``, every
    LM's ``converged seed s`` and their seed means and spreads -- and the verdicts
    recomputed; no other row changes (the verdicts only when the JSON has them)."""
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

    for name in ("byte_lm", "minilm_finetune"):
        conv = judge(f"{K}-way {name}", doc["curves"].get(name, {}), flat)
        if (key := (f"{K}-way {name}", "converged_seeds")) in rows:
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


def match_effect(doc: dict) -> tuple[list[float], list[float]]:
    """Per seed, the own-pipeline effect on log perplexity, free of LM quality and text
    difficulty.

    The matrix ``L[a, b]`` (log perplexity of the LM trained on pipeline ``a`` on pipeline
    ``b``'s validation text, rows ``cross ppl a on b``) is double-centred,
    ``R = L - row means - column means + grand mean``, so an LM that is better everywhere or
    a text that is easier for every LM adds nothing; what is left is the match of LM and
    text. Fingerprints that hurt cross-dataset generalisation make the diagonal of ``R``
    negative and its off-diagonal positive.

    Parameters
    ----------
    doc : dict
        A results document of ``run.py`` (its ``rows``).

    Returns
    -------
    cross, own : list of float
        Per seed (the seeds with a full matrix, in order), the mean of ``R`` off and on the
        diagonal (nats per token); empty lists when the run has no such rows.
    """
    cells: dict[int, dict[tuple[str, str], float]] = {}
    for r in doc["rows"]:
        case, metric = r["case"], r["metric"]
        if case.startswith("cross ppl ") and " on " in case and metric.startswith("ppl seed "):
            a, b = case[len("cross ppl ") :].split(" on ")
            cells.setdefault(int(metric.split()[-1]), {})[(a, b)] = float(r["value"])
    cross, own = [], []
    for _, by in sorted(cells.items()):
        names = sorted({a for a, _ in by} | {b for _, b in by})
        if len(names) < 2 or any((a, b) not in by for a in names for b in names):
            continue  # a seed cut short: no full matrix
        L = np.log([[by[(a, b)] for b in names] for a in names])
        R = L - L.mean(1, keepdims=True) - L.mean(0, keepdims=True) + L.mean()
        eye = np.eye(len(names), dtype=bool)
        cross.append(float(R[~eye].mean()))
        own.append(float(R[eye].mean()))
    return cross, own


def cross_dataset_verdict(doc: dict, converged: bool) -> dict:
    """The verdict on "fingerprints can hurt cross-dataset generalisation".

    A paired t-test over the seeds (:func:`_common.decide_verdict`) of the off-diagonal
    against the diagonal of the double-centred log-perplexity matrix (:func:`match_effect`),
    when the run's settings record a document-aligned validation split
    (``prop_split == "document"``); else "not decided": the tails were cut at 90 % of each
    token stream, so other pipelines' training text can hold a tail's source documents.

    Parameters
    ----------
    doc : dict
        A results document of ``run.py``.
    converged : bool
        Whether every propagation LM is flat (:func:`lms_converged`).

    Returns
    -------
    dict
        The verdict entry.
    """
    claim = "such fingerprints can negatively impact cross-dataset generalization"
    cross, own = match_effect(doc)
    if doc["machine"]["settings"].get("prop_split") != "document":
        return _common.verdict_entry(
            claim,
            verdict="not decided",
            why="the validation tails are cut at 90 % of each pipeline's token stream, not "
            "at a document boundary shared by the pipelines, so a source document near the "
            "cut can be in one LM's training text and in another pipeline's tail: a leak "
            "that lowers the cross-pipeline perplexity and biases the test towards "
            "'contradicted'; a run with a document-aligned split decides it"
            + (
                f" (double-centred log-ppl residual off vs on the diagonal "
                f"{np.mean(cross):.4f} vs {np.mean(own):.4f} nats here)"
                if cross
                else ""
            ),
            metric="log-ppl residual off the diagonal",
            ours=float(np.mean(cross)) if cross else 0.0,
            baseline="log-ppl residual on the diagonal (own pipeline)",
            baseline_value=float(np.mean(own)) if own else None,
            seeds=max(len(cross), 1),
            p_value=None,
            converged=converged,
            decisive=False,
        )
    return _decide(
        claim,
        metric="log-ppl residual off the diagonal",
        ours=cross,
        baseline="log-ppl residual on the diagonal (own pipeline)",
        baseline_values=own,
        higher_is_better=False,
        converged=converged,
        expect="worse",
        note="log perplexity of every single-pipeline LM on every pipeline's validation "
        "text, with the LM's and the text's means removed (double centring: an LM's "
        "quality and a text's difficulty cancel)",
    )


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the abstract, by fixed rules on the run's per-seed rows.

    Each tested claim is :func:`_common.decide_verdict` (paired t-test over the seeds, alpha
    0.05) of per-seed values against a per-seed baseline: chance for "classified above
    chance"; the bag-of-words model on the raw text for "formatting carries fingerprints";
    the own-pipeline cells of the double-centred log-perplexity matrix
    (:func:`match_effect`) for "cross-dataset generalisation suffers"; the uniform guess's
    L1 error for the mixture read-back (only when the generations are told apart above
    chance; otherwise "not decided"). "Better than a human" and "fine-tuning data sources"
    are not tested here ("not decided"). The neural claim takes the most accurate of the
    neural classifiers that ran (byte-level, frozen MiniLM + linear head, MiniLM with its
    top layers fine-tuned). Converged: logistic regressions always (the frozen-MiniLM
    head too); the byte classifier and the fine-tuned MiniLM when every seed's validation
    accuracy is flat; the LMs when every LM's
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
    finetuned = f"{K}-way minilm_finetune"  # from fingerprints_v3 on
    if any(r["case"] == finetuned for r in doc["rows"]):
        neural[finetuned] = full and val(doc, finetuned, "converged_seeds") == seeds
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
    out.append(cross_dataset_verdict(doc, lm_conv))
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
