"""Expert merging in an AnyGraph-style MoE graph foundation model, experts trained until flat.

Liu et al., "Enhanced Expert Merging for Mixture-of-Experts in Graph Foundation Models"
(NeurIPS 2025), on generated graphs with known link models.

Data (generated; :func:`sci_moe.graphs.make_graph_collection`, families round robin): four
families whose link models differ, so that one expert per family has something to
specialise on -- ``sbm`` (stochastic block model, 3-8 blocks, homophily 0.6-0.95, features
= block mean + noise; ground truth ``P_ij = B[c_i, c_j]``), ``geometric`` (soft random
geometric graph in the unit square, ``P_ij = σ((r - |z_i - z_j|)/s)``, features a noisy
map of the position), ``ba`` (Barabási-Albert preferential attachment, scale-free, pure
noise features) and ``ws`` (Watts-Strogatz small world, ring-angle features). Per seed:
2 training graphs, 2 validation graphs and 3 wholly unseen graphs of every family; mean
degree 8, 15 % of each graph's edges held out. The Bayes-optimal AUC (ranking by the
true ``P_ij``) is known on the SBM and geometric graphs.

Model: :class:`~sci_moe.graphs.merging.AnyGraphMoE` (SVD-unified features, 2-hop
propagation, 4 residual-MLP experts), pre-trained with **one expert per family** (the
fixed assignment of :func:`~sci_moe.graphs.merging.pretrain`: expert ``e`` trains on the
graphs of family ``e``), so the experts specialise by construction. Then the
training-free competence router ranks the experts on every graph (top-3), and per graph:

* ``rank1`` (top-1), ``rank2``, ``rank3``: the expert of that router rank alone;
* ``family_expert``: the expert trained on the graph's family (oracle routing);
* ``ensemble``: the weighted output ensemble of the top-2 (2 expert forwards);
* ``merge``: the weighted parameter average of the top-2 (one forward);
* ``merge_tuned`` / ``kdem`` / ``ppem``: the merge after fine-tuning on the training
  graphs with the merged task loss only (the control) / plus KD to the ensemble (KDEM) /
  with the ensemble's task loss plus the proximity regulariser (PPEM);
* ``no_expert``: no expert at all, ``⟨z_u, z_v⟩`` of the parameter-free SVD-propagated
  input the experts transform (what the learning adds is the gap to it);
* ``common_neighbours``, ``adamic_adar``: the non-learned heuristics
  (:mod:`sci_moe.graphs.link_heuristics`) on the same training edges.

Training until flat: every run (the pre-training and each fine-tuning) is a run of the
shared trainer with early stopping on the validation AUC (the held-out edges of the
validation graphs; pre-training scores each with its family's expert, fine-tuning with the
merged top-2), evaluated every ``eval_every`` steps, stopped after ``patience`` = 20 % of
the most evaluations without a gain of 0.001, best weights kept. A run is **flat** by
:func:`sci_moe.train.is_flat`: the best validation AUC of its last 20 % of the steps is
less than ``FLAT_TOL`` (1 %, relative) above the best before them, with at least five
evaluations; a run that stops early after five or more evaluations is flat by construction
(the patience window covers the tail and its gain is below 0.001), only one that reaches
the step cap or stops with fewer evaluations can fail. Learning curves are stored in
``curves``. Until this rule (the review of issue 43) a run was flat when the best AUC of
its last 20 % of *evaluations* was less than 0.005 AUC above the best before them:
``graph_merging.json`` and ``graph_merging_quick.json`` were re-judged from their stored
curves (``--rejudge JSON``, :func:`rejudge`); ``graph_merging_families.json`` pieces
written before it were judged by the old rule (``--rejudge`` brings them to this one).

Metrics on held-out edges of the training graphs (``train``) and of the unseen graphs
(``unseen``, zero-shot): AUC, Recall@20, NDCG@20, AUC / Bayes-optimal AUC. Per-seed rows
(metric ``"<m> seed <s>"``) feed the verdicts (:func:`verdicts`: paired t-tests over the
seeds of the unseen AUC, :func:`_common.seed_verdict`).

**Specialised families** (``--families specialised``, issue 45): on the four families above
the experts do not specialise (a family's own expert beat the others on its unseen graphs
in 22 % of (family, seed) pairs): AnyGraph's SVD-unified, propagated input makes them one
homophilous task. :data:`sci_moe.graphs.SPECIALISED_FAMILIES` replaces them with families
whose link rules pull an inner-product expert in opposite directions, each with a known
``P_ij`` (:mod:`sci_moe.graphs.link_data`): ``heterophily`` (links join nearby nodes of a
hidden plane across two blocks; the block is the loudest feature and anti-predictive: the
expert must silence the top SVD column), ``heterophily_quiet`` (the same links, the block
quiet: keep the top columns, silence a lower one), ``feature_group1`` / ``feature_group4``
(links follow a hidden Gaussian space shown by the loudest / the quietest of four feature
groups). Heterophily alone is not learnable by a symmetric inner product (PSD Gram), and
assortative / disassortative SBMs or Chung-Lu graphs gave experts that hardly differ, so
they are not in the set. Graphs of these families have 16-32 feature columns.
The **specialisation check** is the row ``specialisation / family
expert wins fraction`` -- the fraction of (family, seed) pairs in which the family's own
expert beats every other expert on the family's unseen graphs -- against
``SPECIALISATION_TARGET`` (0.8); the verdicts' note repeats it. Written to
``results/graph_merging_families.json``; everything else (ranks, merges, KDEM, PPEM,
ensemble, CN/AA, 10 seeds, the verdict rule) is the same. ``--specialisation-only`` runs the check
alone (pre-training only, printed, no JSON). Measured so (``--specialisation-only
--max-steps 1500 --nodes 100 200 --threads 1``, seeds 0-4): the own expert wins in 16 of 20
(family, seed) pairs (80 %) on the specialised families -- heterophily 5/5,
heterophily_quiet 5/5, feature_group4 5/5, feature_group1 1/5 (the feature_group4 expert
often fits it too) -- against 6 of 20 (30 %) on the standard ones.

Run: ``python benchmarks/graph_merging/run.py [--quick] [--json PATH] [--seeds N]
[--families standard|specialised] [--resume] [--max-hours H] [--plots DIR] [--threads 1]``.
The JSON is written after every seed; ``--resume`` continues it (seeds already in it are
kept). ``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its rows,
``--rows-only PATH`` its rows and verdicts from its per-seed records (no training).
"""

