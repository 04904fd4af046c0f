"""The verdicts of ``run.py``: one per claim of MxD, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim (faithfulness from
``_frontier.faithful_verdict``); ``run.py --verdicts-only JSON`` re-derives them. A helper
module: ``run.py`` imports it.
"""

from __future__ import annotations

from _common import (
    decide_verdict,
    row_value,
    verdict_entry,
)
from _frontier import INFORMATIVE_PROBE, UNTRAINED_FVU, faithful_verdict

__all__ = [
    "verdicts",
]


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the paper, by rules applied to the run's rows (issue 41).

    * MxD above the transcoders on the sparsity-accuracy frontier, per ``k``: the spliced
      loss increase of MxD vs the strongest same-run transcoder (the lower mean of the
      transcoder and the skip-transcoder), :func:`_common.decide_verdict` over the per-seed
      rows (paired t-test); **not decided** whenever that baseline's held-out FVU exceeds
      :data:`UNTRAINED_FVU`: a baseline that explains less than half of the variance has
      not trained, and beating it says nothing about the frontier;
    * faithful (:func:`_frontier.faithful_verdict`): reproduced when every MxD run
      recovers at least :data:`_frontier.FAITHFUL_RECOVERED` of the mean-ablation gap,
      otherwise not decided (the claim is about trained layers, and these had a few dozen
      steps);
    * sparse probing comparable to transcoders: not decided when the MLP's own neurons
      probe below :data:`INFORMATIVE_PROBE` (the task is at chance), otherwise MxD's mean
      probe accuracy over ``k`` vs the transcoder's by the paired test over ``k``.

    The thresholds :data:`UNTRAINED_FVU` and :data:`INFORMATIVE_PROBE` are those of
    ``_frontier.py`` (one copy for both scripts). Nothing is trained to convergence, so
    nothing is decisive.
    """
    st = doc["machine"]["settings"]
    seeds, ks = st["seeds"], st["ks"]

    def per_seed(method, k, metric):
        return [row_value(doc, f"{method}/k={k}/seed={s}", metric) for s in seeds]

    def mean(method, k, metric):
        vals = per_seed(method, k, metric)
        return sum(vals) / len(vals)

    out = []
    for k in ks:
        base = min(("transcoder", "skip_transcoder"), key=lambda m: mean(m, k, "ce_increase"))
        claim = f"MxD is above the transcoders on the sparsity-accuracy frontier (k = {k})"
        fvu = mean(base, k, "fvu")
        if fvu > UNTRAINED_FVU:
            ours, theirs = mean("mxd", k, "ce_increase"), mean(base, k, "ce_increase")
            out.append(
                verdict_entry(
                    claim,
                    verdict="not decided",
                    why=f"spliced loss increase {ours:.3g} vs {theirs:.3g} nats/token (lower is "
                    f"better), but the baseline did not train: its held-out FVU is {fvu:.2f} "
                    f"(> {UNTRAINED_FVU}), MxD's {mean('mxd', k, 'fvu'):.3f}",
                    metric="ce_increase",
                    ours=ours,
                    baseline=base,
                    baseline_value=theirs,
                    seeds=len(seeds),
                    p_value=None,
                    converged=False,
                    decisive=False,
                )
            )
            continue
        out.append(
            decide_verdict(
                claim,
                metric="ce_increase",
                ours=per_seed("mxd", k, "ce_increase"),
                baseline=base,
                baseline_values=per_seed(base, k, "ce_increase"),
                higher_is_better=False,
                converged=False,
            )
        )
    recovered = [v for k in ks for v in per_seed("mxd", k, "recovered")]
    out.append(
        faithful_verdict(
            recovered,
            seeds=len(seeds),
            caveat="less is no test of a claim about trained layers",
        )
    )
    mlp = row_value(doc, "mlp_neurons", "probe_acc_top8")
    mxd_probe = [mean("mxd", k, "probe_acc_top8") for k in ks]
    tc_probe = [mean("transcoder", k, "probe_acc_top8") for k in ks]
    claim = "sparse probing with MxD units is comparable to transcoders"
    if mlp < INFORMATIVE_PROBE:
        out.append(
            verdict_entry(
                claim,
                verdict="not decided",
                why=f"the task is at chance: the MLP's own top neurons probe at {mlp:.3f} "
                f"balanced accuracy (< {INFORMATIVE_PROBE}); MxD "
                f"{sum(mxd_probe) / len(ks):.3f}, transcoder {sum(tc_probe) / len(ks):.3f}",
                metric="probe_acc_top8",
                ours=sum(mxd_probe) / len(ks),
                baseline="transcoder",
                baseline_value=sum(tc_probe) / len(ks),
                seeds=len(seeds),
                p_value=None,
                converged=False,
                decisive=False,
            )
        )
    else:
        out.append(
            decide_verdict(
                claim,
                metric="probe_acc_top8 (mean over seeds, paired over k)",
                ours=mxd_probe,
                baseline="transcoder",
                baseline_values=tc_probe,
                higher_is_better=True,
                converged=False,
            )
        )
    return out
