"""Shared parts of ``benchmarks/mxd/frontier.py``: the flatness rule, the plan of runs,
the rows, the verdict rule and the plots (importable by tests without running anything);
``benchmarks/mxd/run.py`` takes its thresholds and :func:`faithful_verdict` from here."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from _common import Row, decide_verdict, paired_test, row_value, verdict_entry

from sci_moe.train import is_flat

__all__ = [
    "FAITHFUL_RECOVERED",
    "FLAT_FRACTION",
    "FLAT_TOL",
    "INFORMATIVE_PROBE",
    "METHODS",
    "PROBE_MARGIN",
    "PROBE_SOURCE",
    "PROBE_TOKENS",
    "PROBE_UNITS",
    "UNTRAINED_FVU",
    "best_lr",
    "faithful_verdict",
    "final_keys",
    "flat",
    "make_rows",
    "plan",
    "plot",
    "run_key",
    "verdicts",
]


METHODS = ("mxd", "transcoder", "skip_transcoder")

#: The flatness criterion: the best validation NMSE of the last ``FLAT_FRACTION`` of the
#: steps is less than ``FLAT_TOL`` (relative) below the best before them.
FLAT_FRACTION = 0.2
FLAT_TOL = 0.01
#: A baseline that leaves more than this fraction of the MLP output's variance unexplained
#: (test FVU, mean over seeds) did not learn: no comparison with it decides a claim.
UNTRAINED_FVU = 0.5
#: Fraction of the mean-ablation loss gap a faithful spliced layer recovers.
FAITHFUL_RECOVERED = 0.9
#: Sparse probing: the task (is a token from the Python documentation or from prose?), the
#: units a probe may read, the training tokens that rank them and fit it.
PROBE_SOURCE = "python_docs"
PROBE_UNITS = 8
PROBE_TOKENS = 8192
#: Below this balanced accuracy of the MLP's own top neurons the probing task is at chance.
INFORMATIVE_PROBE = 0.6
#: "Comparable": MxD's probe accuracy is not significantly below the baseline's, and its
#: mean is at most this far below.
PROBE_MARGIN = 0.02


def flat(curve: list[list[float]], min_steps: int = 0) -> bool:
    """Whether a validation curve ``[[step, nmse], ...]`` (lower is better) is flat.

    Flat: the last step is at least ``min_steps`` and :func:`sci_moe.train.is_flat` with
    ``FLAT_FRACTION`` and ``FLAT_TOL``: at least five evaluations exist, and the best value
    after step ``(1 - FLAT_FRACTION) * last_step`` is less than ``FLAT_TOL`` (relative)
    below the best value up to that step.
    """
    if not curve or curve[-1][0] < min_steps:
        return False
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, tail=FLAT_FRACTION, tol=FLAT_TOL, min_points=5)


def run_key(layer: int, method: str, k: int, lr: float, seed: int) -> str:
    """The key of one training run in the JSON's ``runs``."""
    return f"L{layer}/{method}/k={k}/lr={lr:g}/seed={seed}"


def best_lr(runs: dict, cfg: dict, layer: int, method: str) -> float | None:
    """The swept rate with the lowest final validation NMSE (None until the sweep is done)."""
    keys = {lr: run_key(layer, method, cfg["sweep_k"], lr, cfg["seeds"][0]) for lr in cfg["lrs"]}
    if not all(k in runs for k in keys.values()):
        return None
    return min(cfg["lrs"], key=lambda lr: runs[keys[lr]]["val_nmse"])


def plan(cfg: dict, runs: dict, layer: int) -> list[tuple[str, str, int, float, int]]:
    """The runs of ``layer`` still to do, in order: the sweep, then (once it is done) the
    chosen rate at every ``k`` and seed."""
    todo = []
    s0 = cfg["seeds"][0]
    for m in METHODS:
        for lr in cfg["lrs"]:
            todo.append((run_key(layer, m, cfg["sweep_k"], lr, s0), m, cfg["sweep_k"], lr, s0))
    for m in METHODS:
        lr = best_lr(runs, cfg, layer, m)
        if lr is None:
            continue
        for seed in cfg["seeds"]:
            for k in cfg["ks"]:
                todo.append((run_key(layer, m, k, lr, seed), m, k, lr, seed))
    seen, out = set(), []
    for t in todo:
        if t[0] not in runs and t[0] not in seen:
            seen.add(t[0])
            out.append(t)
    return out


def final_keys(cfg: dict, runs: dict, layer: int, method: str, k: int) -> list[str] | None:
    """Per-seed keys of the chosen rate at ``k``; None until all are done."""
    lr = best_lr(runs, cfg, layer, method)
    if lr is None:
        return None
    keys = [run_key(layer, method, k, lr, s) for s in cfg["seeds"]]
    return keys if all(key in runs for key in keys) else None