from __future__ import annotations

import copy
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import (
    OtherLoad,
    base_parser,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _graph_merging import (
    HEURISTIC_NAMES,
    LEARNED,
    METRICS,
    RUNS,
    SPECIALISATION_TARGET,
    SPLITS,
    STRATS,
    TUNED,
    make_rows,
    plot_auc,
    plot_curves,
    verdicts,
)

from sci_moe.graphs import (
    FAMILIES,
    SPECIALISED_FAMILIES,
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

BENCHMARK = "graph_merging"
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
#: ``--families``: the generated family sets (one expert per family).
FAMILY_SETS = {"standard": FAMILIES, "specialised": SPECIALISED_FAMILIES}
#: Feature dimensions of the specialised families' graphs (4 groups of 4-8 columns).
SPECIALISED_FEATURE_DIMS = (16, 32)
MODEL = {"d_model": 32, "num_experts": len(FAMILIES), "num_layers": 2, "hops": 2}
FULL = {
    "nodes": [200, 600],
    "max_pretrain": 4000,
    "max_finetune": 1500,
    "eval_every": 50,
    "batch_size": 256,
    "lr": 1e-3,
    "kd_weight": 1.0,
    "proximity_weight": 0.01,
}
QUICK = {**FULL, "nodes": [100, 200], "max_pretrain": 600, "max_finetune": 200, "eval_every": 25}


def flat(curve: list[list[float]]) -> bool:
    """The convergence criterion on a validation curve ``[[step, auc], ...]``:
    :func:`sci_moe.train.is_flat` (higher is better) with ``tail=FLAT_FRACTION`` and
    ``tol=FLAT_TOL``."""
    steps, values = [s for s, _ in curve], [v for _, v in curve]
    return is_flat(steps, values, tail=FLAT_FRACTION, tol=FLAT_TOL, mode="max")


def rejudge(doc: dict) -> dict:
    """``doc`` (a results JSON of this script, parsed) with every run's ``converged`` judged
    again by :func:`flat` from the stored ``curves``: the flags in ``runs``, the
    ``converged_fraction`` rows and the verdicts follow; no other row changes (an older
    JSON keeps the rows it has). The machine record's ``flat_tolerance`` and ``flat_rule``
    say the rule."""
    families = tuple(doc["machine"].get("families", FAMILIES))
    for run, by_seed in doc["curves"].items():
        for s, curve in by_seed.items():
            doc["runs"][s]["converged"][run] = flat(curve)
    doc["machine"].update(flat_tolerance=FLAT_TOL, flat_rule=FLAT_RULE)
    fresh = make_rows(doc["runs"], doc["machine"]["seeds"], doc["curves"], families)
    conv = {r.case: r.value for r in fresh if r.metric == "converged_fraction"}
    for r in doc["rows"]:
        if r["metric"] == "converged_fraction":
            r["value"] = conv[r["case"]]
    doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)]
    return doc


