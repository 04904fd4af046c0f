"""The analysis of ``run.py``: mean curves, tokens to a loss, the dense-equivalent ratio, the rows.

Seed-mean validation curves (nats over training tokens), the tokens at which a curve
reaches a loss, the least-squares fit of the dense models' bits per byte against the log
of their active parameters and RoM's dense-equivalent ratio on it (with a 95 % bootstrap
interval over the seeds), and :func:`aggregate`, the rows of (a)-(d) from the
complete seeds' runs. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import math
import random
import statistics

from _common import Row
from _rm_plan import LN2, RATIOS, models

__all__ = [
    "aggregate",
    "bootstrap_ratio",
    "equivalent_ratio",
    "fit",
    "hybrid_saving",
    "mean_curve",
    "tokens_to",
]


def tokens_to(tokens, losses, target):
    """First training-token count at which ``losses`` reach ``target``.

    Linear interpolation between the two evaluations around the crossing (``None`` if
    the curve never gets there; ``tokens[0]`` if it starts below).
    """
    for i, (tok, loss) in enumerate(zip(tokens, losses, strict=True)):
        if loss <= target:
            if i == 0:
                return float(tok)
            t0, l0 = tokens[i - 1], losses[i - 1]
            return float(t0 + (l0 - target) / (l0 - loss) * (tok - t0))
    return None


def mean_curve(runs):
    """Training tokens and the seed-mean validation loss (nats) at each evaluation.

    Runs of unequal length (until flat) are held at their last value up to the longest
    run's tokens (the evaluations of a plan fall on the same tokens in every run).
    """
    tok = max((r["hist"]["tokens"] for r in runs), key=len)
    losses = [r["hist"]["val_loss"] for r in runs]
    return tok, [statistics.mean(v[min(i, len(v) - 1)] for v in losses) for i in range(len(tok))]


def fit(xs, ys):
    """Least squares ``y = a + b x``."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return my - b * mx, b


def equivalent_ratio(dense: dict, rom: list[float], rom_active: int, idx=None) -> float:
    """The dense size (multiple of RoM's active parameters) whose fitted loss is RoM's.

    ``dense``: {active parameters: per-seed bits per byte}; ``idx``: the seeds (indices)
    to average (a bootstrap resample), default all.
    """
    idx = range(len(rom)) if idx is None else idx
    xs = [math.log(n) for n in dense]
    ys = [statistics.mean(v[i] for i in idx) for v in dense.values()]
    a, b = fit(xs, ys)
    y = statistics.mean(rom[i] for i in idx)
    if b >= 0:
        return math.nan  # bigger dense models not better: no size to match
    return math.exp((y - a) / b) / rom_active


def bootstrap_ratio(dense, rom, rom_active, n=2000, seed=0) -> tuple[float, float]:
    """95 % percentile interval of :func:`equivalent_ratio` over seed resamples."""
    rng = random.Random(seed)
    k = len(rom)
    vals = sorted(
        v
        for v in (
            equivalent_ratio(dense, rom, rom_active, [rng.randrange(k) for _ in range(k)])
            for _ in range(n)
        )
        if not math.isnan(v)
    )
    if len(vals) < n // 2:
        return math.nan, math.nan
    return vals[int(0.025 * len(vals))], vals[int(0.975 * len(vals)) - 1]


