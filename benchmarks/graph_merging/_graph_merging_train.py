"""The training of ``run.py``: one seed's graphs, pre-training, merging and fine-tuning.

:func:`run_seed` generates a seed's graph collection, pre-trains the MoE (one expert per
family), routes, evaluates every strategy of ``_graph_merging.STRATS`` and the
heuristics, and fine-tunes the merges; every run trains until flat (:func:`flat`, the
rule :data:`FLAT_RULE`). :func:`specialisation_only` measures the experts'
specialisation alone. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import copy
import math
import statistics
import time

import torch
from _graph_merging import (
    HEURISTIC_NAMES,
    LEARNED,
    METRICS,
    RUNS,
    SPLITS,
    STRATS,
    TUNED,
)

from sci_moe.graphs import (
    FAMILIES,
    auc_score,
    evaluate_scores,
    heuristic_scorer,
    make_graph_collection,
    oracle_metrics,
)
from sci_moe.graphs.merging import (
    AnyGraphConfig,
    AnyGraphMoE,
    MergeConfig,
    PretrainConfig,
    infer_embeddings,
    inference_flops,
    pretrain,
    selected_experts,
    train_merged_experts,
)
from sci_moe.train import is_flat

__all__ = [
    "FLAT_FRACTION",
    "FLAT_RULE",
    "FLAT_TOL",
    "MIN_DELTA",
    "MODEL",
    "PER_FAMILY",
    "SBM_HOMOPHILY",
    "SPECIALISED_FEATURE_DIMS",
    "K",
    "flat",
    "run_seed",
    "specialisation_only",
]


K = 2  # experts merged / ensembled
PER_FAMILY = {"train": 2, "val": 2, "unseen": 3}
SBM_HOMOPHILY = (0.6, 0.95)  # no near-chance SBM graphs (the generator's default starts at 0.3)
#: The flatness rule (:func:`flat`): tail fraction of the steps and relative tolerance.
FLAT_FRACTION = 0.2
FLAT_TOL = 0.01
FLAT_RULE = (
    "sci_moe.train.is_flat: the best validation AUC of the last 20 % of the steps is less "
    "than 1 % (relative) above the best before them, at least 5 evaluations"
)
MIN_DELTA = 0.001


#: Feature dimensions of the specialised families' graphs (4 groups of 4-8 columns).
SPECIALISED_FEATURE_DIMS = (16, 32)
MODEL = {"d_model": 32, "num_experts": len(FAMILIES), "num_layers": 2, "hops": 2}


def flat(curve: list[list[float]]) -> bool:
    """The convergence criterion on a validation curve ``[[step, auc], ...]``:
    :func:`sci_moe.train.is_flat` (higher is better) with ``tail=FLAT_FRACTION`` and
    ``tol=FLAT_TOL``."""
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, tail=FLAT_FRACTION, tol=FLAT_TOL, mode="max")


def _val_auc(embed, graphs) -> float:
    """Mean AUC over graphs of ``embed(i) -> (n, d)`` node embeddings (pair scores only,
    on the CPU with the graphs' edges)."""
    out = []
    for i, g in enumerate(graphs):
        h = embed(i).cpu()
        pos = (h[g.test_edge_index[0]] * h[g.test_edge_index[1]]).sum(-1)
        neg = (h[g.test_neg_edge_index[0]] * h[g.test_neg_edge_index[1]]).sum(-1)
        out.append(auc_score(pos, neg))
    return sum(out) / len(out)


def _collection(seed: int, nodes, families=FAMILIES) -> dict:
    F = len(families)
    n = {k: v * F for k, v in PER_FAMILY.items()}
    col = make_graph_collection(
        n["train"],
        n["val"] + n["unseen"],
        tuple(families),
        num_nodes=tuple(nodes),
        seed=seed,
        homophily=SBM_HOMOPHILY,
        **({} if tuple(families) == FAMILIES else {"feature_dims": SPECIALISED_FEATURE_DIMS}),
    )
    return {"train": col.train, "val": col.unseen[: n["val"]], "unseen": col.unseen[n["val"] :]}


def _family(g, families=FAMILIES) -> int:
    return list(families).index(g.family)


def _train_config(cls, cfg: dict, max_steps: int, seed: int, **kw):
    evals = max_steps // cfg["eval_every"]
    return cls(
        steps=max_steps,
        eval_every=cfg["eval_every"],
        patience=max(1, math.ceil(FLAT_FRACTION * evals)),
        min_delta=MIN_DELTA,
        batch_size=cfg["batch_size"],
        lr=cfg["lr"],
        seed=seed,
        checkpoint_minutes=0.0,
        **kw,
    )


def _curve(res) -> list[list[float]]:
    return [[int(e["step"]), round(float(e["val_auc"]), 5)] for e in res.evals]


def _evaluate(models, graphs, encoded, routing, families=FAMILIES) -> dict:
    """{strategy: [metrics of each graph]} of every strategy on ``graphs``."""
    out = {s: [] for s in STRATS}
    for g, (z, data) in enumerate(zip(encoded, graphs, strict=True)):
        ids, w = selected_experts(routing, g)
        oracle = oracle_metrics(data)
        for s in STRATS:
            if s in HEURISTIC_NAMES:
                m = evaluate_scores(heuristic_scorer(s, data), data)
            elif s == "no_expert":  # the parameter-free input the experts start from
                m = evaluate_scores(z.cpu(), data)
            else:
                model = models.get(s, models["base"])
                if s == "family_expert":
                    h = model.experts.forward_expert(_family(data, families), z).detach()
                elif s.startswith("rank"):
                    h = infer_embeddings(model, z, ids, w, s)
                else:
                    w2 = w[:K] / w[:K].sum()
                    h = infer_embeddings(model, z, ids[:K], w2, "merge" if s in TUNED else s)
                m = evaluate_scores(h.cpu(), data)  # scored on the CPU, with the graph
            m["auc_vs_bayes"] = m["auc"] / oracle["auc"] if oracle else None
            m["bayes_auc"] = oracle["auc"] if oracle else None
            out[s].append(m)
    return out


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _pretrained(seed: int, cfg: dict, device: str = "cpu"):
    """Seed ``seed``'s graphs, their encodings and the model pre-trained with one expert per
    family: ``(families, graphs, enc, model, pretrain result)``; the model and the encodings
    (computed on the CPU) on ``device``."""
    torch.manual_seed(seed)
    families = tuple(cfg.get("families", FAMILIES))
    model_cfg = {**MODEL, "num_experts": len(families)}
    graphs = _collection(seed, cfg["nodes"], families)
    model = AnyGraphMoE(AnyGraphConfig(**model_cfg)).to(device)
    enc = {k: [model.encode(g, seed=seed).to(device) for g in v] for k, v in graphs.items()}
    val = graphs["val"]

    def pre_eval(m):
        fam = [_family(g, families) for g in val]
        return {"val_auc": _val_auc(lambda i: m.experts.forward_expert(fam[i], enc["val"][i]), val)}

    pre = _train_config(PretrainConfig, cfg, cfg["max_pretrain"], seed, device=device)
    assignment = [_family(g, families) for g in graphs["train"]]
    res = pretrain(
        model, graphs["train"], pre, encoded=enc["train"], assignment=assignment, evaluate=pre_eval
    )
    return families, graphs, enc, model, res


def _specialisation(model, graphs, enc, families) -> list[list[float]]:
    """AUC of every expert on every family's unseen graphs, ``[family][expert]``."""
    return [
        [
            _mean(
                [
                    evaluate_scores(model.experts.forward_expert(e, z).detach().cpu(), g)["auc"]
                    for g, z in zip(graphs["unseen"], enc["unseen"], strict=True)
                    if _family(g, families) == f
                ]
            )
            for e in range(len(families))
        ]
        for f in range(len(families))
    ]


def specialisation_only(seeds: list[int], cfg: dict, device: str = "cpu") -> float:
    """The specialisation check alone (pre-training only, no fine-tuning or JSON): prints
    every seed's AUC matrix and returns the fraction of (family, seed) pairs in which the
    family's own expert beats every other expert on the family's unseen graphs (trained on
    ``device``)."""
    wins = []
    for seed in seeds:
        t0 = time.perf_counter()
        families, graphs, enc, model, res = _pretrained(seed, cfg, device)
        special = _specialisation(model, graphs, enc, families)
        print(f"seed {seed}: {res.train.step} steps, {time.perf_counter() - t0:.0f} s")
        for f, row in enumerate(special):
            win = row[f] > max(x for e, x in enumerate(row) if e != f)
            wins.append(win)
            aucs = " ".join(f"{x:.3f}" for x in row)
            print(f"  {families[f]:18s} experts [{aucs}]  own expert wins: {win}", flush=True)
    return statistics.fmean(wins)


def run_seed(seed: int, cfg: dict, device: str = "cpu") -> dict:
    """Pre-train, route, fine-tune and score every strategy on seed ``seed``'s graphs; the
    experts train on ``device`` (``--device``), the scores are computed on the CPU."""
    t0 = time.perf_counter()
    families, graphs, enc, model, res = _pretrained(seed, cfg, device)
    val = graphs["val"]
    curves = {"pretrain": _curve(res.train)}
    steps = {"pretrain": int(res.train.step)}
    routing = {k: model.route_graphs(enc[k], graphs[k], top_k=3, seed=seed) for k in graphs}
    r_val = routing["val"]
    r_k = type(routing["train"]).from_assignments(
        routing["train"].indices[:, :K], routing["train"].weights[:, :K], len(families)
    )

    def merge_eval(m):
        def embed(i):
            ids, w = selected_experts(r_val, i)
            return infer_embeddings(m, enc["val"][i], ids[:K], w[:K] / w[:K].sum(), "merge")

        return {"val_auc": _val_auc(embed, val)}

    models = {"base": model}
    for s in TUNED:
        mc = _train_config(
            MergeConfig,
            cfg,
            cfg["max_finetune"],
            seed,
            strategy=s,
            top_k=K,
            kd_weight=cfg["kd_weight"],
            proximity_weight=cfg["proximity_weight"],
            device=device,
        )
        models[s] = copy.deepcopy(model)
        r = train_merged_experts(
            models[s], graphs["train"], enc["train"], r_k, mc, evaluate=merge_eval
        )
        curves[s] = _curve(r)
        steps[s] = int(r.step)
    quality = {sp: _evaluate(models, graphs[sp], enc[sp], routing[sp], families) for sp in SPLITS}
    per_graph = {
        sp: {s: {m: _mean([x[m] for x in quality[sp][s]]) for m in (*METRICS, "bayes_auc")}
             for s in STRATS}
        for sp in SPLITS
    }  # fmt: skip
    router_family = {
        sp: _mean(
            [
                float(int(routing[sp].indices[i, 0]) == _family(g, families))
                for i, g in enumerate(graphs[sp])
            ]
        )
        for sp in ("train", "val", "unseen")
    }
    special = _specialisation(model, graphs, enc, families)
    n_unseen = [g.num_nodes for g in graphs["unseen"]]
    flops = {
        s: _mean([inference_flops(model, v, "merge" if s in TUNED else s, K) for v in n_unseen])
        for s in LEARNED
        if s != "family_expert"
    }
    return {
        "metrics": per_graph,
        "converged": {r: flat(curves[r]) for r in RUNS},
        "steps": steps,
        "router_family_accuracy": router_family,
        "specialisation_auc": special,
        "flops": flops,
        "seconds": time.perf_counter() - t0,
        "curves": curves,
        "graphs": {k: [g.description for g in v] for k, v in graphs.items()},
    }
