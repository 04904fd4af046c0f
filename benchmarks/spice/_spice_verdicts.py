"""The comparisons and verdicts of ``run.py``: model groups, all-target rows, claim verdicts.

The model groups (:data:`SINGLE`, :data:`ENSEMBLE`, :data:`SPICE`), the Holm-corrected
per-target verdict counts (:func:`verdict_rows`), the all-target score rows with their
pooled sign-flip tests (:func:`overall_rows`; score = mean over targets of test MAE /
target std, dimensionless) and the paper's claims judged from a result document
(:func:`claim_verdicts`, also ``run.py --verdicts-only JSON``); :func:`resummarize` adds the
all-target rows and verdict counts to a finished JSON (``run.py --resummarize``). A helper module:
``run.py`` imports it.
"""

from __future__ import annotations

import json

import numpy as np
from _common import Row, verdict_entry, write_json_doc
from _spice import load_set, sign_flip_test, verdict

__all__ = [
    "CLAIM",
    "ENSEMBLE",
    "ENSEMBLE_HELPS",
    "SINGLE",
    "SPICE",
    "claim_verdicts",
    "overall_rows",
    "resummarize",
    "verdict_rows",
]


SINGLE = ("single_conformer", "random_conformer")


ENSEMBLE = ("mean_ensemble", "deepsets", "attention_ensemble", "boltzmann_ensemble", "gnn2d_3d")


SPICE = ("spice", "spice_dense")


ENSEMBLE_HELPS = "best ensemble vs best single conformer"


CLAIM = "spice vs best ensemble"