def _val_auc(embed, graphs) -> float:
    """Mean AUC over graphs of ``embed(i) -> (n, d)`` node embeddings (pair scores only)."""
    out = []
    for i, g in enumerate(graphs):
        h = embed(i)
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
                m = evaluate_scores(z, data)
            else:
                model = models.get(s, models["base"])
                if s == "family_expert":
                    h = model.experts.forward_expert(_family(data, families), z).detach()
                elif s.startswith("rank"):
                    h = infer_embeddings(model, z, ids, w, s)
                else:
                    w2 = w[:K] / w[:K].sum()
                    h = infer_embeddings(model, z, ids[:K], w2, "merge" if s in TUNED else s)
                m = evaluate_scores(h, data)
            m["auc_vs_bayes"] = m["auc"] / oracle["auc"] if oracle else None
            m["bayes_auc"] = oracle["auc"] if oracle else None
            out[s].append(m)
    return out


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _pretrained(seed: int, cfg: dict):
    """Seed ``seed``'s graphs, their encodings and the model pre-trained with one expert per
    family: ``(families, graphs, enc, model, pretrain result)``."""
    torch.manual_seed(seed)
    families = tuple(cfg.get("families", FAMILIES))
    model_cfg = {**MODEL, "num_experts": len(families)}
    graphs = _collection(seed, cfg["nodes"], families)
    model = AnyGraphMoE(AnyGraphConfig(**model_cfg))
    enc = {k: [model.encode(g, seed=seed) for g in v] for k, v in graphs.items()}
    val = graphs["val"]

    def pre_eval(m):
        fam = [_family(g, families) for g in val]
        return {"val_auc": _val_auc(lambda i: m.experts.forward_expert(fam[i], enc["val"][i]), val)}

    pre = _train_config(PretrainConfig, cfg, cfg["max_pretrain"], seed)
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
                    evaluate_scores(model.experts.forward_expert(e, z).detach(), g)["auc"]
                    for g, z in zip(graphs["unseen"], enc["unseen"], strict=True)
                    if _family(g, families) == f
                ]
            )
            for e in range(len(families))
        ]
        for f in range(len(families))
    ]


def specialisation_only(seeds: list[int], cfg: dict) -> float:
    """The specialisation check alone (pre-training only, no fine-tuning or JSON): prints
    every seed's AUC matrix and returns the fraction of (family, seed) pairs in which the
    family's own expert beats every other expert on the family's unseen graphs."""
    wins = []
    for seed in seeds:
        t0 = time.perf_counter()
        families, graphs, enc, model, res = _pretrained(seed, cfg)
        special = _specialisation(model, graphs, enc, families)
        print(f"seed {seed}: {res.train.step} steps, {time.perf_counter() - t0:.0f} s")
        for f, row in enumerate(special):
            win = row[f] > max(x for e, x in enumerate(row) if e != f)
            wins.append(win)
            aucs = " ".join(f"{x:.3f}" for x in row)
            print(f"  {families[f]:18s} experts [{aucs}]  own expert wins: {win}", flush=True)
    return statistics.fmean(wins)


