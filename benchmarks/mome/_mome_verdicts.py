"""The verdicts of ``run.py``: one per claim and setting, each by a fixed rule on the stored rows.

:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``run.py`` writes
it) and returns one verdict entry per claim (Welch's t-test from the stored means and
standard deviations); ``run.py --verdicts-only JSON`` re-derives them. A helper module:
``run.py`` imports it.
"""

from __future__ import annotations

from _common import (
    summary_verdict,
)

__all__ = [
    "verdicts",
]


def _stats(doc: dict, case: str, metric: str) -> tuple[float, float, int]:
    """(mean, population sd, seeds) of ``metric`` of ``case`` (a row may repeat per ``vs``)."""
    found = {(r["metric"]): r["value"] for r in doc["rows"] if r["case"] == case}
    return found[metric], found.get(f"{metric}_std", 0.0), len(doc["machine"]["seeds"])


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the paper that the run can test, by rules (issue 41).

    The runs store means and population standard deviations over the seeds (no per-seed
    rows): every comparison is Welch's t-test from them (:func:`_common.summary_verdict`,
    ``ddof=0``; a control without a deviation makes it a one-sample test), alpha 0.05,
    character error rate (lower is better) on the clean test phrases unless said:

    * ASR run: MoME vs per-rate adapters at every audio rate (cross-scale generalisation),
      MoME vs the single adapter trained at the lowest compression at every rate, MoME vs
      per-rate adapters at the highest compression at the lowest SNR (robustness), and the
      routing consistency across rates (JS divergence, lower) vs the shuffled control;
    * AVSR run: MoME vs per-rate adapters at every rate pair, and the audio-visual MoME vs
      the audio-only MoME at the lowest SNR of every rate pair (the visual stream helps);
    * the untrained-routing control: its consistency vs its shuffled control.

    The recognisers are far from converged: nothing is decisive.
    """
    cases = {r["case"] for r in doc["rows"]}

    def cer(claim, ours, base, metric="cer"):
        return summary_verdict(
            claim,
            metric=f"{metric} ({ours})",
            ours=_stats(doc, ours, metric),
            baseline=base,
            baseline_stats=_stats(doc, base, metric),
            higher_is_better=False,
            converged=False,
            ddof=0,
        )

    out = []
    asr_rates = sorted(
        {int(c.split("audio=")[1].split("/")[0]) for c in cases if c.startswith("asr/mome/audio=")}
    )
    if any(c.startswith("asr/per_rate/") for c in cases):
        for rate in asr_rates:
            out.append(
                cer(
                    f"MoME beats per-rate adapters across scales (audio rate {rate})",
                    f"asr/mome/audio={rate}/clean",
                    f"asr/per_rate/audio={rate}/clean",
                )
            )
        for rate in asr_rates:
            out.append(
                cer(
                    f"MoME beats a single adapter trained at the lowest compression "
                    f"(audio rate {rate})",
                    f"asr/mome/audio={rate}/clean",
                    f"asr/single/audio={rate}/clean",
                )
            )
        worst = sorted(
            {c.rsplit("/", 1)[1] for c in cases if c.startswith("asr/mome/")},
            key=lambda x: -1e9 if x == "clean" else -float(x.rstrip("dB")),
        )[-1]
        top = asr_rates[-1]
        out.append(
            cer(
                f"MoME is robust at high compression and noise (audio rate {top}, {worst})",
                f"asr/mome/audio={top}/{worst}",
                f"asr/per_rate/audio={top}/{worst}",
            )
        )
    for trained, control in (
        ("routing/mome", "routing/shuffled"),
        ("routing/untrained", "routing/untrained_shuffled"),
    ):
        if trained in cases:
            out.append(
                summary_verdict(
                    f"expert usage is consistent across rates ({trained.split('/')[1]} router)",
                    metric="JS divergence of expert usage across rates (nats)",
                    ours=_stats(doc, trained, "js_across_rates"),
                    baseline=control,
                    baseline_stats=_stats(doc, control, "js_across_rates"),
                    higher_is_better=False,
                    converged=False,
                    ddof=0,
                )
            )
    pairs = sorted(
        {c.split("/")[2] for c in cases if c.startswith("avsr/mome/")},
        key=lambda x: [int(v.split("=")[1]) for v in x.split(",")],
    )
    for pair in pairs:
        out.append(
            cer(
                f"MoME beats per-rate adapters in AVSR ({pair})",
                f"avsr/mome/{pair}/clean",
                f"avsr/per_rate/{pair}/clean",
            )
        )
    for pair in pairs:
        audio = pair.split(",")[0]
        worst = sorted(
            {c.rsplit("/", 1)[1] for c in cases if c.startswith(f"avsr/mome/{pair}/")},
            key=lambda x: -1e9 if x == "clean" else -float(x.rstrip("dB")),
        )[-1]
        out.append(
            cer(
                f"the visual stream helps under audio noise ({pair}, {worst})",
                f"avsr/mome/{pair}/{worst}",
                f"asr/mome_audio_only/{audio}/{worst}",
            )
        )
    return out
