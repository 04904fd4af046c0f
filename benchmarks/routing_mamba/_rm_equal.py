"""The until-flat runs read at equal training tokens: the paper's protocol, beside ours.

Trained until flat, the runs of one comparison stop at different token counts (a model
that flattens early is compared with one that trained on for twice as long). The paper
trains every model on one token budget. :func:`equal_token_rows` reads every run of a
group (the language models; the hybrids) at the largest budget *all* of them reached --
the fewest tokens any run of the group trained on -- from its stored validation curve
(linear interpolation between evaluations; with cycles of equal length the budget falls on
a cycle's end, where each run's schedule had decayed), and repeats the comparisons there:
each model against the group's equal-active baseline (paired t-test over the seeds), RoM's
dense-equivalent ratio and the hybrid RoM's FLOPs saving. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import math
import statistics

from _common import Row, paired_test
from _rm_plan import LN2, RATIOS
from _rm_scaling import bootstrap_ratio, equivalent_ratio

__all__ = [
    "EQUAL_TOKEN_METRICS",
    "bpb_at_tokens",
    "equal_token_rows",
    "groups",
    "run_rows",
]

#: The metrics :func:`equal_token_rows` writes (a per-seed row adds `` seed s``, an
#: interval ``_ci_low`` / ``_ci_high``).
EQUAL_TOKEN_METRICS = (
    "equal_tokens",
    "val_bpb_equal_tokens",
    "val_bpb_equal_tokens_t_p",
    "dense_equivalent_ratio_equal_tokens",
    "dense_equivalent_flops_ratio_equal_tokens",
    "flops_saving_equal_tokens",
)


def groups(names) -> list[tuple[list[str], str]]:
    """The comparisons of a plan's models: the language models against ``dense 1x``, the
    hybrids against ``hybrid dense`` (a group is left out when its baseline is absent)."""
    names = list(names)
    lm = [n for n in names if not n.startswith("hybrid")]
    hyb = [n for n in names if n.startswith("hybrid")]
    return [(g, b) for g, b in ((lm, "dense 1x"), (hyb, "hybrid dense")) if b in g]


def run_rows(runs: dict, names, seeds: list[int]) -> list:
    """:func:`equal_token_rows` of the stored runs (``"<model> seed <s>"`` -> run) of the
    models ``names`` and ``seeds``."""
    names = list(names)
    res = {n: [runs[f"{n} seed {s}"] for s in seeds] for n in names}
    return equal_token_rows(res, seeds, groups(names))


def bpb_at_tokens(run: dict, tokens: float) -> float:
    """Validation bits per byte of ``run`` after ``tokens`` training tokens.

    Linear interpolation between the two evaluations of its curve (``hist``) around
    ``tokens``; ``ValueError`` when the run did not train that far.
    """
    tok, loss = run["hist"]["tokens"], run["hist"]["val_loss"]
    if not tok[0] <= tokens <= tok[-1]:
        raise ValueError(f"the run trained on {tok[0]}-{tok[-1]} tokens, not {tokens}")
    for i in range(1, len(tok)):
        if tok[i] >= tokens:
            t0, t1, l0, l1 = tok[i - 1], tok[i], loss[i - 1], loss[i]
            return (l0 + (l1 - l0) * (tokens - t0) / (t1 - t0)) / LN2
    return loss[0] / LN2  # tokens == tok[0] == tok[-1]: a one-point curve


def _ratio_rows(case, metric, unit, dense, rom, rom_size, seeds):
    ratio = equivalent_ratio(dense, rom, rom_size)
    lo, hi = bootstrap_ratio(dense, rom, rom_size) if len(seeds) > 1 else (math.nan, math.nan)
    return ratio, [
        Row(case, f"{metric}{suffix}", v, unit)
        for suffix, v in (("", ratio), ("_ci_low", lo), ("_ci_high", hi))
        if math.isfinite(v)
    ]


def equal_token_rows(res: dict, seeds: list[int], groups: list[tuple[list[str], str]]) -> list:
    """The rows of the comparisons at equal training tokens.

    Parameters
    ----------
    res : dict
        Model name -> its runs, one per seed in the order of ``seeds`` (``hist``,
        ``params``, ``flops``).
    seeds : list of int
        The seeds of the runs.
    groups : list of (list of str, str)
        The models of each comparison and its equal-active baseline (``dense 1x`` for the
        language models, ``hybrid dense`` for the hybrids).

    Returns
    -------
    list of Row
        Per group, ``<baseline> | equal_tokens`` (the budget, tokens); per model
        ``val_bpb_equal_tokens`` (seed mean, ``vs`` the baseline with the ratio
        baseline / model), its per-seed rows ``val_bpb_equal_tokens seed s`` and, against
        the baseline, ``val_bpb_equal_tokens_t_p`` (two-sided paired t-test). With the
        dense sizes present, ``RoM | dense_equivalent_ratio_equal_tokens`` and
        ``hybrid RoM | flops_saving_equal_tokens`` (each with ``_ci_low`` / ``_ci_high``,
        the 95 % bootstrap interval over the seeds) as :func:`~_rm_scaling.aggregate` and
        :func:`~_rm_scaling.hybrid_saving` compute them from the final values.
    """
    rows = []
    cut = {}
    for group, base in groups:
        budget = min(r["hist"]["tokens"][-1] for n in group for r in res[n])
        rows.append(Row(base, "equal_tokens", budget, "tokens"))
        for n in group:
            cut[n] = [bpb_at_tokens(r, budget) for r in res[n]]
        b = statistics.mean(cut[base])
        for n in group:
            m = statistics.mean(cut[n])
            vs = None if n == base else base
            rows.append(Row(n, "val_bpb_equal_tokens", m, "bits/byte", vs, b / m if vs else None))
            rows += [
                Row(n, f"val_bpb_equal_tokens seed {s}", v, "bits/byte")
                for s, v in zip(seeds, cut[n], strict=True)
            ]
            if vs is not None and len(seeds) >= 2:
                p = paired_test(cut[n], cut[base])["t"]
                rows.append(Row(n, "val_bpb_equal_tokens_t_p", p, "p"))
    sizes = [f"dense {r:g}x" for r in RATIOS]
    if all(n in cut for n in (*sizes, "RoM")):
        dense = {res[n][0]["params"][0]: cut[n] for n in sizes}
        rom_active = res["RoM"][0]["params"][0]
        rows += _ratio_rows(
            "RoM",
            "dense_equivalent_ratio_equal_tokens",
            "x RoM active params",
            dense,
            cut["RoM"],
            rom_active,
            seeds,
        )[1]
    hyb = [n for n in cut if n.startswith("hybrid dense")]
    if "hybrid RoM" in cut and len(hyb) > 1:
        dense = {res[n][0]["flops"]: cut[n] for n in hyb}
        _, rr = _ratio_rows(
            "hybrid RoM",
            "dense_equivalent_flops_ratio_equal_tokens",
            "x RoM FLOP/token",
            dense,
            cut["hybrid RoM"],
            res["hybrid RoM"][0]["flops"],
            seeds,
        )
        rows += rr
        rows += [
            Row("hybrid RoM", r.metric.replace("dense_equivalent_flops_ratio", "flops_saving"),
                1.0 - 1.0 / r.value, "fraction")
            for r in rr
        ]  # fmt: skip
    return rows
