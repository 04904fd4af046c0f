"""The verdicts of ``run.py``: one per claim of MoRE-Brain, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim; ``run.py --verdicts-only JSON`` re-derives
them. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from _common import (
    row_value,
    seed_verdict,
    verdict_entry,
)

__all__ = [
    "verdicts",
]


def verdicts(doc: dict) -> list[dict]:
    """The abstract's claims, by rules applied to the per-seed rows (paired t-tests).

    * the tree decodes better than ridge (top-1, subject 1's test sentences);
    * the tree decodes better than the flat MoE (top-1);
    * the tree's voxel -> expert assignments recover the planted networks (level 1) and
      regions (level 3) better than spectral clustering of the voxel correlations (ARI);
    * router-only transfer to a new subject beats the stronger (in the means) of full
      fine-tuning and training from scratch on the same rows (top-5), per amount.

    ``converged`` is true when every learned fit of the comparison was flat
    (:data:`FLAT_RULE`) in every seed; ridge and spectral clustering are closed form.
    """
    out = []

    def conv(*cases):
        return all(row_value(doc, c, "flat") == 1.0 for c in cases)

    out.append(
        seed_verdict(
            "the hierarchical MoE decodes better than ridge",
            doc,
            metric="top1",
            ours="MoRE-Brain",
            baseline="ridge",
            higher_is_better=True,
            converged=conv("MoRE-Brain"),
        )
    )
    out.append(
        seed_verdict(
            "the expert tree decodes better than a flat MoE",
            doc,
            metric="top1",
            ours="MoRE-Brain",
            baseline="flat MoE",
            higher_is_better=True,
            converged=conv("MoRE-Brain", "flat MoE"),
        )
    )
    for level, what in (("networks", "4 networks (tree level 1)"), ("regions", "16 regions")):
        out.append(
            seed_verdict(
                f"expert routing recovers the planted voxel groups: {what}",
                doc,
                metric="ari",
                ours=f"{level} MoRE-Brain",
                baseline=f"{level} spectral",
                higher_is_better=True,
                converged=conv("MoRE-Brain"),
                note="baseline: spectral clustering of the absolute voxel correlations",
            )
        )
    amounts = sorted(
        {int(r["case"].split()[2]) for r in doc["rows"] if r["case"].startswith("new subject ")}
    )
    for n in amounts:
        pre = f"new subject {n} rows "
        base = max(("full fine-tuning", "scratch"), key=lambda b: row_value(doc, pre + b, "top5"))
        out.append(
            seed_verdict(
                f"router-only fine-tuning transfers to a new subject ({n} training rows)",
                doc,
                metric="top5",
                ours=pre + "router-only",
                baseline=pre + base,
                higher_is_better=True,
                converged=conv("MoRE-Brain", pre + "router-only", pre + base),
                note=f"baseline: {base}, the stronger of full fine-tuning and scratch in the means",
            )
        )
    return [verdict_entry(**v) for v in out]
