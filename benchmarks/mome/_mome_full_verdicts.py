"""The verdicts of ``full.py``: one per claim, modality and comparison, on the stored rows.

:func:`gate_passed` says whether the audio recognisers reach CER <= :data:`GATE`;
:func:`verdicts` reads a result document (``machine`` and ``rows``, as ``full.py`` writes
it) and returns one verdict entry per claim (paired over seeds, against each of
:data:`BASELINES`); ``full.py --verdicts-only JSON`` re-derives them. A helper module:
``full.py`` imports it.
"""

from __future__ import annotations

from _common import (
    decide_verdict,
    row_value,
)
from _mome import (
    MODALITIES,
    snr_name,
)
from _mome_full_report import _labels, _rate_of

__all__ = [
    "BASELINES",
    "GATE",
    "gate_passed",
    "verdicts",
]


GATE = 0.30  # a recogniser recognises: test CER at audio rate 1 <= 0.30
BASELINES = {
    "per_rate": "per-rate adapters",
    "shared": "one shared adapter",
    "dense_active": "a dense adapter of equal active parameters",
}


def _per_seed(doc, case, seeds, metric="cer") -> list[float]:
    return [row_value(doc, f"{case}/seed={sd}", metric) for sd in seeds]


def _converged(doc, cases) -> bool:
    """Every case flat in every seed, and the pretrained audio encoder flat where the
    cases hear audio and one was used."""
    have = {r["case"] for r in doc["rows"]}
    enc = "audio/pretrained_encoder"
    if enc in have and any(not c.startswith("video/") for c in cases):
        cases = [*cases, enc]
    return all(row_value(doc, c, "converged_fraction") == 1.0 for c in cases)


def gate_passed(doc: dict, seeds: list) -> bool:
    """The audio MoME and per-rate recognisers both reach CER <= :data:`GATE` at rate 1."""
    cases = {r["case"] for r in doc["rows"]}
    out = True
    for method in ("mome", "per_rate"):
        case = f"audio/{method}/audio=1/clean"
        if case not in cases:
            return False
        out &= row_value(doc, case, "cer") <= GATE
    return bool(out)


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim, modality and comparison, by the rules in the module docstring;
    comparisons with fewer than two common seeds get none yet."""
    seeds = doc["machine"]["seeds"]
    s = doc["machine"]["settings"]
    cases = {r["case"] for r in doc["rows"]}
    gate = gate_passed(doc, seeds)
    note = "" if gate else f"the audio recognisers do not reach CER <= {GATE} at rate 1"
    top = max(s["rates"])
    out = []

    def done(mod, method):
        return [sd for sd in seeds if f"{mod}/{method}/mean_over_rates/clean/seed={sd}" in cases]

    for mod in MODALITIES:
        labels = _labels(mod, s["rates"])
        top_label = next(lab for lab in labels if _rate_of(lab) == top)
        for base, name in BASELINES.items():
            both = sorted(set(done(mod, "mome")) & set(done(mod, base)))
            if len(both) < 2:
                continue
            conv = gate and _converged(doc, [f"{mod}/mome", f"{mod}/{base}"])
            for what, where in (("mean over rates", "mean_over_rates"), (f"rate {top}", top_label)):
                out.append(decide_verdict(
                    f"MoME beats {name} across scales ({mod}, {what})",
                    metric=f"test CER ({mod}, {what}, clean)",
                    ours=_per_seed(doc, f"{mod}/mome/{where}/clean", both),
                    baseline=base,
                    baseline_values=_per_seed(doc, f"{mod}/{base}/{where}/clean", both),
                    higher_is_better=False, converged=conv, note=note))  # fmt: skip
        both = sorted(set(done(mod, "mome")) & set(done(mod, "per_rate")))
        if mod != "video" and len(both) >= 2:
            conv = gate and _converged(doc, [f"{mod}/mome", f"{mod}/per_rate"])
            for snr in s["test_snr"]:
                if snr is None:
                    continue
                out.append(decide_verdict(
                    f"MoME is more robust to noise than per-rate adapters ({mod}, {snr:g} dB)",
                    metric=f"test CER ({mod}, mean over rates, {snr:g} dB)",
                    ours=_per_seed(doc, f"{mod}/mome/mean_over_rates/{snr_name(snr)}", both),
                    baseline="per_rate",
                    baseline_values=_per_seed(
                        doc, f"{mod}/per_rate/mean_over_rates/{snr_name(snr)}", both),
                    higher_is_better=False, converged=conv, note=note))  # fmt: skip
        mome = done(mod, "mome")
        if len(mome) >= 2:
            out.append(decide_verdict(
                f"the trained router uses the same experts across rates ({mod})",
                metric="JS divergence of expert usage across rates (nats)",
                ours=_per_seed(doc, f"{mod}/routing", mome, "js_across_rates"),
                baseline="untrained router",
                baseline_values=_per_seed(doc, f"{mod}/routing_untrained", mome,
                                          "js_across_rates"),
                higher_is_better=False, converged=gate and _converged(doc, [f"{mod}/mome"]),
                note=note))  # fmt: skip
    return out
