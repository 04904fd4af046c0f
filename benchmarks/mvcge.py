"""MvCGE (multi-view collaborative graph experts): accuracy vs the Bayes ceiling, ablations.

Data (:mod:`sci_moe.graphs.sbm`): a 3-view contextual SBM, 4 classes, mean degree 10 per
view; view 0 separates classes {0,1}|{2,3}, view 1 {0,2}|{1,3} (contrast 0.6 each), view 2
is noise; weak Gaussian features (class means 1.0 e_c, unit noise, d = 8); split 20 % train,
20 % validation, 60 % test. The reference is the exact **oracle-neighbour Bayes accuracy**
(every other label known; an upper bound for any classifier), for all views, each view
alone and features only (its mean over test nodes; Monte Carlo standard error).

Contestants, all with the same budget (2 propagating layers, hidden 32, dropout 0.5, Adam
lr 0.01, weight decay 5e-4, the same epochs, the epoch chosen by validation accuracy):

* ``GCN view v``: a GCN on one view; ``early fusion``: a GCN on the summed adjacency;
  ``late fusion``: one GCN per view, logits averaged;
* ``MvCGE``: 4 shared GCN experts per layer, top-2, view tokens (mean-pooled propagated
  features), semantic-attention fusion, ``alpha = 0.01`` (L_le), ``beta = 0.1`` (L_gd);
* ablations: ``MvCGE -L_le`` (alpha = 0), ``MvCGE -L_gd`` (beta = 0),
  ``MvCGE unshared``
  (every view its own router and 4 experts), ``MvCGE node tokens``.

Reported per contestant (mean and std over the seeds; graph and model seeds ``seed + i``):
test accuracy, macro-F1, accuracy / Bayes; for MvCGE variants the final-layer expert-usage
entropy per view (weighted by the gates; nats; log 4 = 1.386 is uniform use), the mean
Jensen-Shannon divergence between the views' usage (0: all views route alike) and the
mean pairwise MMD^2 of the views' final embeddings (eval mode, median-heuristic
kernels). Rows carry ``ratio`` against early and late fusion measured in the same run
(> 1: MvCGE better).

Sweep: accuracy vs view informativeness, the contrast of views 0 and 1 from 0 (noise) to
0.8, for MvCGE, early and late fusion and the Bayes ceiling (plot with ``--plots DIR``).
``--full`` extras: a heterophilic case (view 1 disassortative, contrast -0.6) and more
nodes/epochs. KarateClub (torch-geometric, offline; 34 nodes, 4 classes, 4 labelled nodes)
as a real, tiny sanity case: views = the club graph, its distance-2 graph, a random graph
with as many edges; identity features.

Run: ``python benchmarks/mvcge.py [--quick] [--json PATH] [--seed 0] [--plots DIR]
[--threads N]``. ``--quick``: N = 300, 60 epochs, sweep (0, 0.4, 0.8) on N = 300, 3
seeds (about 2 min on one idle core); default: N = 600, 100 epochs, sweep of 5
contrasts on N = 300 (80 epochs), heterophilic case, 3 seeds.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import torch
from _common import OtherLoad, Row, base_parser, machine_info, print_table, setup, write_json

from sci_moe.graphs import (
    EarlyFusionGCN,
    LateFusionGCN,
    MultiViewCSBMConfig,
    MultiViewGraph,
    MvCGE,
    PerViewGCN,
    TrainConfig,
    bayes_optimal_accuracy,
    make_multiview_csbm,
    train_node_classifier,
)
from sci_moe.moe import mmd2, pairwise_js_divergence

BENCHMARK = "mvcge"
HIDDEN, LAYERS, DROPOUT, LR, WD = 32, 2, 0.5, 0.01, 5e-4
EXPERTS, TOP_K, ALPHA, BETA = 4, 2, 0.01, 0.1
N_SEEDS = 3


def build(name: str, in_dim: int, num_classes: int, num_views: int):
    gcn = dict(
        in_dim=in_dim,
        hidden_dim=HIDDEN,
        num_classes=num_classes,
        num_layers=LAYERS,
        dropout=DROPOUT,
    )
    moe = dict(
        in_dim=in_dim,
        hidden_dim=HIDDEN,
        num_classes=num_classes,
        num_layers=LAYERS,
        dropout=DROPOUT,
        num_experts=EXPERTS,
        top_k=TOP_K,
        le_weight=ALPHA,
        gd_weight=BETA,
    )
    if name.startswith("GCN view "):
        return PerViewGCN(int(name.rsplit(" ", 1)[1]), **gcn)
    if name == "early fusion":
        return EarlyFusionGCN(**gcn)
    if name == "late fusion":
        return LateFusionGCN(num_views, **gcn)
    variants = {
        "MvCGE": {},
        "MvCGE -L_le": {"le_weight": 0.0},
        "MvCGE -L_gd": {"gd_weight": 0.0},
        "MvCGE -L_le -L_gd": {"le_weight": 0.0, "gd_weight": 0.0},
        "MvCGE unshared": {"shared_experts": False, "num_views": num_views},
        "MvCGE node tokens": {"token": "node"},
    }
    return MvCGE(**{**moe, **variants[name]})


@torch.no_grad()
def view_mmd(model: MvCGE, graph: MultiViewGraph, max_nodes: int = 300) -> float:
    out = model(graph.features(), graph.edge_indices)
    h = out.embeddings[:, :max_nodes]
    V = h.shape[0]
    vals = [float(mmd2(h[v], h[u])) for v in range(V) for u in range(v + 1, V)]
    return sum(vals) / len(vals)


def run_one(name: str, graph: MultiViewGraph, seed: int, epochs: int) -> dict:
    torch.manual_seed(seed)
    model = build(name, graph.num_features, 4, graph.num_views)
    res = train_node_classifier(
        model, graph, TrainConfig(steps=epochs, lr=LR, weight_decay=WD, seed=seed)
    )
    rec = {
        "acc": res.test_accuracy,
        "f1": res.test_macro_f1,
        "params": sum(p.numel() for p in model.parameters()),
    }
    if isinstance(model, MvCGE):
        with torch.no_grad():
            out = model(graph.features(), graph.edge_indices)
        usage, ent = MvCGE.expert_usage(out, weighted=True)
        rec["entropy"] = ent[-1].tolist()
        rec["js"] = float(pairwise_js_divergence(usage[-1].double()))
        rec["mmd"] = view_mmd(model, graph)
    return rec


def mean_std(vals):
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def csbm(num_nodes: int, contrast=(0.6, 0.6, 0.0)) -> MultiViewCSBMConfig:
    return MultiViewCSBMConfig(num_nodes=num_nodes, contrast=contrast)


def main_table(cfg: MultiViewCSBMConfig, methods, seeds, epochs, rows, tag):
    bayes = {k: [] for k in ("all", "view 0", "view 1", "features")}
    res = {m: [] for m in methods}
    for s in seeds:
        g = make_multiview_csbm(cfg, seed=s)
        for k, views in (("all", None), ("view 0", (0,)), ("view 1", (1,)), ("features", ())):
            bayes[k].append(bayes_optimal_accuracy(g, views=views).expected)
        for m in methods:
            res[m].append(run_one(m, g, s, epochs))
            print(f"  [{tag}] seed {s} {m}: acc {res[m][-1]['acc']:.3f}", flush=True)
    ceiling = statistics.fmean(bayes["all"])
    table = []
    for k, vals in bayes.items():
        mu, sd = mean_std(vals)
        rows.append(Row(f"{tag} Bayes oracle ({k})", "accuracy", mu, "1"))
        table.append([f"Bayes oracle ({k})", mu, sd, None, None, None, None, None])
    base = {
        b: statistics.fmean(r["acc"] for r in res[b])
        for b in ("early fusion", "late fusion")
        if b in res
    }
    for m in methods:
        acc, acc_sd = mean_std([r["acc"] for r in res[m]])
        f1, f1_sd = mean_std([r["f1"] for r in res[m]])
        case = f"{tag} {m}"
        if m.startswith("MvCGE") and base:
            for b, v in base.items():
                rows.append(Row(case, "test_accuracy", acc, "1", f"{tag} {b}", acc / v))
        else:
            rows.append(Row(case, "test_accuracy", acc, "1"))
        rows.append(Row(case, "test_accuracy_std", acc_sd, "1"))
        rows.append(Row(case, "test_macro_f1", f1, "1"))
        rows.append(Row(case, "test_macro_f1_std", f1_sd, "1"))
        rows.append(Row(case, "accuracy_over_bayes", acc / ceiling, "1"))
        rows.append(Row(case, "parameters", float(res[m][0]["params"]), "1"))
        ent = mmd = None
        if "entropy" in res[m][0]:
            ent = [statistics.fmean(r["entropy"][v] for r in res[m]) for v in range(3)]
            mmd = statistics.fmean(r["mmd"] for r in res[m])
            js = statistics.fmean(r["js"] for r in res[m])
            for v in range(3):
                rows.append(Row(case, f"usage_entropy_view{v}", ent[v], "nats"))
            rows.append(Row(case, "view_usage_js", js, "nats"))
            rows.append(Row(case, "view_mmd2", mmd, "1"))
        table.append(
            [
                m,
                acc,
                acc_sd,
                f1,
                acc / ceiling,
                None if ent is None else "/".join(f"{e:.2f}" for e in ent),
                None if ent is None else js,
                mmd,
            ]
        )
    print_table(
        ["method", "acc", "std", "macro-F1", "acc/Bayes", "entropy v0/v1/v2", "JS", "MMD2"],
        table,
        title=f"\n{tag}: N = {cfg.num_nodes}, contrast {cfg.contrast}, "
        f"{len(seeds)} seeds, {epochs} epochs",
    )
    return res, bayes


def sweep(num_nodes, contrasts, seeds, epochs, rows):
    out = {}
    methods = ("MvCGE", "early fusion", "late fusion")
    for lam in contrasts:
        cfg = csbm(num_nodes, (lam, lam, 0.0))
        rec = {m: [] for m in methods}
        rec["Bayes"] = []
        for s in seeds:
            g = make_multiview_csbm(cfg, seed=s)
            rec["Bayes"].append(bayes_optimal_accuracy(g).expected)
            for m in methods:
                rec[m].append(run_one(m, g, s, epochs)["acc"])
        out[lam] = {k: mean_std(v) for k, v in rec.items()}
        for k, (mu, _) in out[lam].items():
            vs = ratio = None
            if k == "MvCGE":
                vs, ratio = f"sweep contrast={lam:g} early fusion", mu / out[lam]["early fusion"][0]
            rows.append(Row(f"sweep contrast={lam:g} {k}", "test_accuracy", mu, "1", vs, ratio))
        print(
            f"  sweep contrast {lam:g}: "
            + ", ".join(f"{k} {v[0]:.3f}" for k, v in out[lam].items()),
            flush=True,
        )
    print_table(
        ["contrast", "Bayes", "MvCGE", "early fusion", "late fusion"],
        [[f"{lam:g}", *(out[lam][k][0] for k in ("Bayes", *methods))] for lam in out],
        title=f"\nsweep: N = {num_nodes}, views 0 and 1 at the given contrast",
    )
    return out


def karate_views(seed: int) -> MultiViewGraph:
    from torch_geometric.datasets import KarateClub
    from torch_geometric.utils import to_undirected

    d = KarateClub()[0]
    N = d.num_nodes
    a = torch.zeros(N, N, dtype=torch.bool)
    a[d.edge_index[0], d.edge_index[1]] = True
    two = ((a.double() @ a.double()) > 0) & ~a & ~torch.eye(N, dtype=torch.bool)
    g = torch.Generator().manual_seed(seed)
    n_rand = d.edge_index.shape[1] // 2
    rnd = torch.randint(0, N, (2, n_rand), generator=g)
    rnd = rnd[:, rnd[0] != rnd[1]]
    test = ~d.train_mask
    return MultiViewGraph(
        d.x,
        [d.edge_index, two.nonzero().t(), to_undirected(rnd, num_nodes=N)],
        d.y,
        d.train_mask,
        None,
        test,
        ["club", "distance-2", "random"],
    )


def karate(seeds, epochs, rows):
    methods = ("GCN view 0", "early fusion", "late fusion", "MvCGE")
    res = {m: [] for m in methods}
    for s in seeds:
        g = karate_views(s)
        for m in methods:
            res[m].append(run_one(m, g, s, epochs)["acc"])
    table = []
    for m in methods:
        mu, sd = mean_std(res[m])
        rows.append(Row(f"karate {m}", "test_accuracy", mu, "1"))
        rows.append(Row(f"karate {m}", "test_accuracy_std", sd, "1"))
        table.append([m, mu, sd])
    print_table(
        ["method", "acc", "std"],
        table,
        title=f"\nKarateClub: 30 test nodes, {len(seeds)} seeds, {epochs} epochs",
    )


def plot_sweep(out, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lams = sorted(out)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for k, style in (
        ("Bayes", "k--"),
        ("MvCGE", "o-"),
        ("early fusion", "s-"),
        ("late fusion", "^-"),
    ):
        mu = np.array([out[lam][k][0] for lam in lams])
        sd = np.array([out[lam][k][1] for lam in lams])
        ax.plot(lams, mu, style, label=k if k != "Bayes" else "Bayes oracle (ceiling)")
        if k != "Bayes":
            ax.fill_between(lams, mu - sd, mu + sd, alpha=0.15)
    ax.axhline(0.25, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("contrast of views 0 and 1 (view informativeness)")
    ax.set_ylabel("test accuracy")
    ax.set_title("multi-view CSBM: accuracy vs view informativeness")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0])
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    args = parser.parse_args(argv)
    setup(args)
    quick = args.quick
    n_main, epochs = (300, 60) if quick else (600, 100)
    n_sweep, sweep_epochs = (300, 60) if quick else (300, 80)
    contrasts = (0.0, 0.4, 0.8) if quick else (0.0, 0.2, 0.4, 0.6, 0.8)
    seeds = [args.seed + i for i in range(N_SEEDS)]
    machine = machine_info(
        seed=args.seed,
        quick=quick,
        seeds=seeds,
        num_nodes=n_main,
        epochs=epochs,
        hidden=HIDDEN,
        layers=LAYERS,
        experts=EXPERTS,
        top_k=TOP_K,
        alpha=ALPHA,
        beta=BETA,
        sweep_nodes=n_sweep,
        sweep_epochs=sweep_epochs,
        contrasts=list(contrasts),
    )
    print(
        f"mvcge: torch {machine['torch']}, {machine['cpu']}, {torch.get_num_threads()} "
        f"threads, seeds {seeds}, git {machine['git']}"
    )
    other = OtherLoad()
    rows: list[Row] = []
    methods = [
        "GCN view 0",
        "GCN view 1",
        "GCN view 2",
        "early fusion",
        "late fusion",
        "MvCGE",
        "MvCGE -L_le",
        "MvCGE -L_gd",
        "MvCGE unshared",
        "MvCGE node tokens",
    ]
    main_table(csbm(n_main), methods, seeds, epochs, rows, "csbm")
    if not quick:
        main_table(
            csbm(n_main, (0.6, -0.6, 0.0)),
            ["early fusion", "late fusion", "MvCGE"],
            seeds,
            epochs,
            rows,
            "heterophilic",
        )
    out = sweep(n_sweep, contrasts, seeds, sweep_epochs, rows)
    karate(seeds, 100, rows)
    if args.plots is not None:
        name = "mvcge_quick_informativeness.png" if quick else "mvcge_informativeness.png"
        plot_sweep(out, args.plots / name)
        print(f"plot in {args.plots / name}")
    load = other.report()
    machine["contention"] = load
    print(f"total {load['wall_s']:.0f} s; other processes used {load['other_cpu_s']} CPU s")
    if args.json is not None:
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
