"""The orthogonality benchmark's grid, downstream probes, rows, verdicts and plots.

Shared by ``orthogonality.py`` (its plan, trainings and pieces) and kept apart so that
each file holds one concept: what is measured and decided here, how it is run there.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from _common import Row, concat, row_value, seed_verdict
from _routing_science import flat

ORTHO = (0.0, 1e-3, 1e-2)  # orthogonality_coef (L_o, per-token mean)
VAR = (0.0, 0.1, 1.0)  # variance_coef (L_v, per-token mean)
TASKS = ("topic", "sentiment")
BASELINE = "o0_v0"
METRICS = {  # metric: (unit, higher is better)
    "val_loss": ("nats/byte", False),
    "overlap": ("cos", False),
    "score_variance": ("score^2", True),
    "max_violation": ("MaxVio", False),
    "probe_acc": ("accuracy", True),
}
UNITS = {"converged": "bool", "steps": "steps"}
DIAG = ("overlap", "score_variance", "max_violation")  # routing diagnostics of evaluate()


def record_curve(rec: dict) -> list[list[float]]:
    """One training cycle's record as its validation curve ``[[step, val_loss], ...]``
    (steps from the cycle's own start)."""
    return [[s, v] for s, v in zip(rec["step"], rec["val_loss"], strict=True)]


def unzip(curve: list[list[float]]) -> tuple[list[int], list[float]]:
    """A curve ``[[step, value], ...]`` as ``(steps, values)``."""
    return [s for s, _ in curve], [v for _, v in curve]


def cycles_curve(cycles: list[dict]) -> tuple[list[int], list[float]]:
    """The validation curve ``(steps, losses)`` of consecutive cycle records on one step axis
    (:func:`_common.concat`: each cycle ends at its last evaluation, and a later cycle's
    evaluation before its first step repeats the previous end and is left out)."""
    return unzip(concat([record_curve(c) for c in cycles]))


def curve_flat(curve: list[list[float]]) -> bool:
    """``FLAT_RULE`` (:func:`_routing_science.flat`) on a curve ``[[step, loss], ...]``."""
    return flat(*unzip(curve))


def case_name(ortho: float, var: float) -> str:
    return f"o{ortho:g}_v{var:g}"


def grid(p: dict) -> list[tuple[str, float, float]]:
    return [(case_name(o, v), o, v) for o in p["ortho"] for v in p["var"]]


def probe_tasks(per_class: int) -> dict:
    """The held-out tasks: ``{name: (texts, labels, groups or None)}`` (fixed seed 0)."""
    import numpy as np

    from sci_moe.data.fed_tasks import task_sentences
    from sci_moe.data.newsgroups import newsgroup_sentences

    texts, labels, groups = newsgroup_sentences(6, 40, max_per_class=per_class, seed=0)
    s_texts, s_labels = task_sentences("sentiment", min(per_class, 100), seed=0)
    return {
        "topic": (texts, labels.astype(int), groups),
        "sentiment": (list(s_texts), np.asarray(s_labels, dtype=int), None),
    }


def model_features(model, texts: list[str]):
    """Frozen features of each text, shape ``(len(texts), (n_layers + 1) d_model + M E)``:
    the mean over its bytes of the residual stream after every block and of the final
    normalised hidden state, and each of the ``M`` MoE layers' share of the text's
    assignments per expert (its expert usage: what specialisation would change). Texts
    longer than ``seq_len`` run as consecutive windows."""
    import numpy as np
    import torch

    from sci_moe.language import encode

    L = model.config.seq_len
    device = next(model.parameters()).device
    seen: dict = {}
    hooks = [model.norm.register_forward_hook(lambda _m, _i, out: seen.__setitem__("norm", out))]
    for i, block in enumerate(model.blocks):
        hooks.append(
            block.register_forward_hook(lambda _m, _i, out, i=i: seen.__setitem__(i, out[0]))
        )
    was = model.training
    model.eval()
    feats = []
    try:
        with torch.no_grad():
            for text in texts:
                ids = encode(text).long().to(device)
                sums, loads = 0, 0
                for start in range(0, ids.numel(), L):
                    _, _, infos = model(ids[start : start + L].unsqueeze(0))
                    keys = [*range(len(model.blocks)), "norm"]
                    sums = sums + torch.cat([seen[k][0].sum(0).cpu() for k in keys])
                    loads = loads + torch.cat([inf.routing.load.float().cpu() for inf in infos])
                n_moe = len(model.moe_layers())
                usage = loads / (loads.sum() / max(1, n_moe)).clamp_min(1)
                feats.append(torch.cat([sums / ids.numel(), usage]).double().cpu().numpy())
    finally:
        for h in hooks:
            h.remove()
        model.train(was)
    return np.stack(feats)


def byte_features(texts: list[str]):
    """Normalised byte histograms (256 features): the non-learned reference."""
    import numpy as np

    out = np.zeros((len(texts), 256))
    for i, t in enumerate(texts):
        b = np.frombuffer(t.encode("utf-8"), dtype=np.uint8)
        out[i] = np.bincount(b, minlength=256) / max(1, b.size)
    return out


def probe_accuracy(X, y, groups=None, folds: int = 5) -> float:
    """Mean 5-fold accuracy of a standardised logistic regression (folds grouped by
    ``groups`` when given, stratified, fixed seed)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if groups is None:
        cv = StratifiedKFold(folds, shuffle=True, random_state=0)
    else:
        cv = StratifiedGroupKFold(folds, shuffle=True, random_state=0)
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    return float(cross_val_score(clf, X, y, groups=groups, cv=cv).mean())


def make_rows(p: dict, seeds: list[int], runs: dict) -> list[Row]:
    """Rows of the finished part: the pretraining, the reference probes, and per grid
    point the seed means (``vs`` the baseline, ratio > 1: the losses' side better), sds
    and per-seed values of the seeds whose whole grid is done."""
    rows: list[Row] = []
    if not runs.get("pretrain"):
        return rows
    steps, loss = cycles_curve(runs["pretrain"])
    rows += [
        Row("pretrain", "val_loss", loss[-1], "nats/byte"),
        Row("pretrain", "steps", float(steps[-1]), "steps"),
        Row("pretrain", "cycles", float(len(runs["pretrain"])), "cycles"),
        Row("pretrain", "converged", float(flat(steps, loss)), "bool"),
    ]
    ref = runs.get("reference")
    if ref is not None:
        for case in ("pretrained", "bytes"):
            for t in TASKS:
                rows.append(Row(case, f"probe_{t}", ref[case][t], "accuracy"))
            rows.append(Row(case, "probe_acc", statistics.fmean(ref[case].values()), "accuracy"))
        rows.append(Row("chance", "probe_acc", 0.5, "accuracy"))
    ft = runs.get("finetune", {})
    if ft:  # every fine-tune starts from the same weights: the first one's initial evaluation
        first = next(iter(ft.values()))["initial"]
        rows += [Row("pretrained", m, v, METRICS[m][0]) for m, v in first.items()]
    done = [s for s in seeds if all(f"{n}/s{s}" in ft for n, _, _ in grid(p))]
    if not done:
        return rows
    value = {
        m: (lambda r, m=m: statistics.fmean(r["probe"].values()) if m == "probe_acc" else r[m])
        for m in METRICS
    }
    for t in TASKS:
        value[f"probe_{t}"] = lambda r, t=t: r["probe"][t]
    value["converged"] = lambda r: float(r["converged"])
    value["steps"] = lambda r: float(r["steps"])
    means = {}
    for name, _, _ in grid(p):
        recs = [ft[f"{name}/s{s}"] for s in done]
        for m, get in value.items():
            vals = [get(r) for r in recs]
            means[(name, m)] = statistics.fmean(vals)
            unit, higher = METRICS.get(m, (UNITS.get(m, "accuracy"), True))
            vs = ratio = None
            if name != BASELINE and m in METRICS:
                base = means[(BASELINE, m)]
                vs = BASELINE
                ratio = (
                    (means[(name, m)] / base if higher else base / means[(name, m)])
                    if (base and means[(name, m)])
                    else None
                )
            rows.append(Row(name, m, means[(name, m)], unit, vs, ratio))
            if len(vals) > 1:
                rows.append(Row(name, f"{m}_sd", statistics.stdev(vals), unit))
            rows += [Row(name, f"{m} seed {s}", x, unit) for s, x in zip(done, vals, strict=True)]
    return rows


def _coefs(case: str) -> tuple[float, float]:
    """``(orthogonality_coef, variance_coef)`` of a grid point ``o<ortho>_v<var>``."""
    o, v = case[1:].split("_v")
    return float(o), float(v)


def best_point(doc: dict) -> str | None:
    """The grid point with both losses on (``L_o`` and ``L_v`` weights > 0, the paper's
    method) and the lowest mean news validation loss.

    Points with one loss only are the one-loss ablations: the claims are about
    ``L_o + L_v`` together, so they never stand in for the method (the first rule, any
    non-baseline point, chose ``o0_v0.1``, which has no orthogonality loss).
    """
    cases = {
        r["case"] for r in doc["rows"] if r["metric"] == "val_loss" and r["case"].startswith("o")
    }
    cases = {c for c in cases if min(_coefs(c)) > 0}
    if not cases:
        return None
    return min(sorted(cases), key=lambda c: row_value(doc, c, "val_loss"))


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the abstract, by a fixed rule (issue 44).

    The best grid point (:func:`best_point`: lowest mean news validation loss of the
    points with both losses on; chosen on the same seeds, which favours it on that metric) against
    the auxiliary-loss-only baseline ``o0_v0``: expert overlap lower, routing-score
    variance higher, MaxVio not higher ("preserves balance": a resolved rise contradicts
    it), news validation loss lower, held-out probe accuracy higher. Paired t-test over
    the seeds whose whole grid is done (:func:`_common.seed_verdict`); converged when the
    pretraining and every fine-tune of both points are flat. No verdicts before a seed's
    grid is complete.
    """
    best = best_point(doc)
    if best is None:
        return []
    has = {(r["case"], r["metric"]) for r in doc["rows"]}
    seeds = sorted(
        int(m.rsplit(" ", 1)[1]) for c, m in has if c == BASELINE and m.startswith("val_loss seed")
    )
    conv = row_value(doc, "pretrain", "converged") == 1 and all(
        row_value(doc, c, "converged") == 1 for c in (best, BASELINE)
    )
    note = (
        f"best grid point {best} (lowest mean news validation loss of the points with both "
        "losses on)"
    )
    claims = (
        ("L_o + L_v reduce expert overlap", "overlap"),
        ("L_o + L_v increase the routing-score variance", "score_variance"),
        ("L_o + L_v preserve load balance (global MaxVio not higher)", "max_violation"),
        ("L_o + L_v improve the fine-tuned LM (news validation loss)", "val_loss"),
        ("L_o + L_v improve held-out downstream tasks (linear-probe accuracy)", "probe_acc"),
    )
    return [
        seed_verdict(
            claim,
            doc,
            metric=metric,
            ours=best,
            baseline=BASELINE,
            higher_is_better=METRICS[metric][1],
            converged=conv,
            seeds=seeds,
            note=note,
        )
        for claim, metric in claims
    ]


# -------------------------------------------------------------------------- plots


def save_plots(p: dict, seeds: list[int], runs: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    steps, loss = cycles_curve(runs["pretrain"])
    axes[0].plot(steps, loss, color="black")
    axes[0].set_title("pretraining (all text)")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("validation loss (nats/byte)")
    cmap = plt.get_cmap("viridis")
    ft = runs.get("finetune", {})
    for i, (name, _, _) in enumerate(grid(p)):
        for j, s in enumerate(seeds):
            rec = ft.get(f"{name}/s{s}")
            if rec is None:
                continue
            st, lo = cycles_curve(rec["cycles"])
            color = "tab:red" if name == BASELINE else cmap(i / max(1, len(grid(p)) - 1))
            axes[1].plot(st, lo, color=color, alpha=0.7, lw=0.9, label=name if j == 0 else None)
    axes[1].set_title("fine-tuning on news (every seed)")
    axes[1].set_xlabel("step")
    axes[1].legend(fontsize=6, ncol=2)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    paths = [out / "routing_science_orthogonality_curves.png"]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    done = [s for s in seeds if all(f"{n}/s{s}" in ft for n, _, _ in grid(p))]
    if done:
        fig, axes = plt.subplots(1, len(METRICS), figsize=(3.2 * len(METRICS), 3.0))
        for ax, m in zip(axes, METRICS, strict=True):
            img = np.array(
                [
                    [
                        statistics.fmean(
                            statistics.fmean(ft[f"{case_name(o, v)}/s{s}"]["probe"].values())
                            if m == "probe_acc"
                            else ft[f"{case_name(o, v)}/s{s}"][m]
                            for s in done
                        )
                        for v in p["var"]
                    ]
                    for o in p["ortho"]
                ]
            )
            im = ax.imshow(img, cmap="viridis")
            ax.set_xticks(range(len(p["var"])), [f"{v:g}" for v in p["var"]])
            ax.set_yticks(range(len(p["ortho"])), [f"{o:g}" for o in p["ortho"]])
            ax.set_xlabel("variance coef")
            ax.set_title(m, fontsize=9)
            fig.colorbar(im, ax=ax, fraction=0.046)
        axes[0].set_ylabel("orthogonality coef")
        fig.tight_layout()
        paths.append(out / "routing_science_orthogonality_grid.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


# --------------------------------------------------------------------------- main