def verdict_rows(tests: dict, targets, alpha: float = 0.05) -> tuple[list[Row], dict]:
    """Per-comparison counts of the Holm-corrected per-target verdicts.

    Parameters
    ----------
    tests : dict
        ``tests[target][label]`` with ``mean_diff`` (a - b) and ``p_holm``, as built by
        the paired tests of :func:`main`.
    targets : sequence of str
    alpha : float
        Family-wise level of the Holm-adjusted p-values.

    Returns
    -------
    rows : list of Row
        For every comparison label, the number of targets on which ``a`` is better,
        worse or within noise; and the paper's claim (SPiCE vs the best ensemble)
        restricted to the targets where the best ensemble beats the best single
        conformer (where ensembles help).
    out : dict
        ``{label: {target: verdict}}`` and the restricted claim under
        ``"spice vs best ensemble where ensembles help"``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    out: dict[str, dict[str, str]] = {}
    for t in targets:
        for label, v in tests.get(t, {}).items():
            out.setdefault(label, {})[t] = verdict(v, alpha)
    helps = [t for t, v in out.get(ENSEMBLE_HELPS, {}).items() if v == "better"]
    if CLAIM in out:
        out[f"{CLAIM} where ensembles help"] = {t: out[CLAIM][t] for t in helps if t in out[CLAIM]}
    rows = []
    for label, per in out.items():
        for kind in ("better", "worse", "noise"):
            rows.append(
                Row(
                    f"verdicts {label}",
                    f"targets {kind} after Holm (alpha {alpha})",
                    float(sum(v == kind for v in per.values())),
                    "count",
                )
            )
    return rows, out


def overall_rows(runs, refs, targets, scale, y=None) -> tuple[list[Row], dict]:
    """All-target summary: test score per seed and a pooled paired test (one test, no Holm).

    The test score of a run is the mean over targets of test MAE / ``scale`` (the std of
    each target over the whole set). With per-molecule predictions of every seed
    (``r["test_pred"]`` and the labels ``y``), the per-molecule score difference of SPiCE
    and the best baseline by validation score (and of the best ensemble and the best
    single-conformer model) is sign-flip tested, pooled over seeds.
    """
    scale = np.asarray(scale, dtype=float)
    rows, out = [], {}
    score = {
        m: [float(np.mean(np.asarray(r["test_mae"]) / scale)) for r in rs] for m, rs in runs.items()
    }
    score.update({m: [float(np.mean(np.asarray(v) / scale)) for v in vs] for m, vs in refs.items()})
    for m, v in score.items():
        a = np.asarray(v)
        rows.append(
            Row(
                m,
                "test score: mean over targets of MAE / target std (mean over seeds)",
                float(a.mean()),
                "",
            )
        )
        rows.append(
            Row(m, "test score (std over seeds)", float(a.std(ddof=1)) if a.size > 1 else 0.0, "")
        )
    out["test_score"] = score
    val = {m: float(np.mean([r["val_score"] for r in rs])) for m, rs in runs.items()}
    have = y is not None and all("test_pred" in r for rs in runs.values() for r in rs)

    def per_mol(m):
        return np.concatenate(
            [
                (np.abs(np.asarray(r["test_pred"]) - y[r["test_index"]]) / scale).mean(1)
                for r in runs[m]
            ]
        )

    pairs = []
    base = [m for m in runs if m not in SPICE]
    ens, sing = [m for m in runs if m in ENSEMBLE], [m for m in runs if m in SINGLE]
    if "spice" in runs and base:
        pairs.append(("overall spice vs best baseline", "spice", min(base, key=val.get)))
    if "spice" in runs and ens:
        pairs.append(("overall spice vs best ensemble", "spice", min(ens, key=val.get)))
    if ens and sing:
        pairs.append(
            (
                "overall best ensemble vs best single conformer",
                min(ens, key=val.get),
                min(sing, key=val.get),
            )
        )
    for label, a, b in pairs:
        case = f"{label} ({a} vs {b})"
        rows.append(
            Row(
                case,
                f"test score {a}",
                float(np.mean(score[a])),
                "",
                b,
                float(np.mean(score[b]) / np.mean(score[a])),
            )
        )
        if have:
            d = per_mol(a) - per_mol(b)
            p = sign_flip_test(d)
            rows.append(Row(case, "mean paired score difference", float(d.mean()), ""))
            rows.append(Row(case, "sign-flip p-value", p, ""))
            out[label] = {"a": a, "b": b, "mean_diff": float(d.mean()), "p": p, "n": int(d.size)}
    return rows, out


def claim_verdicts(doc: dict) -> list[dict]:
    """The paper's claims, by rules applied to the run's all-target rows (issue 41).

    The all-target score is the mean over targets of test MAE / target std (lower is
    better); the pooled paired sign-flip test compares two models' per-molecule scores
    (rows ``overall <comparison> (<a> vs <b>)``), the per-target counts are the Holm-
    corrected paired tests (rows ``verdicts <comparison>``).

    * SPiCE consistently outperforms the existing conformer-ensemble methods (against the
      best ensemble of the run, or the best baseline where the run has no ensemble row):
      reproduced when the pooled test resolves SPiCE as better (p < 0.05) and no target is
      worse after Holm; contradicted when the pooled test resolves it as worse, or when
      more targets are worse than better after Holm; not decided otherwise;
    * the premise, conformer ensembles beat one conformer: the best ensemble against the
      best single-conformer model, by the pooled test alone.

    A run without the pooled test (older JSONs) gets "not decided". Training is not
    converged (the validation curves still fall), so nothing is decisive.
    """
    rows = doc["rows"]

    def overall(prefix):
        found = [r for r in rows if r["case"].startswith(f"overall {prefix} (")]
        if not found:
            return None
        case = found[0]["case"]
        a, b = case[case.index("(") + 1 : -1].split(" vs ")
        get = {r["metric"]: r for r in rows if r["case"] == case}
        score = get[f"test score {a}"]
        p = get.get("sign-flip p-value")
        diff = get.get("mean paired score difference")
        return {
            "a": a,
            "b": b,
            "ours": score["value"],
            "base": score["value"] * score["ratio"],
            "p": None if p is None else p["value"],
            "diff": None if diff is None else diff["value"],
        }

    def counts(label):
        got = {
            r["metric"].split()[1]: int(r["value"])
            for r in rows
            if r["case"] == f"verdicts {label}"
        }
        return got or None

    out = []
    for claim, prefix, per_target in (
        (
            "SPiCE consistently outperforms existing conformer-ensemble methods",
            "spice vs best ensemble",
            "spice vs best ensemble",
        ),
        (
            "conformer ensembles beat a single conformer",
            "best ensemble vs best single conformer",
            None,
        ),
    ):
        o = overall(prefix)
        if o is None and prefix.startswith("spice"):
            o = overall("spice vs best baseline")
            per_target = "spice vs best baseline"
        if o is None:
            continue
        c = counts(per_target) if per_target else None
        resolved = o["p"] is not None and o["p"] < 0.05
        better = o["diff"] is not None and o["diff"] < 0
        if not resolved:
            verdict = "not decided"
        elif better and (c is None or c.get("worse", 0) == 0):
            verdict = "reproduced"
        elif not better:
            verdict = "contradicted"
        else:
            verdict = "not decided"
        if c is not None and c.get("worse", 0) > c.get("better", 0) and per_target:
            verdict = "contradicted"
        why = (
            f"all-target score {o['ours']:.4g} ({o['a']}) vs {o['base']:.4g} ({o['b']}), "
            "lower is better"
        )
        if o["p"] is not None:
            why += f"; pooled paired sign-flip test p = {o['p']:.2g}"
        else:
            why += "; no pooled test in this run"
        if c is not None:
            why += (
                f"; per target after Holm: better on {c.get('better', 0)}, worse on "
                f"{c.get('worse', 0)}, within noise on {c.get('noise', 0)}"
            )
        why += "; not trained to convergence"
        out.append(
            verdict_entry(
                claim,
                verdict=verdict,
                why=why,
                metric="all-target test score (MAE / target std)",
                ours=o["ours"],
                baseline=o["b"],
                baseline_value=o["base"],
                seeds=int(doc["machine"].get("seeds", 1)),
                p_value=o["p"],
                converged=False,
                decisive=False,
            )
        )
    return out


def resummarize(args) -> None:
    """Add the all-target rows of :func:`overall_rows` and the verdict counts of
    :func:`verdict_rows` to a finished JSON (``--resummarize``)."""
    doc = json.loads(args.resummarize.read_text())
    det = doc["details"]
    ms = load_set(args.data)
    if ms.content_sha256() != doc["machine"]["data_sha256"]:
        raise SystemExit(f"{args.data} is not the data set of {args.resummarize} (content hash)")
    scale = np.nanstd(ms.targets, axis=0, ddof=1)
    rows, out = overall_rows(det["runs"], det["references"], det["targets"], scale, ms.targets)
    v_rows, det["verdicts"] = verdict_rows(det["tests"], det["targets"])
    keep = [
        r
        for r in doc["rows"]
        if not r["case"].startswith(("overall ", "verdicts ")) and "test score" not in r["metric"]
    ]
    doc["rows"] = keep + [r.__dict__ for r in rows + v_rows]
    det["overall"] = out
    write_json_doc(args.resummarize, doc, indent=1)
    print(f"rewrote {args.resummarize}: {len(rows)} all-target and {len(v_rows)} verdict rows")