def aggregate(p, seeds, runs, rows, tables, curves) -> dict:
    """Rows of (a)-(d) from the complete seeds' runs; returns the scaling fit."""
    names = list(models(p))
    res = {n: [runs[f"{n} seed {s}"] for s in seeds] for n in names}
    for name in names:
        tok, loss = mean_curve(res[name])
        curves[name] = (tok, [v / LN2 for v in loss])
    lm = [n for n in names if not n.startswith("hybrid")]
    hyb = ["hybrid dense", "hybrid RoM"] + [n for n in names if n.startswith("hybrid dense ")]
    for group, base in ((lm, "dense 1x"), (hyb, "hybrid dense")):
        base_bpb = statistics.mean(r["hist"]["val_loss"][-1] / LN2 for r in res[base])
        # the base's own mean curve ends exactly at base_final (base_bpb * LN2 can round
        # one ulp below it, and then the base would "never reach" its own final loss)
        base_tok, base_curve = mean_curve(res[base])
        base_final = base_curve[-1]
        base_reach = tokens_to(base_tok, base_curve, base_final)
        base_flops = res[base][0]["flops"]
        for name in group:
            rs = res[name]
            vs = None if name == base else base
            bpb = [r["hist"]["val_loss"][-1] / LN2 for r in rs]
            m = statistics.mean(bpb)
            sd = statistics.stdev(bpb) if len(bpb) > 1 else 0.0
            act, tot = rs[0]["params"]
            conv = [r["converged"] for r in rs]
            rows.append(Row(name, "val_bpb", m, "bits/byte", vs, base_bpb / m if vs else None))
            rows.append(Row(name, "val_bpb_sd", sd, "bits/byte"))
            rows.append(Row(name, "val_perplexity", 2.0**m, "per byte"))
            for s, v, c in zip(seeds, bpb, conv, strict=True):
                rows.append(Row(name, f"val_bpb seed {s}", v, "bits/byte"))
                rows.append(Row(name, f"converged seed {s}", float(c), "bool"))
            rows.append(Row(name, "converged_runs", sum(conv), "runs"))
            conv_cell = f"{sum(conv)}/{len(rs)}"
            if "steps" in rs[0]:  # until flat: how long each run trained and why it stopped
                capped = [r["reason"] == "cap" for r in rs]
                for s, r, c in zip(seeds, rs, capped, strict=True):
                    rows.append(Row(name, f"steps seed {s}", r["steps"], "steps"))
                    rows.append(Row(name, f"tokens seed {s}", r["tokens"], "tokens"))
                    rows.append(Row(name, f"cycles seed {s}", r["cycles"], "cycles"))
                    rows.append(Row(name, f"capped seed {s}", float(c), "bool"))
                steps_mean = statistics.mean(r["steps"] for r in rs)
                rows.append(Row(name, "steps_mean", steps_mean, "steps"))
                rows.append(Row(name, "capped_runs", sum(capped), "runs"))
                conv_cell += f" ({steps_mean:.0f} steps)"
            rows.append(Row(name, "active_params", act, "params"))
            rows.append(Row(name, "total_params", tot, "params"))
            fl = rs[0]["flops"]
            rows.append(
                Row(name, "active_flops_per_token", fl, "FLOP", vs, base_flops / fl if vs else None)
            )
            reach = tokens_to(*mean_curve(rs), base_final)
            train_fl = None
            if reach is not None:
                rows.append(
                    Row(
                        name,
                        "tokens_to_base_final",
                        reach,
                        "tokens",
                        vs,
                        base_reach / reach if vs else None,
                    )
                )
                train_fl = 3 * fl * reach
                rows.append(
                    Row(
                        name,
                        "train_flops_to_base_final",
                        train_fl,
                        "FLOP",
                        vs,
                        3 * base_flops * base_reach / train_fl if vs else None,
                    )
                )
            if "ctx" in rs[0]:
                for mult in (1, 2, 4):
                    vals = [r["ctx"][str(mult)] for r in rs]
                    b = statistics.mean(r["ctx"][str(mult)] for r in res[base])
                    v = statistics.mean(vals)
                    rows.append(
                        Row(name, f"val_bpb_ctx{mult}x", v, "bits/byte", vs, b / v if vs else None)
                    )
                    rows += [
                        Row(name, f"val_bpb_ctx{mult}x seed {s}", x, "bits/byte")
                        for s, x in zip(seeds, vals, strict=True)
                    ]
                    tables["ctx"].append([name, f"{mult}x", v])
            tables["lm" if name in lm else "hyb"].append(
                [name, act, tot, m, sd, conv_cell, fl, reach]
            )
    dense = {
        res[f"dense {r:g}x"][0]["params"][0]: [
            x["hist"]["val_loss"][-1] / LN2 for x in res[f"dense {r:g}x"]
        ]
        for r in RATIOS
    }
    rom = [x["hist"]["val_loss"][-1] / LN2 for x in res["RoM"]]
    rom_active = res["RoM"][0]["params"][0]
    xs = [math.log(n) for n in dense]
    a, b = fit(xs, [statistics.mean(v) for v in dense.values()])
    ratio = equivalent_ratio(dense, rom, rom_active)
    lo, hi = bootstrap_ratio(dense, rom, rom_active) if len(seeds) > 1 else (math.nan, math.nan)
    rows.append(Row("scaling fit", "intercept_a", a, "bits/byte"))
    rows.append(Row("scaling fit", "slope_b", b, "bits/byte per ln(params)"))
    for metric, v in (
        ("dense_equivalent_ratio", ratio),
        ("dense_equivalent_ratio_ci_low", lo),
        ("dense_equivalent_ratio_ci_high", hi),
    ):
        if math.isfinite(v):
            rows.append(Row("RoM", metric, v, "x RoM active params"))
    for n, v in dense.items():
        tables["fit"].append([n, n / rom_active, statistics.mean(v), a + b * math.log(n)])
    out = dict(a=a, b=b, dense=dense, rom=rom, rom_active=rom_active, ratio=ratio, ci=(lo, hi))
    if len(hyb) > 2:
        out["hybrid"] = hybrid_saving(res, hyb[2:], seeds, rows)
    return out


