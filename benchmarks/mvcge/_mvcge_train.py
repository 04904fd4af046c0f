"""The training of ``run.py``: the contestants, one fit, one seed of a setting.

:func:`build` makes a contestant of :data:`TRAINED` (:func:`methods_of` per setting),
:func:`run_one` trains it until flat (:func:`flat`) and scores it,
:func:`mvcge_diagnostics` measures MvCGE's routing and view embeddings, and
:func:`run_seed` generates a seed's multi-view graph and fits every contestant. A helper
module: ``run.py`` imports it.
"""

from __future__ import annotations

import time

import torch

from sci_moe._util import module_device, to_device
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

__all__ = [
    "ABLATIONS",
    "ABLATION_SETTINGS",
    "ALPHA",
    "BASELINES",
    "BETA",
    "DERIVED",
    "DROPOUT",
    "EXPERTS",
    "FLAT_FRACTION",
    "FLAT_TOL",
    "HIDDEN",
    "LAYERS",
    "LR",
    "MVCGE_VARIANTS",
    "SETTINGS",
    "TOP_K",
    "TRAINED",
    "WD",
    "build",
    "flat",
    "methods_of",
    "mvcge_diagnostics",
    "run_one",
    "run_seed",
]


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


def run_one(
    name: str, graph, seed: int, tc: dict, device: str = "cpu"
) -> tuple[dict, torch.Tensor]:
    """Train ``name`` on ``graph`` (on ``device``); the record and the test-set
    probabilities (on the CPU)."""
    seed_everything(seed)
    model = build(name, graph.num_features, graph.num_classes, graph.num_views)
    t0 = time.perf_counter()
    cfg = TrainConfig(seed=seed, progress=False, device=device, **tc)
    res = train_node_classifier(model, graph, cfg)
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
    dev = module_device(model)  # where the model trained: the graph goes there once
    on = graph if dev.type == "cpu" else to_device(graph, dev)
    if isinstance(model, MvCGE):
        rec.update(mvcge_diagnostics(model, on))
    model.eval()
    with torch.no_grad():
        out = model(on.features(), on.edge_indices)
        logits = out if isinstance(out, torch.Tensor) else out.logits
    return rec, logits.softmax(-1).cpu()


def run_seed(setting: str, seed: int, num_nodes: int, tc: dict, device: str = "cpu") -> dict:
    """Every contestant on the graph of ``setting`` and ``seed``: {method: record}; the
    models train on ``device`` (``--device``)."""
    g = make_multiview_csbm(mvcge_csbm_config(setting, num_nodes=num_nodes), seed=seed)
    bayes = {
        k: bayes_optimal_accuracy(g, views=views).expected
        for k, views in (("all", None), ("view 0", (0,)), ("view 1", (1,)), ("view 2", (2,)),
                         ("features", ()))
    }  # fmt: skip
    recs, probs = {}, {}
    for m in methods_of(setting):
        recs[m], probs[m] = run_one(m, g, seed, tc, device)
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