# ------------------------------------------------------------------------- rows


def make_rows(doc: dict) -> list[Row]:
    """Rows of the page from the stored runs (means over seeds; per-seed rows for the
    verdict rule)."""
    cfg, runs = doc["machine"]["settings"], doc["runs"]
    rows: list[Row] = []
    for name, rec in doc.get("collection", {}).items():
        rows.append(Row(f"collect/{name}", "tokens", rec["tokens"], "tokens"))
        if rec.get("tokens_per_s"):
            rows.append(Row(f"collect/{name}", "throughput", rec["tokens_per_s"], "tokens/s"))
    for layer in cfg["layers"]:
        ref = doc.get("layers", {}).get(str(layer))
        if ref:
            rows.append(Row(f"L{layer}/original", "ce", ref["original_ce"], "nats/token"))
            rows.append(Row(f"L{layer}/mean_ablation", "ce", ref["mean_ablation_ce"], "nats/token"))
            if "probe_mlp" in ref:
                acc = "balanced accuracy"
                rows.append(Row(f"L{layer}/mlp_neurons", "probe_acc", ref["probe_mlp"], acc))
        for m in METHODS:
            for lr in cfg["lrs"]:
                key = run_key(layer, m, cfg["sweep_k"], lr, cfg["seeds"][0])
                if key in runs:
                    rows.append(
                        Row(f"L{layer}/{m}/lr={lr:g}", "sweep_val_nmse", runs[key]["val_nmse"], "")
                    )
            lr = best_lr(runs, cfg, layer, m)
            if lr is not None:
                rows.append(Row(f"L{layer}/{m}", "chosen_lr", lr, ""))
        for k in cfg["ks"]:
            keys = {m: final_keys(cfg, runs, layer, m, k) for m in METHODS}
            for m in METHODS:
                if keys[m] is None:
                    continue
                recs = [runs[key] for key in keys[m]]
                for s, r in zip(cfg["seeds"], recs, strict=True):
                    case = f"L{layer}/{m}/k={k}/seed={s}"
                    for metric in (
                        "nmse", "fvu", "ce_increase", "recovered", "dead_fraction", "probe_acc",
                    ):  # fmt: skip
                        rows.append(Row(case, metric, r[metric], ""))
                    rows.append(Row(case, "converged", float(r["converged"]), ""))
                    rows.append(Row(case, "steps", r["steps"], "steps"))
                tc = keys["transcoder"]
                for metric, unit in (("nmse", ""), ("fvu", ""), ("ce_increase", "nats/token")):
                    mean = statistics.fmean(r[metric] for r in recs)
                    vs = ratio = None
                    if m != "transcoder" and tc is not None:
                        base = statistics.fmean(runs[key][metric] for key in tc)
                        vs, ratio = f"L{layer}/transcoder/k={k}", (base / mean if mean else None)
                    rows.append(Row(f"L{layer}/{m}/k={k}", f"{metric}_mean", mean, unit, vs, ratio))
                probe = statistics.fmean(r["probe_acc"] for r in recs)
                rows.append(
                    Row(f"L{layer}/{m}/k={k}", "probe_acc_mean", probe, "balanced accuracy")
                )
                rows.append(
                    Row(
                        f"L{layer}/{m}/k={k}",
                        "converged_fraction",
                        statistics.fmean(float(r["converged"]) for r in recs),
                        "",
                    )
                )
    return rows


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim and (layer, k), by a fixed rule on the per-seed rows.

    * MxD above the transcoders on the sparsity-accuracy frontier at (layer, ``k``): the
      spliced loss increase of MxD vs the strongest baseline (the lower mean of the
      transcoder and the skip-transcoder), :func:`_common.decide_verdict` over the seeds
      (paired t-test, alpha 0.05); **not decided** when that baseline's test FVU exceeds
      :data:`UNTRAINED_FVU` (it did not learn). ``converged``: every run of the three
      methods at that (layer, ``k``) met :func:`flat`'s criterion.
    * Sparse probing comparable to transcoders, per layer (:func:`_probe_verdict`): the
      balanced accuracy of a probe on the top :data:`PROBE_UNITS` units (task: a token of
      :data:`PROBE_SOURCE` or of prose), mean over ``k`` per seed, MxD vs the better
      transcoder, paired t-test: significantly below contradicts; significantly above, or
      at most :data:`PROBE_MARGIN` below, reproduces; else not decided. Not decided
      whenever the MLP's own top neurons probe below :data:`INFORMATIVE_PROBE`.
    * Faithful, per layer: reproduced when every MxD run recovers at least
      :data:`FAITHFUL_RECOVERED` of the mean-ablation gap, otherwise not decided (a
      statement about MxD alone, not against a baseline: never decisive).

    Only (layer, ``k``) with every method's seeds done get an entry (a partial JSON).
    """
    cfg = doc["machine"]["settings"]
    seeds = cfg["seeds"]

    def has(layer, m, k):
        return any(r["case"] == f"L{layer}/{m}/k={k}/seed={seeds[-1]}" for r in doc["rows"])

    def per_seed(layer, m, k, metric):
        return [row_value(doc, f"L{layer}/{m}/k={k}/seed={s}", metric) for s in seeds]

    out = []
    for layer in cfg["layers"]:
        recovered = []
        for k in cfg["ks"]:
            if not all(has(layer, m, k) for m in METHODS):
                continue
            mean = {m: statistics.fmean(per_seed(layer, m, k, "ce_increase")) for m in METHODS}
            base = min(("transcoder", "skip_transcoder"), key=lambda m: mean[m])
            conv = all(v == 1.0 for m in METHODS for v in per_seed(layer, m, k, "converged"))
            fvu = statistics.fmean(per_seed(layer, base, k, "fvu"))
            nmse = {m: statistics.fmean(per_seed(layer, m, k, "nmse")) for m in METHODS}
            claim = (
                "MxD is above the transcoders on the sparsity-accuracy frontier "
                f"(layer {layer}, k = {k})"
            )
            note = f"test NMSE MxD {nmse['mxd']:.4g} vs {base} {nmse[base]:.4g}"
            recovered += per_seed(layer, "mxd", k, "recovered")
            if fvu > UNTRAINED_FVU:
                out.append(
                    verdict_entry(
                        claim,
                        verdict="not decided",
                        why=f"the baseline {base} did not learn: test FVU {fvu:.2f} "
                        f"(> {UNTRAINED_FVU}); {note}",
                        metric="ce_increase",
                        ours=mean["mxd"],
                        baseline=base,
                        baseline_value=mean[base],
                        seeds=len(seeds),
                        p_value=None,
                        converged=conv,
                        decisive=False,
                    )
                )
                continue
            out.append(
                decide_verdict(
                    claim,
                    metric="ce_increase",
                    ours=per_seed(layer, "mxd", k, "ce_increase"),
                    baseline=base,
                    baseline_values=per_seed(layer, base, k, "ce_increase"),
                    higher_is_better=False,
                    converged=conv,
                    note=note,
                )
            )
        done = [k for k in cfg["ks"] if all(has(layer, m, k) for m in METHODS)]
        if done:
            out.append(_probe_verdict(doc, layer, done, per_seed))
        if recovered:
            out.append(faithful_verdict(recovered, seeds=len(seeds), layer=layer))
    return out


def faithful_verdict(
    recovered: Sequence[float],
    *,
    seeds: int,
    layer: int | None = None,
    caveat: str = "a claim about MxD alone, never decisive",
) -> dict:
    """The verdict on "the spliced MxD model stays faithful to the original".

    Reproduced when every MxD run recovers at least :data:`FAITHFUL_RECOVERED` of the
    mean-ablation loss gap, otherwise not decided: a statement about MxD alone, not against
    a baseline, so never decisive, and ``converged`` is false (the rule reads no curve).
    Used by ``frontier.py`` (per layer) and ``run.py`` (one layer, ``layer=None``).

    Parameters
    ----------
    recovered : sequence of float, shape (runs,)
        Fraction of the mean-ablation loss gap that each spliced MxD run (every ``k`` and
        seed) recovers; at least one.
    seeds : int
        Number of seeds behind ``recovered``.
    layer : int or None
        The layer, named in the claim (``None``: not named).
    caveat : str
        The end of the stated rule in ``why`` (after "everywhere reproduces; ").

    Returns
    -------
    dict
        A :func:`_common.verdict_entry`.
    """
    if not recovered:
        raise ValueError("faithful_verdict needs at least one recovered fraction")
    worst = min(recovered)
    where = "" if layer is None else f" (layer {layer})"
    return verdict_entry(
        f"the spliced MxD model stays faithful to the original{where}",
        verdict="reproduced" if worst >= FAITHFUL_RECOVERED else "not decided",
        why=f"MxD recovers {worst:.3f}-{max(recovered):.3f} of the mean-ablation loss gap "
        f"over every k and seed (rule: at least {FAITHFUL_RECOVERED} everywhere "
        f"reproduces; {caveat})",
        metric="recovered",
        ours=worst,
        baseline="the original model",
        baseline_value=1.0,
        seeds=seeds,
        p_value=None,
        converged=False,
        decisive=False,
    )


def _probe_verdict(doc: dict, layer: int, ks: list[int], per_seed) -> dict:
    """Sparse probing with MxD units comparable to the transcoders' (see :func:`verdicts`)."""
    seeds = doc["machine"]["settings"]["seeds"]
    acc = {}
    for m in METHODS:
        by_k = [per_seed(layer, m, k, "probe_acc") for k in ks]
        acc[m] = [statistics.fmean(v) for v in zip(*by_k, strict=True)]
    base = max(("transcoder", "skip_transcoder"), key=lambda m: statistics.fmean(acc[m]))
    ours, theirs = statistics.fmean(acc["mxd"]), statistics.fmean(acc[base])
    conv = all(v == 1.0 for m in METHODS for k in ks for v in per_seed(layer, m, k, "converged"))
    mlp = row_value(doc, f"L{layer}/mlp_neurons", "probe_acc")
    claim = f"sparse probing with MxD units is comparable to transcoders (layer {layer})"
    common = dict(
        metric=f"probe_acc (top {PROBE_UNITS} units, {PROBE_SOURCE} vs prose, mean over k)",
        ours=ours,
        baseline=base,
        baseline_value=theirs,
        seeds=len(seeds),
        converged=conv,
    )
    if mlp < INFORMATIVE_PROBE:
        why = (
            f"the task is at chance: the MLP's own top neurons probe at {mlp:.3f} "
            f"(< {INFORMATIVE_PROBE})"
        )
        return verdict_entry(
            claim, verdict="not decided", why=why, p_value=None, decisive=False, **common
        )
    res = paired_test(acc["mxd"], acc[base])
    p, diff = res["t"], res["mean_diff"]
    if p < 0.05 and diff < 0:
        verdict = "contradicted"
    elif (p < 0.05 and diff > 0) or diff >= -PROBE_MARGIN:
        verdict = "reproduced"
    else:
        verdict = "not decided"
    why = (
        f"balanced accuracy MxD {ours:.3f} vs {base} {theirs:.3f} (MLP neurons {mlp:.3f}); paired "
        f"t-test over {res['n']} seeds p = {p:.2g}; rule: significantly below contradicts, "
        f"significantly above or at most {PROBE_MARGIN} below reproduces (comparable)"
    )
    decisive = verdict != "not decided" and conv and p < 0.05
    return verdict_entry(claim, verdict=verdict, why=why, p_value=p, decisive=decisive, **common)