def hybrid_saving(res: dict, sizes: list[str], seeds: list[int], rows: list) -> dict:
    """The hybrid RoM's FLOPs saving at equal perplexity, on the dense hybrids' curve.

    The dense hybrids (the equal-active one and ``sizes``) are fitted as bits per byte
    against the log of their active FLOPs per token (:func:`fit`); the dense hybrid of the
    hybrid RoM's fitted loss has ``R`` times its FLOPs (:func:`equivalent_ratio`, with a
    95 % bootstrap interval over the seeds), and the saving is ``1 - 1 / R``: the share of
    the FLOPs per token of the dense hybrid of equal perplexity that the hybrid RoM does
    without (negative: RoM costs more). Appends the rows
    ``hybrid RoM | dense_equivalent_flops_ratio`` (and ``_ci_low`` / ``_ci_high``),
    ``flops_saving`` (and its interval) and the fit's
    ``hybrid scaling fit | intercept_a / slope_b``.

    Parameters
    ----------
    res : dict
        Model name -> its runs, one per seed (``flops``, ``hist``).
    sizes : list of str
        The dense hybrid names beyond ``"hybrid dense"``.
    seeds : list of int
        The seeds of the runs (for the interval: more than one).
    rows : list
        The run's rows, appended to.

    Returns
    -------
    dict
        ``a``, ``b`` (the fit), ``dense`` ({FLOPs/token: per-seed bits per byte}), ``rom``,
        ``rom_flops``, ``ratio``, ``ci``, ``saving``.
    """
    dense = {
        res[n][0]["flops"]: [x["hist"]["val_loss"][-1] / LN2 for x in res[n]]
        for n in ["hybrid dense", *sizes]
    }
    rom = [x["hist"]["val_loss"][-1] / LN2 for x in res["hybrid RoM"]]
    rom_flops = res["hybrid RoM"][0]["flops"]
    a, b = fit([math.log(n) for n in dense], [statistics.mean(v) for v in dense.values()])
    ratio = equivalent_ratio(dense, rom, rom_flops)
    lo, hi = bootstrap_ratio(dense, rom, rom_flops) if len(seeds) > 1 else (math.nan, math.nan)
    rows.append(Row("hybrid scaling fit", "intercept_a", a, "bits/byte"))
    rows.append(Row("hybrid scaling fit", "slope_b", b, "bits/byte per ln(FLOP/token)"))
    for suffix, v in (("", ratio), ("_ci_low", lo), ("_ci_high", hi)):
        if math.isfinite(v):
            rows.append(
                Row("hybrid RoM", f"dense_equivalent_flops_ratio{suffix}", v, "x RoM FLOP/token")
            )
            rows.append(Row("hybrid RoM", f"flops_saving{suffix}", 1.0 - 1.0 / v, "fraction"))
    return dict(a=a, b=b, dense=dense, rom=rom, rom_flops=rom_flops, ratio=ratio, ci=(lo, hi))
