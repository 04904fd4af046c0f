"""The verdicts of ``run.py``: one per claim of issue 44, each by a fixed rule on the stored rows.

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
    """One verdict per claim, by rules applied to the run's rows (issue 44).

    Comparisons of two methods use :func:`_common.seed_verdict`: the paired t-test over
    the per-seed rows (seed ``s`` of both methods shares initialisation and batch order)
    decides; for part (a) the sign test's p-value (rows ``<metric> p_sign``) is quoted in
    ``why`` beside it. A JSON without per-seed rows gets "not decided" (rerun needed).

    * (a) Default MoE vs Top-K, for each configuration: final validation perplexity lower;
      tokens to the target perplexity fewer; the router's gradient from the LM loss denser
      (share of non-zero ``dL/dlogits`` entries at the end of training). Converged when
      every run of the configuration met ``FLAT_RULE`` (rows ``converged``). Step time is
      measured under other processes' load: not decided.
    * (b) fine-tuning with L_o + L_v vs without (the first ``ft_seeds`` seeds): expert
      overlap lower, routing-score variance higher, MaxVio not higher ("preserves
      balance": a resolved rise contradicts), validation loss lower. Fixed 150 steps.
    * (c) bias balancing vs the Switch loss (the first ``ft_seeds`` seeds): global MaxVio
      lower, for 8 and 32 experts. The bias runs' flatness is not checked.
    """
    seeds = doc["machine"]["seeds"]
    few = doc["machine"].get("ft_seeds", seeds)
    has = {(r["case"], r["metric"]) for r in doc["rows"]}
    out = []

    def compare(claim, ours, base, metric, higher, converged=False, **kw):
        return seed_verdict(
            claim,
            doc,
            metric=metric,
            ours=ours,
            baseline=base,
            higher_is_better=higher,
            converged=converged,
            **kw,
        )

    settings = [c for c, m in has if m == "target_ppl"]
    settings.sort(key=lambda c: (int(c.split("c")[0]), c))
    for case in settings:
        conv = all(
            (f"{case}/{m}", "converged") in has and row_value(doc, f"{case}/{m}", "converged") == 1
            for m in ("top-k", "default")
        )
        for claim, metric, higher in (
            ("Default MoE lowers the final perplexity", "val_ppl", False),
            (
                "Default MoE reaches the target perplexity with fewer tokens",
                "tokens_to_target",
                False,
            ),
            ("Default MoE gives the router a dense gradient", "router_grad_density", True),
        ):
            note = "paired t-test decides"
            if (f"{case}/default", f"{metric} p_sign") in has:
                ps = row_value(doc, f"{case}/default", f"{metric} p_sign")
                note += f"; sign test p = {ps:.2g}"
            out.append(
                compare(
                    f"{claim} ({case})",
                    f"{case}/default",
                    f"{case}/top-k",
                    metric,
                    higher,
                    converged=conv,
                    note=note,
                )
            )
    case = settings[0]
    ours = row_value(doc, f"{case}/default", "step_time")
    base = row_value(doc, f"{case}/top-k", "step_time")
    out.append(
        verdict_entry(
            f"Default MoE costs little training-step time ({case})",
            verdict="not decided",
            why=f"step_time {ours:.4g} ms vs {base:.4g} ms (lower is better); median step "
            "times move with other processes' load on the shared machine: not tested",
            metric="step_time",
            ours=ours,
            baseline=f"{case}/top-k",
            baseline_value=base,
            seeds=len(seeds),
            p_value=None,
            converged=False,
            decisive=False,
        )
    )
    if ("finetune/L_o+L_v", "overlap") in has:
        for claim, metric, higher in (
            ("L_o + L_v reduce expert overlap", "overlap", False),
            ("L_o + L_v increase the routing-score variance", "score_variance", True),
            ("L_o + L_v preserve balance (MaxVio not higher)", "max_violation", False),
            ("L_o + L_v improve the fine-tuned model", "val_loss", False),
        ):
            out.append(
                compare(claim, "finetune/L_o+L_v", "finetune/baseline", metric, higher, seeds=few)
            )
    for case in sorted({c.split("/")[0] for c, m in has if c.endswith("/bias")}, key=len):
        out.append(
            compare(
                f"bias balancing balances better than the Switch loss ({case}, global MaxVio)",
                f"{case}/bias",
                f"{case}/switch",
                "max_violation",
                False,
                seeds=few,
            )
        )
    return out
