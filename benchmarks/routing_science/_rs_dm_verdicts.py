"""The verdicts of ``default_moe.py``: one per claim and configuration, by a fixed rule.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``default_moe.py``
writes it) and returns one verdict entry per claim; ``default_moe.py --verdicts-only JSON``
re-derives them. A helper module: ``default_moe.py`` imports it.
"""

from __future__ import annotations

from _common import (
    row_value,
    seed_verdict,
)
from _rs_dm_train import METHODS

__all__ = [
    "verdicts",
]


# ------------------------------------------------------------------------ verdicts


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim and configuration, by rule (issue 44).

    :func:`_common.seed_verdict` on the per-seed rows: the paired t-test decides (the
    sign test's p-value is quoted in ``why``). Claims: Default MoE lowers the final
    validation loss; reaches the target loss with fewer tokens; gives the router a dense
    gradient (share of non-zero ``dL/dlogits`` at the end). Converged when every run of
    the configuration met ``FLAT_RULE`` (rows ``converged seed <s>``); ``why`` also gives
    the mean excess over the exact floor.
    """
    has = {(r["case"], r["metric"]) for r in doc["rows"]}
    seeds = doc["machine"]["seeds"]
    cases = sorted((c for c, m in has if m == "floor"), key=lambda c: (int(c.split("c")[0]), c))
    out = []
    for case in cases:
        conv = all(
            (f"{case}/{m}", f"converged seed {s}") in has
            and row_value(doc, f"{case}/{m}", f"converged seed {s}") == 1
            for m in METHODS
            for s in seeds
        )
        excess = ", ".join(
            f"{m} {row_value(doc, f'{case}/{m}', 'excess'):.2f} %"
            for m in METHODS
            if (f"{case}/{m}", "excess") in has
        )
        for claim, metric, higher in (
            ("Default MoE lowers the final validation loss", "val_loss", False),
            ("Default MoE reaches the target loss with fewer tokens", "tokens_to_target", False),
            ("Default MoE gives the router a dense gradient", "router_grad_density", True),
        ):
            note = f"final loss above the exact floor: {excess}" if excess else ""
            if (f"{case}/default", f"{metric} p_sign") in has:
                ps = row_value(doc, f"{case}/default", f"{metric} p_sign")
                note = f"sign test p = {ps:.2g}; {note}"
            out.append(
                seed_verdict(
                    f"{claim} ({case}, generated Markov sources)",
                    doc,
                    metric=metric,
                    ours=f"{case}/default",
                    baseline=f"{case}/top-k",
                    higher_is_better=higher,
                    converged=conv,
                    note=note,
                )
            )
    return out


# ---------------------------------------------------------------------------- main
