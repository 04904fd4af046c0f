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
[--families standard|specialised] [--resume] [--max-hours H] [--plots DIR] [--threads 1]
[--device cuda]``. ``--device`` (default cpu, the reference of the stored results) is where
the experts pre-train, fine-tune and embed; graphs, encodings and scores are computed on
the CPU. The JSON's machine record notes it for information only (a run resumes on any
device). The JSON is written after every seed; ``--resume`` continues it (seeds already in
it are kept). ``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its rows,
``--rows-only PATH`` its rows and verdicts from its per-seed records (no training).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

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
    SPECIALISATION_TARGET,
    SPLITS,
    STRATS,
    make_rows,
    plot_auc,
    plot_curves,
    verdicts,
)
from _graph_merging_train import (
    FLAT_FRACTION,
    FLAT_RULE,
    FLAT_TOL,
    MIN_DELTA,
    MODEL,
    PER_FAMILY,
    SBM_HOMOPHILY,
    K,
    flat,
    run_seed,
    specialisation_only,
)

from sci_moe.graphs import (
    FAMILIES,
    SPECIALISED_FAMILIES,
)

BENCHMARK = "graph_merging"
#: ``--families``: the generated family sets (one expert per family).
FAMILY_SETS = {"standard": FAMILIES, "specialised": SPECIALISED_FAMILIES}
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


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
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
        wins = specialisation_only(seeds, cfg, args.device)
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
    machine["device"] = args.device  # for information: runs resume on any device
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
        rec = run_seed(s, cfg, args.device)
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