# ------------------------------------------------------------------------- plots


def plot(doc: dict, folder: Path, tag: str) -> None:
    """``mxd_1m{tag}_frontier.png`` (loss increase and NMSE vs k, per layer) and
    ``mxd_1m{tag}_curves.png`` (validation curves of the chosen runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg, runs = doc["machine"]["settings"], doc["runs"]
    colors = {"mxd": "C3", "transcoder": "C0", "skip_transcoder": "C2"}
    layers = cfg["layers"]
    fig, axes = plt.subplots(2, len(layers), figsize=(5 * len(layers), 7), squeeze=False)
    for j, layer in enumerate(layers):
        for i, metric in enumerate(("ce_increase", "nmse")):
            ax = axes[i][j]
            for m in METHODS:
                ks, mean, lo, hi = [], [], [], []
                for k in cfg["ks"]:
                    keys = final_keys(cfg, runs, layer, m, k)
                    if keys is None:
                        continue
                    vals = [runs[key][metric] for key in keys]
                    ks.append(k)
                    mean.append(statistics.fmean(vals))
                    lo.append(min(vals))
                    hi.append(max(vals))
                if ks:
                    ax.plot(ks, mean, "o-", color=colors[m], label=m)
                    ax.fill_between(ks, lo, hi, color=colors[m], alpha=0.2)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("active units k")
            ax.set_ylabel(
                "spliced CE increase (nats/token)" if metric == "ce_increase" else "test NMSE"
            )
            ax.set_title(f"layer {layer}")
            ax.legend(fontsize=8)
    fig.suptitle("SmolLM2-135M MLPs, equal parameters (band: seed range)", fontsize=10)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / f"mxd_1m{tag}_frontier.png", dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(layers), figsize=(5 * len(layers), 3.8), squeeze=False)
    for j, layer in enumerate(layers):
        ax = axes[0][j]
        for m in METHODS:
            for k in cfg["ks"]:
                keys = final_keys(cfg, runs, layer, m, k)
                for n, key in enumerate(keys or []):
                    c = runs[key]["curve"]
                    label = m if (k == cfg["ks"][0] and n == 0) else None
                    steps, vals = [s for s, _ in c], [v for _, v in c]
                    ax.plot(steps, vals, color=colors[m], lw=0.8, alpha=0.7, label=label)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("validation NMSE")
        ax.set_title(f"layer {layer}: every k and seed")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / f"mxd_1m{tag}_curves.png", dpi=110)
    plt.close(fig)
