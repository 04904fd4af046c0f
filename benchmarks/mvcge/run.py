"""MvCGE (multi-view collaborative graph experts) against converged multi-view baselines.

Data (:func:`sci_moe.graphs.mvcge.mvcge_csbm_config`, generated with a known answer): a
3-view contextual SBM over N = 600 nodes, 4 classes, mean degree 6 per view, shared weak
Gaussian features (class means 1.0 e_c, unit noise, d = 8), split 20 % train, 20 %
validation, 60 % test, in two settings:

* ``complementary``: view v (v = 0, 1, 2) makes class v a community (contrast 0.7), so
  every view is informative about a different class and only the views together identify
  every class;
* ``consistent``: every view has the same four communities (contrast 0.4, independent
  edges): the views agree.

The reference is the exact oracle-neighbour Bayes accuracy (every other label known; a
ceiling for any classifier) with all views, each view, and the features alone.

Contestants, all on the shared trainer (:func:`sci_moe.graphs.mvcge.train_node_classifier`;
2 layers, hidden 32, dropout 0.5, Adam lr 0.01, weight decay 5e-4, full batch):

* ``MLP`` (features only); ``GCN view v``; ``best single-view GCN`` (per seed, the view
  with the best validation accuracy); ``per-view GCN ensemble`` (the three single-view
  GCNs trained apart, softmax averaged); ``early fusion`` (GCN on the summed adjacency);
  ``late fusion`` (one GCN per view trained jointly, logits averaged); ``attention fusion
  (HAN)`` (per-view GCN encoders, HAN's semantic attention);
* ``MvCGE``: 4 shared GCN experts per layer, top-2, per-node graph-aware routing, L_le
  on the router's full softmax (alpha 0.01), L_gd (beta 0.1), concatenated views;
  ablations ``MvCGE -L_le`` (alpha = 0) and ``MvCGE -L_gd`` (beta = 0).

Training until flat: at most 1000 epochs (200 with ``--quick``), the validation
cross-entropy evaluated every 2 epochs, stop after ``patience`` evaluations without a new
best (the weights of the best validation loss are kept). A run counts as **converged**
(flat) when the best validation loss of its last 20 % of evaluations is less than 1 %
below the best before them; ``patience`` is 20 % of the most evaluations a run can have,
so a run that stops early is flat by construction and only a run that reaches the cap can
fail. Learning curves (validation loss and accuracy) are stored in ``curves``.

Ten seeds (graph and model seed ``seed + i``); paired t-tests over the seeds
(:func:`_common.seed_verdict` on the per-seed rows); the verdicts of the paper's claims in
``verdicts`` (:func:`verdicts`; ``--verdicts-only PATH`` re-derives them).

Run: ``python benchmarks/mvcge/run.py [--quick] [--json PATH] [--resume] [--max-hours H]
[--plots DIR] [--threads N]``. The partial JSON is written after every seed; ``--resume``
continues it (seeds already in the JSON are kept).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    row_value,
    seed_verdict,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)

from sci_moe.graphs import bayes_optimal_accuracy, make_multiview_csbm
from sci_moe.graphs.mvcge import (
    MLP,
    AttentionFusionGCN,
    EarlyFusionGCN,
    LateFusionGCN,
    MvCGE,
    PerViewGCN,
    TrainConfig,
    mvcge_csbm_config,
    train_node_classifier,
)
from sci_moe.stats import mmd2, pairwise_js_divergence
from sci_moe.train import is_flat, seed_everything

BENCHMARK = "mvcge"
SETTINGS = ("complementary", "consistent")
HIDDEN, LAYERS, DROPOUT, LR, WD = 32, 2, 0.5, 0.01, 5e-4
EXPERTS, TOP_K, ALPHA, BETA = 4, 2, 0.01, 0.1
FLAT_FRACTION, FLAT_TOL = 0.2, 0.01
TRAINED = (
    "MLP",
    "GCN view 0",
    "GCN view 1",
    "GCN view 2",
    "early fusion",
    "late fusion",
    "attention fusion (HAN)",
    "MvCGE",
    "MvCGE -L_le",
    "MvCGE -L_gd",
)
DERIVED = ("best single-view GCN", "per-view GCN ensemble")
#: The L_le / L_gd ablations run where complementarity is at stake (and to fit the budget).
ABLATIONS = ("MvCGE -L_le", "MvCGE -L_gd")
ABLATION_SETTINGS = ("complementary",)


def methods_of(setting: str) -> tuple[str, ...]:
    """The trained contestants of ``setting`` (the ablations only in ABLATION_SETTINGS)."""
    if setting in ABLATION_SETTINGS:
        return TRAINED
    return tuple(m for m in TRAINED if m not in ABLATIONS)


BASELINES = (
    "MLP",
    "best single-view GCN",
    "per-view GCN ensemble",
    "early fusion",
    "late fusion",
    "attention fusion (HAN)",
)
MVCGE_VARIANTS = {"MvCGE": {}, "MvCGE -L_le": {"le_weight": 0.0}, "MvCGE -L_gd": {"gd_weight": 0.0}}


def build(name: str, in_dim: int, num_classes: int, num_views: int) -> torch.nn.Module:
    """The model ``name`` (weights from the current torch seed)."""
    gcn = dict(
        in_dim=in_dim,
        hidden_dim=HIDDEN,
        num_classes=num_classes,
        num_layers=LAYERS,
        dropout=DROPOUT,
    )
    if name == "MLP":
        return MLP(**gcn)
    if name.startswith("GCN view "):
        return PerViewGCN(int(name.rsplit(" ", 1)[1]), **gcn)
    if name == "early fusion":
        return EarlyFusionGCN(**gcn)
    if name == "late fusion":
        return LateFusionGCN(num_views, **gcn)
    if name == "attention fusion (HAN)":
        return AttentionFusionGCN(num_views, **gcn)
    kw = dict(
        num_experts=EXPERTS,
        top_k=TOP_K,
        token="node",
        router_input="graph",
        fusion="concat",
        num_views=num_views,
        le_weight=ALPHA,
        gd_weight=BETA,
        le_source="probs",
    )
    return MvCGE(**gcn, **{**kw, **MVCGE_VARIANTS[name]})


def flat(val_loss: list[float]) -> bool:
    """The convergence criterion: the best validation loss of the last ``FLAT_FRACTION``
    of the evaluations is less than ``FLAT_TOL`` (relative) below the best before them
    (:func:`sci_moe.train.is_flat` over the evaluations' ordinals, at least five)."""
    ordinals = range(1, len(val_loss) + 1)
    return is_flat(ordinals, val_loss, tail=FLAT_FRACTION, tol=FLAT_TOL)


@torch.no_grad()
def mvcge_diagnostics(model: MvCGE, graph) -> dict:
    """Eval-mode routing statistics of the last layer and the views' embedding MMD^2."""
    out = model(graph.features(), graph.edge_indices)
    usage, ent = MvCGE.expert_usage(out)
    h = out.embeddings[:, :300]
    V = h.shape[0]
    mmd = [float(mmd2(h[v], h[u])) for v in range(V) for u in range(v + 1, V)]
    # agreement: fraction of (node, view pair) whose top-1 expert is the same
    top1 = out.routings[-1].indices[:, 0].view(V, -1)
    agree = [float((top1[v] == top1[u]).double().mean()) for v in range(V) for u in range(v + 1, V)]
    return {
        "usage_entropy": float(ent[-1].mean()),
        "view_usage_js": float(pairwise_js_divergence(usage[-1].double())),
        "view_mmd2": sum(mmd) / len(mmd),
        "top1_agreement": sum(agree) / len(agree),
    }


def run_one(name: str, graph, seed: int, tc: dict) -> tuple[dict, torch.Tensor]:
    """Train ``name`` on ``graph``; the record and the test-set probabilities."""
    seed_everything(seed)
    model = build(name, graph.num_features, graph.num_classes, graph.num_views)
    t0 = time.perf_counter()
    res = train_node_classifier(model, graph, TrainConfig(seed=seed, progress=False, **tc))
    curve = [(e["step"], e["val_loss"], e["val_accuracy"]) for e in res.history]
    rec = {
        "test_accuracy": res.test_accuracy,
        "test_macro_f1": res.test_macro_f1,
        "val_accuracy": res.val_accuracy,
        "best_epoch": res.best_epoch + 1,
        "epochs": int(res.train["step"]),
        "converged": flat([c[1] for c in curve]),
        "seconds": time.perf_counter() - t0,
        "curve": [[int(s), round(float(loss), 5), round(float(a), 5)] for s, loss, a in curve],
    }
    if isinstance(model, MvCGE):
        rec.update(mvcge_diagnostics(model, graph))
    model.eval()
    with torch.no_grad():
        out = model(graph.features(), graph.edge_indices)
        logits = out if isinstance(out, torch.Tensor) else out.logits
    return rec, logits.softmax(-1)


def run_seed(setting: str, seed: int, num_nodes: int, tc: dict) -> dict:
    """Every contestant on the graph of ``setting`` and ``seed``: {method: record}."""
    g = make_multiview_csbm(mvcge_csbm_config(setting, num_nodes=num_nodes), seed=seed)
    bayes = {
        k: bayes_optimal_accuracy(g, views=views).expected
        for k, views in (("all", None), ("view 0", (0,)), ("view 1", (1,)), ("view 2", (2,)),
                         ("features", ()))
    }  # fmt: skip
    recs, probs = {}, {}
    for m in methods_of(setting):
        recs[m], probs[m] = run_one(m, g, seed, tc)
        print(
            f"  [{setting}] seed {seed} {m}: test {recs[m]['test_accuracy']:.3f} "
            f"({recs[m]['epochs']} epochs, {recs[m]['seconds']:.0f} s, "
            f"{'flat' if recs[m]['converged'] else 'NOT flat'})",
            flush=True,
        )
    views = [f"GCN view {v}" for v in range(3)]
    best = max(views, key=lambda m: recs[m]["val_accuracy"])
    recs["best single-view GCN"] = {**recs[best], "view": best, "curve": None}
    te, y = g.test_mask, g.y
    pred = torch.stack([probs[m] for m in views]).mean(0).argmax(-1)
    from sci_moe.graphs.mvcge import accuracy, macro_f1

    recs["per-view GCN ensemble"] = {
        "test_accuracy": accuracy(pred[te], y[te]),
        "test_macro_f1": macro_f1(pred[te], y[te], g.num_classes),
        "converged": all(recs[m]["converged"] for m in views),
        "epochs": max(recs[m]["epochs"] for m in views),
    }
    return {"bayes": bayes, "methods": recs}


def _stats(vals):
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def make_rows(runs: dict, seeds: list[int]) -> list[Row]:
    """Mean, sd and per-seed rows of every setting and method (seeds present in ``runs``)."""
    rows: list[Row] = []
    for setting in SETTINGS:
        done = [s for s in seeds if str(s) in runs.get(setting, {})]
        if not done:
            continue
        per = [runs[setting][str(s)] for s in done]
        for k in ("all", "view 0", "view 1", "view 2", "features"):
            mu, sd = _stats([p["bayes"][k] for p in per])
            rows.append(Row(f"{setting} Bayes oracle ({k})", "accuracy", mu, "1"))
        for m in (*methods_of(setting), *DERIVED):
            case = f"{setting} {m}"
            recs = [p["methods"][m] for p in per]
            for metric in ("test_accuracy", "test_macro_f1"):
                mu, sd = _stats([r[metric] for r in recs])
                rows.append(Row(case, metric, mu, "1"))
                rows.append(Row(case, f"{metric}_std", sd, "1"))
            for s, r in zip(done, recs, strict=True):
                rows.append(Row(case, f"test_accuracy seed {s}", r["test_accuracy"], "1"))
            rows.append(Row(case, "epochs", statistics.fmean(r["epochs"] for r in recs), "1"))
            rows.append(
                Row(case, "converged_fraction", statistics.fmean(r["converged"] for r in recs), "1")
            )
            if m.startswith("MvCGE"):
                for metric in ("usage_entropy", "view_usage_js", "view_mmd2", "top1_agreement"):
                    unit = "nats" if metric in ("usage_entropy", "view_usage_js") else "1"
                    mu, sd = _stats([r[metric] for r in recs])
                    rows.append(Row(case, metric, mu, unit))
                    rows.append(Row(case, f"{metric}_std", sd, unit))
                    for s, r in zip(done, recs, strict=True):
                        rows.append(Row(case, f"{metric} seed {s}", r[metric], unit))
        seconds = sum(r.get("seconds", 0.0) for p in per for r in p["methods"].values())
        rows.append(Row(f"{setting} all methods", "train_seconds", seconds, "s"))
    return rows


def strongest_baseline(doc: dict, setting: str) -> str:
    """The baseline with the highest mean test accuracy in ``setting``."""
    return max(BASELINES, key=lambda b: row_value(doc, f"{setting} {b}", "test_accuracy"))


def verdicts(doc: dict) -> list[dict]:
    """The paper's claims, each decided by a paired t-test over the seeds (the rule).

    Per setting: MvCGE vs late fusion and vs the strongest baseline of the run (test
    accuracy); L_le: MvCGE vs ``-L_le`` in accuracy and in the last layer's expert-usage
    entropy (collapse); L_gd: MvCGE vs ``-L_gd`` in accuracy and in the views' embedding
    MMD^2 (complementarity). ``converged``: every run of both sides met the flatness
    criterion. Decisive when converged and p < 0.05.
    """
    seeds = doc["machine"]["seeds"]
    out = []
    for setting in SETTINGS:
        if not any(r["case"].startswith(f"{setting} MvCGE") for r in doc["rows"]):
            continue
        done = [
            s
            for s in seeds
            if any(r["metric"] == f"test_accuracy seed {s}" and r["case"] == f"{setting} MvCGE"
                   for r in doc["rows"])
        ]  # fmt: skip

        def conv(*cases):
            return all(row_value(doc, c, "converged_fraction") == 1.0 for c in cases)

        def claim(text, metric, ours, base, note="", setting=setting, done=done):
            o, b = f"{setting} {ours}", f"{setting} {base}"
            return seed_verdict(
                f"{text} ({setting} views)",
                doc,
                metric=metric,
                ours=o,
                baseline=b,
                higher_is_better=True,
                converged=conv(o, b),
                seeds=done,
                note=note,
            )

        best = strongest_baseline(doc, setting)
        out.append(claim("MvCGE beats late fusion", "test_accuracy", "MvCGE", "late fusion"))
        out.append(
            claim(
                "MvCGE beats the strongest baseline",
                "test_accuracy",
                "MvCGE",
                best,
                note=f"the strongest baseline by mean test accuracy is {best}",
            )
        )
        if setting not in ABLATION_SETTINGS:
            continue
        out.append(
            claim("The load-equilibrium loss improves accuracy", "test_accuracy", "MvCGE",
                  "MvCGE -L_le")
        )  # fmt: skip
        out.append(
            claim(
                "The load-equilibrium loss prevents expert collapse",
                "usage_entropy",
                "MvCGE",
                "MvCGE -L_le",
                note="last layer's expert-usage entropy, eval mode (log 4 = uniform)",
            )
        )
        out.append(
            claim("The graph-discrepancy loss improves accuracy", "test_accuracy", "MvCGE",
                  "MvCGE -L_gd")
        )  # fmt: skip
        out.append(
            claim(
                "The graph-discrepancy loss makes the views' embeddings differ",
                "view_mmd2",
                "MvCGE",
                "MvCGE -L_gd",
                note="mean pairwise MMD^2 of the views' final embeddings",
            )
        )
    return out


def curves_of(runs: dict) -> dict:
    """Per setting and trained method: the seeds' validation curves (step, loss, accuracy)."""
    out = {}
    for setting, per_seed in runs.items():
        out[setting] = {
            m: {s: rec["methods"][m].get("curve") for s, rec in per_seed.items()}
            for m in methods_of(setting)
        }
    return out


def plot_curves(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = ("MLP", "GCN view 0", "early fusion", "late fusion", "attention fusion (HAN)",
             "MvCGE", "MvCGE -L_le", "MvCGE -L_gd")  # fmt: skip
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for col, setting in enumerate(SETTINGS):
        curves = doc.get("curves", {}).get(setting)
        if not curves:
            continue
        for m in shown:
            if m not in curves:
                continue
            per = [np.asarray(c) for c in curves[m].values() if c]
            if not per:
                continue
            n = max(len(c) for c in per)
            steps = next(c[:, 0] for c in per if len(c) == n)
            for row, j in enumerate((1, 2)):
                vals = np.full((len(per), n), np.nan)
                for i, c in enumerate(per):
                    vals[i, : len(c)] = c[:, j]
                    vals[i, len(c) :] = np.nan
                mean = np.nanmean(vals, 0)
                axes[row, col].plot(steps, mean, label=m)
        axes[0, col].set_title(f"{setting} views (mean over seeds still training)")
        axes[0, col].set_ylabel("validation cross-entropy")
        axes[1, col].set_ylabel("validation accuracy")
        axes[1, col].set_xlabel("epoch")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_table(doc: dict) -> None:
    for setting in SETTINGS:
        table = []
        for m in (*methods_of(setting), *DERIVED):
            case = f"{setting} {m}"
            try:
                acc = row_value(doc, case, "test_accuracy")
            except ValueError:
                continue
            table.append(
                [m, acc, row_value(doc, case, "test_accuracy_std"),
                 row_value(doc, case, "epochs"), row_value(doc, case, "converged_fraction")]
            )  # fmt: skip
        if table:
            print_table(["method", "acc", "sd", "epochs", "converged"], table, title=setting)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdicts)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    piece_arguments(parser)
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated")
    parser.add_argument("--max-steps", type=int, default=None, help="epochs cap (estimates)")
    parser.add_argument("--num-nodes", type=int, default=600, help="nodes (tests: fewer)")
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    quick = args.quick
    n_seeds = args.seeds or (3 if quick else 10)
    max_steps = args.max_steps or (200 if quick else 1000)
    eval_every = 2
    # patience = the last 20 % of the most evaluations a run can have: a run that stops
    # early is flat by construction; only a run that reaches max_steps can fail the test
    patience = math.ceil(FLAT_FRACTION * max_steps / eval_every)
    num_nodes = args.num_nodes
    settings = [s for s in args.settings.split(",") if s]
    seeds = [args.seed + i for i in range(n_seeds)]
    tc = dict(
        steps=max_steps,
        lr=LR,
        weight_decay=WD,
        eval_every=eval_every,
        monitor="val_loss",
        mode="min",
        patience=patience,
        checkpoint_every=0,
    )
    machine = machine_info(
        seed=args.seed,
        quick=quick,
        seeds=seeds,
        settings=settings,
        num_nodes=num_nodes,
        max_epochs=max_steps,
        eval_every=eval_every,
        patience=patience,
        flat_fraction=FLAT_FRACTION,
        flat_tolerance=FLAT_TOL,
        hidden=HIDDEN,
        layers=LAYERS,
        dropout=DROPOUT,
        lr=LR,
        weight_decay=WD,
        experts=EXPERTS,
        top_k=TOP_K,
        alpha=ALPHA,
        beta=BETA,
    )
    print(f"mvcge: {machine['cpu']}, {torch.get_num_threads()} threads, seeds {seeds}")
    runs: dict = {}
    if (old := previous_run(args)) is not None:
        runs = old.get("runs", {})
        for setting, per_seed in runs.items():  # the curves are stored apart
            for s, rec in per_seed.items():
                for m, r in rec["methods"].items():
                    r["curve"] = old.get("curves", {}).get(setting, {}).get(m, {}).get(s)
        machine["resumed_from_wall_s"] = old["machine"].get("contention", {}).get("wall_s")
    other = OtherLoad()
    t0 = time.perf_counter()
    deadline = piece_deadline(args)
    complete = False  # until every seed of every setting is in

    def write() -> dict:
        rows = make_rows(runs, seeds)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [r.__dict__ for r in rows]}
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)] if rows else []
        doc["complete"] = complete
        doc["curves"] = curves_of(runs)
        doc["runs"] = {
            st: {s: {"bayes": r["bayes"], "methods": {
                m: {k: v for k, v in rec.items() if k != "curve"}
                for m, rec in r["methods"].items()}} for s, r in per.items()}
            for st, per in runs.items()
        }  # fmt: skip
        machine["contention"] = other.report()
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    stop = False
    for s in seeds:  # seed-major: a partial run has both settings on the same seeds
        for setting in settings:
            if str(s) in runs.get(setting, {}):
                continue
            if time.perf_counter() > deadline:
                stop = True
                break
            runs.setdefault(setting, {})[str(s)] = run_seed(setting, s, num_nodes, tc)
            write()
        if stop:
            break
    complete = all(str(s) in runs.get(st, {}) for st in SETTINGS for s in seeds)
    doc = write()
    summary_table(doc)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5} p={v['p_value']}  {v['claim']}")
    if args.plots is not None:
        name = "mvcge_quick_curves.png" if quick else "mvcge_curves.png"
        plot_curves(doc, args.plots / name)
        print(f"plot in {args.plots / name}")
    print(f"total {time.perf_counter() - t0:.0f} s; complete: {complete}")
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