def run_seed(seed: int, cfg: dict) -> dict:
    """Pre-train, route, fine-tune and score every strategy on seed ``seed``'s graphs."""
    t0 = time.perf_counter()
    families, graphs, enc, model, res = _pretrained(seed, cfg)
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


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    p.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    piece_arguments(p)
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (quick 3, full 10)")
    p.add_argument("--max-steps", type=int, default=None, help="cap every run's steps (tests)")
    p.add_argument("--nodes", type=int, nargs=2, default=None, help="graph sizes (tests)")
    p.add_argument(
        "--families",
        choices=sorted(FAMILY_SETS),
        default="standard",
        help="generated families: standard (sbm, geometric, ba, ws) or specialised "
        "(heterophily, heterophily_quiet, feature_group1, feature_group4: link rules one "
        "expert cannot fit at once; write them to results/graph_merging_families.json)",
    )
    p.add_argument(
        "--specialisation-only",
        action="store_true",
        help="pre-train only and print the specialisation check (no fine-tuning, no JSON)",
    )
    p.add_argument(
        "--rows-only",
        type=Path,
        default=None,
        metavar="JSON",
        help="recompute the rows and verdicts of a stored JSON from its runs (no training)",
    )
    p.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        metavar="JSON",
        help="judge a stored JSON's runs flat or not again from its curves by the current "
        "rule (flags, converged_fraction rows, verdicts; no training)",
    )
    args = p.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    if args.rejudge is not None:
        write_json_doc(args.rejudge, rejudge(json.loads(args.rejudge.read_text())))
        return 0
    if args.rows_only is not None:
        doc = json.loads(args.rows_only.read_text())
        fams = tuple(doc["machine"].get("families", FAMILIES))
        rows = make_rows(doc["runs"], doc["machine"]["seeds"], doc.get("curves"), fams)
        doc["rows"] = [vars(r) for r in rows]
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)]
        write_json_doc(args.rows_only, doc)
        return 0
    setup(args)
    cfg = dict(QUICK if args.quick else FULL)
    if args.max_steps is not None:
        cfg["max_pretrain"] = min(cfg["max_pretrain"], args.max_steps)
        cfg["max_finetune"] = min(cfg["max_finetune"], args.max_steps)
        cfg["eval_every"] = min(cfg["eval_every"], max(1, args.max_steps // 2))
    if args.nodes is not None:
        cfg["nodes"] = list(args.nodes)
    cfg["families"] = list(FAMILY_SETS[args.families])
    families = tuple(cfg["families"])
    n_seeds = args.seeds or (3 if args.quick else 10)
    seeds = [args.seed + i for i in range(n_seeds)]
    if args.specialisation_only:
        wins = specialisation_only(seeds, cfg)
        met = "met" if wins >= SPECIALISATION_TARGET else "NOT met"
        print(
            f"specialisation: the family's own expert wins in {wins:.0%} of (family, seed) "
            f"pairs (target {SPECIALISATION_TARGET:.0%}: {met})"
        )
        return 0
    machine = machine_info(
        seed=args.seed,
        seeds=seeds,
        quick=args.quick,
        family_set=args.families,
        specialisation_target=SPECIALISATION_TARGET,
        graphs_per_family=PER_FAMILY,
        model={**MODEL, "num_experts": len(families)},
        top_k=K,
        sbm_homophily=list(SBM_HOMOPHILY),
        flat_fraction=FLAT_FRACTION,
        flat_tolerance=FLAT_TOL,
        flat_rule=FLAT_RULE,
        min_delta=MIN_DELTA,
        **cfg,
    )
    runs: dict = {}
    curves: dict = {}
    if (old := previous_run(args)) is not None:
        runs = old.get("runs", {})
        curves = old.get("curves", {})
        machine["resumed_from_wall_s"] = old["machine"].get("contention", {}).get("wall_s")
    other = OtherLoad()
    t0 = time.perf_counter()
    deadline = piece_deadline(args)

    def write() -> dict:
        rows = make_rows(runs, seeds, curves, families)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [vars(r) for r in rows]}
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)] if rows else []
        doc["complete"] = all(str(s) in runs for s in seeds)
        doc["curves"] = curves
        doc["runs"] = runs
        machine["contention"] = other.report()
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    for s in seeds:
        if str(s) in runs:
            continue
        if time.perf_counter() > deadline:
            break
        rec = run_seed(s, cfg)
        for run, c in rec.pop("curves").items():
            curves.setdefault(run, {})[str(s)] = c
        runs[str(s)] = rec
        u = rec["metrics"]["unseen"]
        print(
            f"seed {s}: {rec['seconds']:.0f} s, steps {rec['steps']}, flat {rec['converged']}, "
            f"router=family {rec['router_family_accuracy']}; unseen AUC "
            + ", ".join(f"{k} {u[k]['auc']:.3f}" for k in STRATS),
            flush=True,
        )
        write()
    doc = write()
    if doc["rows"]:
        table = [
            [s]
            + [row_value(doc, f"{sp} {s}", m) for sp in SPLITS for m in ("recall@20", "auc")]
            + [row_value(doc, f"unseen {s}", "auc sd")]
            for s in STRATS
        ]
        print_table(
            ["strategy", "train R@20", "train AUC", "unseen R@20", "unseen AUC", "sd"],
            table,
            title=f"graph expert merging, seeds {sorted(runs, key=int)}",
        )
        wins = row_value(doc, "specialisation", "family expert wins fraction")
        print(
            f"specialisation: the family's own expert wins in {wins:.0%} of (family, seed) "
            f"pairs (target {SPECIALISATION_TARGET:.0%}: "
            f"{'met' if wins >= SPECIALISATION_TARGET else 'NOT met'})"
        )
        for v in doc["verdicts"]:
            print(
                f"{v['verdict']:>12}  decisive={v['decisive']!s:5} p={v['p_value']}  {v['claim']}"
            )
    if args.plots is not None and doc["rows"]:
        tag = ("_families" if args.families == "specialised" else "") + (
            "_quick" if args.quick else ""
        )
        plot_curves(doc, args.plots / f"graph_merging{tag}_curves.png")
        plot_auc(doc, args.plots / f"graph_merging{tag}_auc.png")
    print(f"total {time.perf_counter() - t0:.0f} s; complete: {doc['complete']}")
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
