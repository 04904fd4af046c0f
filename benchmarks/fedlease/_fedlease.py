"""Shared by the FedLEASE scripts (full.py): the settings, the clients of one seed, one
method trained round by round until its validation accuracy is flat (:func:`run_flat`,
:func:`flat_rule`), the per-client majority-class predictor, the clustering diagnostics
of the warm-up, the rows and the learning-curve plot."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from sci_moe.data.fed_tasks import ALL_TASKS, build_fed_clients
from sci_moe.federated import RoundPlan, Server, Simulator, TrainConfig
from sci_moe.federated.fedlease import (
    IFCA,
    FedIT,
    FedLEASE,
    LocalLoRA,
    b_matrix_distances,
    cluster_clients,
)
from sci_moe.train import is_flat

__all__ = [
    "BASELINES",
    "FIXED",
    "FLAT",
    "METHODS",
    "SILENT",
    "SWEEP",
    "TRIVIAL",
    "UNITS",
    "build_seed",
    "clustering_diagnostics",
    "flat_rule",
    "majority_class",
    "make_rows",
    "plot_curves",
    "run_flat",
    "run_method",
    "settings",
    "sweep_key",
    "unit_key",
    "warmup_sweep",
]

#: FedLEASE (adaptive top-M, B clustering), its true-cluster oracle, the baselines, and
#: FedLEASE with fixed top-k routing (k = 1, 2, M_max) on the same clustering.
METHODS = (
    "fedlease",
    "fedlease_oracle",
    "fedit",
    "local",
    "ifca",
    "fedlease_top1",
    "fedlease_top2",
    "fedlease_topmax",
)
BASELINES = ("fedit", "local", "ifca")
#: Methods that send nothing in a deployment: the simulator still ships a local method's
#: state down and up (its clients keep no state between rounds), but the bytes per round
#: of these are 0.
SILENT = ("local",)
#: The non-learned baseline: each client predicts its most frequent training label.
TRIVIAL = "majority"
FIXED = ("fedlease_top1", "fedlease_top2", "fedlease_topmax")
#: Flat: the mean client validation accuracy improved by less than 1 % (relative) over
#: the last 20 % of the rounds (sci_moe.train.is_flat, mode max, from five evaluations).
FLAT = dict(tail=0.2, tol=0.01, mode="max", min_points=5)
#: The warm-up sweep of the diagnosis, ``(alpha, optimizer, lr, warm-up epochs)``: label
#: skew (Dirichlet alpha; 100 is nearly none), warm-up length, and the local optimiser
#: (Adam as in the run, or SGD with momentum 0.9, whose B follows the accumulated gradient
#: instead of Adam's normalised steps); the clustering features after the warm-up only.
SWEEP = (
    (1.0, "adam", 3e-3, 1),
    (1.0, "adam", 3e-3, 2),
    (1.0, "adam", 3e-3, 5),
    (100.0, "adam", 3e-3, 1),
    (100.0, "adam", 3e-3, 2),
    (100.0, "adam", 3e-3, 5),
    (1.0, "sgd", 3e-2, 2),
    (100.0, "sgd", 3e-2, 2),
)


def sweep_key(alpha: float, optimizer: str, lr: float, epochs: int) -> str:
    return f"alpha={alpha}/{optimizer}/epochs={epochs}"


#: Every unit of a seed: the majority-class predictor, the methods and the warm-up sweep.
UNITS = (TRIVIAL, *METHODS, "warmup_sweep")


def settings(quick: bool) -> dict:
    """Data, model and round settings of the full run (or the ``--quick`` toy run)."""
    if quick:
        return dict(
            tasks=["negation", "analogy"],
            clients_per_task=3,
            per_class=24,
            alpha=1.0,
            test_fraction=0.4,
            eval_per_client=12,
            warmup_epochs=1,
            warmup_optimizer="adam",
            warmup_lr=3e-3,
            min_rounds=2,
            patience=2,
            max_rounds=3,
            lr=3e-3,
            batch_size=16,
            rank=4,
            max_clusters=4,
        )
    return dict(
        tasks=list(ALL_TASKS),
        clients_per_task=4,
        per_class=300,
        alpha=1.0,
        test_fraction=0.4,
        eval_per_client=120,
        warmup_epochs=2,
        warmup_optimizer="adam",
        warmup_lr=3e-3,
        min_rounds=30,
        patience=3,
        max_rounds=60,
        lr=3e-3,
        batch_size=16,
        rank=4,
        max_clusters=8,
    )


def flat_rule(s: dict) -> str:
    """The stopping rule of :func:`run_flat` in words (the JSON's ``machine.flat_rule``)."""
    return (
        f"flat when, at each of {s.get('patience', 1)} consecutive rounds from round "
        f"{s['min_rounds']} on (rounds counted after the warm-up round), the mean client "
        f"validation accuracy improved by less than {100 * FLAT['tol']:g} % (relative) over "
        f"the last {100 * FLAT['tail']:g} % of the rounds so far (sci_moe.train.is_flat "
        f"{FLAT}); so never before round {s['min_rounds'] + s.get('patience', 1) - 1}; at "
        f"most {s['max_rounds']} rounds, else not flat (converged false)"
    )


def run_flat(values: list[float], s: dict) -> bool:
    """Whether a run whose validation curve after the warm-up is ``values`` (round 1, 2, ...)
    may stop as flat: :func:`sci_moe.train.is_flat` (:data:`FLAT`) holds on the curve up to
    each of the last ``patience`` rounds, all of them at least ``min_rounds``
    (:func:`flat_rule`)."""
    n, patience = len(values), s.get("patience", 1)
    if n - patience + 1 < s["min_rounds"]:
        return False
    rounds = list(range(1, n + 1))
    return all(is_flat(rounds[:k], values[:k], **FLAT) for k in range(n - patience + 1, n + 1))


def majority_class(fs) -> dict:
    """The trivial predictor of each client: its most frequent training label (the smaller
    label on a tie), scored on the client's test set."""
    acc, label = [], []
    for c in fs.clients:
        y_train = c.data.y_train.numpy()
        y_test = c.data.y_test.numpy()
        k = int(np.bincount(y_train).argmax())
        label.append(k)
        acc.append(float(np.mean(y_test == k)))
    return dict(accuracy=acc, label=label, n_test=[len(c.data.y_test) for c in fs.clients])


def build_seed(
    seed: int, s: dict, cache: Path | None, alpha: float | None = None, device: str | None = None
):
    """The clients of one seed (:func:`sci_moe.data.fed_tasks.build_fed_clients` with
    held-out validation and test pools); the hidden states are cached under ``cache``
    (keyed by the texts, so another ``alpha`` reuses them). The clients train and evaluate
    on ``device`` (their ``TrainConfig.device``; not a setting: the numbers are the CPU's
    up to rounding)."""
    name = f"fed_{'_'.join(s['tasks'])}_{s['per_class']}_{seed}.npz"
    return build_fed_clients(
        clients_per_task=s["clients_per_task"],
        per_class=s["per_class"],
        tasks=tuple(s["tasks"]),
        alpha=s["alpha"] if alpha is None else alpha,
        test_fraction=s["test_fraction"],
        seed=seed,
        train=TrainConfig(lr=s["lr"], batch_size=s["batch_size"], seed=seed, device=device),
        rank=s["rank"],
        cache=None if cache is None else Path(cache) / name,
        eval_per_client=s["eval_per_client"],
        clip_per_class=True,
    )


def _strategy(method: str, fs, s: dict, plan: RoundPlan):
    """The server algorithm of ``method`` and the clients (validation, test) it runs on."""
    n, M = len(fs.clients), s["max_clusters"]
    if method in FIXED:
        k = {"fedlease_top1": 1, "fedlease_top2": 2, "fedlease_topmax": M}[method]
        spec = dataclasses.replace(fs.spec, top_k=k)
        val = [dataclasses.replace(c, spec=spec) for c in fs.validation]
        test = [dataclasses.replace(c, spec=spec) for c in fs.clients]
        return FedLEASE(spec, n, plan, max_clusters=M), val, test
    if method == "fedlease":
        strat = FedLEASE(fs.spec, n, plan, max_clusters=M)
    elif method == "fedlease_oracle":
        strat = FedLEASE(fs.spec, n, plan, max_clusters=M, fixed_labels=fs.tasks.tolist())
    elif method == "ifca":
        strat = IFCA(fs.spec, n, plan, num_clusters=len(fs.task_names))
    else:
        strat = {"fedit": FedIT, "local": LocalLoRA}[method](fs.spec, n, plan)
    return strat, fs.validation, fs.clients


def clustering_diagnostics(strat, tasks: np.ndarray, max_clusters: int) -> dict:
    """What the warm-up states say about the true tasks: for the B matrices of both
    projections (the paper's feature), of each projection alone and for the heads, the ARI
    of the silhouette clustering, its M, the ARI at the true number of tasks and the mean
    cosine distance within and between tasks."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform
    from sklearn.metrics import adjusted_rand_score

    n, k_true = len(tasks), len(set(tasks.tolist()))
    same = tasks[:, None] == tasks[None, :]
    off = ~np.eye(n, dtype=bool)
    feats = {
        "B": ["query.lora_b", "value.lora_b"],
        "B_query": ["query.lora_b"],
        "B_value": ["value.lora_b"],
        "head": ["head.weight"],
    }
    out = {}
    for name, keys in feats.items():
        d = b_matrix_distances([{k: st[k] for k in keys} for st in strat.local])
        res = cluster_clients(d, max_clusters)
        at_k = fcluster(linkage(squareform(d, checks=False), "average"), k_true, "maxclust")
        out[name] = dict(
            ari=float(adjusted_rand_score(tasks, res.labels)),
            M=res.num_clusters,
            ari_at_true_k=float(adjusted_rand_score(tasks, at_k)),
            within=float(d[same & off].mean()),
            between=float(d[~same].mean()),
        )
    return out


def warmup_sweep(seed: int, s: dict, cache: Path | None, device: str | None = None) -> dict:
    """The clustering diagnostics after the warm-up only, for every label skew, optimiser and
    warm-up length of :data:`SWEEP` (same texts and seed; no federated rounds; the clients
    on ``device``)."""
    t0, out, sets = time.perf_counter(), {}, {}
    for alpha, opt, lr, ep in SWEEP:
        if alpha not in sets:
            sets[alpha] = build_seed(seed, s, cache, alpha=alpha, device=device)
        fs = sets[alpha]
        clients = [
            dataclasses.replace(c, train=dataclasses.replace(c.train, optimizer=opt, lr=lr))
            for c in fs.clients
        ]
        plan = RoundPlan(rounds=1, warmup_epochs=ep, seed=seed)
        strat = FedLEASE(fs.spec, len(clients), plan, max_clusters=s["max_clusters"])
        Server(strat).step(Simulator(clients))
        diag = clustering_diagnostics(strat, fs.tasks, s["max_clusters"])
        out[sweep_key(alpha, opt, lr, ep)] = diag
    return {"sweep": out, "seconds": time.perf_counter() - t0}


def _mean_accuracy(metrics: dict, n: int) -> list[float]:
    return [float(metrics[c]["accuracy"]) if c in metrics else float("nan") for c in range(n)]


def run_method(method: str, seed: int, fs, s: dict, progress: bool = False) -> dict:
    """Train ``method`` round by round until the mean client validation accuracy is flat
    (:func:`run_flat`, at most ``max_rounds`` rounds after the warm-up), then evaluate every
    client on its test set. The warm-up round trains with ``warmup_optimizer`` at
    ``warmup_lr`` (Adam at ``lr`` when absent), the later rounds with Adam at ``lr``. The
    bytes per round of a :data:`SILENT` method are 0 (the simulator's in
    ``simulator_bytes_down`` / ``_up``)."""
    from sklearn.metrics import adjusted_rand_score

    t0 = time.perf_counter()
    plan = RoundPlan(
        rounds=s["max_rounds"], warmup_epochs=s["warmup_epochs"], local_epochs=1, seed=seed
    )
    strat, val, test = _strategy(method, fs, s, plan)
    engine, n = Simulator(val), len(fs.clients)
    opt, wlr = s.get("warmup_optimizer", "adam"), s.get("warmup_lr", s["lr"])
    warm = engine
    if (opt, wlr) != ("adam", s["lr"]):  # round 0 (the warm-up) with its own optimiser
        warm = Simulator(
            [
                dataclasses.replace(c, train=dataclasses.replace(c.train, optimizer=opt, lr=wlr))
                for c in val
            ]
        )
    server = Server(strat)
    curve, flat = [], False
    while not server.done:
        entry = server.step(warm if server.round == 0 else engine)
        val_acc = _mean_accuracy(server.evaluate(engine), n)
        curve.append([entry["round"], float(np.nanmean(val_acc)), float(entry["loss"])])
        if progress:
            print(
                f"  seed {seed} {method} round {entry['round']}: val {curve[-1][1]:.4f} "
                f"loss {entry['loss']:.4f}",
                flush=True,
            )
        if run_flat([c[1] for c in curve[1:]], s):  # the curve after the warm-up
            flat = True
            break
    metrics = server.evaluate(Simulator(test))
    hist = server.history
    out = dict(
        accuracy=_mean_accuracy(metrics, n),
        n_test=[int(metrics[c]["n_test"]) for c in range(n) if c in metrics],
        rounds=server.round - 1,
        converged=flat,
        curve=curve,
        bytes_down=float(np.mean([h["bytes_down"] for h in hist[1:]])),
        bytes_up=float(np.mean([h["bytes_up"] for h in hist[1:]])),
        excluded=sum(len(h["excluded"]) for h in hist),
        seconds=time.perf_counter() - t0,
    )
    if method in SILENT:  # nothing leaves the client; the simulator's traffic kept apart
        out.update(
            simulator_bytes_down=out["bytes_down"],
            simulator_bytes_up=out["bytes_up"],
            bytes_down=0.0,
            bytes_up=0.0,
        )
    if method.startswith("fedlease"):
        used = [metrics[c]["experts_used"] for c in range(n) if c in metrics]
        out["experts_used"] = {p: float(np.mean([u[p] for u in used])) for p in ("query", "value")}
        out["M"] = strat.num_experts
        out["labels"] = [int(v) for v in strat.labels]
        out["ari"] = float(adjusted_rand_score(fs.tasks, strat.labels))
    if method == "fedlease":
        out["silhouette"] = {str(k): v for k, v in strat.silhouette.items()}
        # strat.local still holds the warm-up states (later rounds update the experts only)
        out["diagnostics"] = clustering_diagnostics(strat, fs.tasks, s["max_clusters"])
    if method == "ifca":
        out["ari"] = float(adjusted_rand_score(fs.tasks, strat.labels))
    return out


def unit_key(seed: int, method: str) -> str:
    return f"seed={seed}/{method}"


def make_rows(runs: dict, seeds: list, row) -> list:
    """Rows (``row(case, metric, value, unit, vs=None, ratio=None)``) of the seeds whose every
    unit is done: per seed and method (and the :data:`TRIVIAL` predictor) the mean client
    test accuracy, the ARIs, the chosen M, rounds, flatness; means over those seeds;
    communication per round (0 for the :data:`SILENT` methods)."""
    done = [s for s in seeds if all(unit_key(s, m) in runs for m in UNITS)]
    rows = []
    if not done:
        return rows

    def sent(m, key):  # mean bytes per round over the seeds
        return 0.0 if m in SILENT else float(np.mean([runs[unit_key(s, m)][key] for s in done]))

    acc = {
        m: [float(np.mean(runs[unit_key(s, m)]["accuracy"])) for s in done]
        for m in (TRIVIAL, *METHODS)
    }
    for s, v in zip(done, acc[TRIVIAL], strict=True):
        rows.append(row(f"{TRIVIAL} seed {s}", "mean client accuracy", v, "fraction"))
    v = float(np.mean(acc[TRIVIAL]))
    rows.append(
        row(
            TRIVIAL,
            "mean client accuracy",
            v,
            "fraction",
            "fedit",
            float(v / np.mean(acc["fedit"])),
        )
    )
    for m in METHODS:
        for s, v in zip(done, acc[m], strict=True):
            rows.append(row(f"{m} seed {s}", "mean client accuracy", v, "fraction"))
        vs = None if m == "fedit" else "fedit"
        ratio = None if vs is None else float(np.mean(acc[m]) / np.mean(acc["fedit"]))
        rows.append(row(m, "mean client accuracy", float(np.mean(acc[m])), "fraction", vs, ratio))
        r = [runs[unit_key(s, m)] for s in done]
        rows.append(
            row(m, "converged fraction", float(np.mean([x["converged"] for x in r])), "fraction")
        )
        rows.append(row(m, "rounds (median)", float(np.median([x["rounds"] for x in r])), "rounds"))
        down, vs = sent(m, "bytes_down"), None if m == "fedit" else "fedit"
        ratio = None if vs is None else down / sent("fedit", "bytes_down")
        rows.append(row(m, "bytes down per round", down, "bytes", vs, ratio))
        rows.append(row(m, "bytes up per round", sent(m, "bytes_up"), "bytes"))
        rows.append(row(m, "seconds per run", float(np.mean([x["seconds"] for x in r])), "s"))
        if m.startswith("fedlease"):
            for p in ("query", "value"):
                rows.append(
                    row(
                        m,
                        f"experts used per token ({p})",
                        float(np.mean([x["experts_used"][p] for x in r])),
                        "experts",
                    )
                )
            rows.append(row(m, "mean M", float(np.mean([x["M"] for x in r])), "experts"))
    k_true = len(set(runs[unit_key(done[0], "fedlease_oracle")]["labels"]))
    for m in ("fedlease", "ifca"):
        ari = [runs[unit_key(s, m)]["ari"] for s in done]
        for s, v in zip(done, ari, strict=True):
            rows.append(row(f"{m} seed {s}", "ARI vs true tasks", v, "ARI"))
        rows.append(row(m, "mean ARI", float(np.mean(ari)), "ARI"))
    for s in done:
        M = runs[unit_key(s, "fedlease")]["M"]
        rows.append(
            row(f"fedlease seed {s}", "chosen M", float(M), "experts", "true tasks", M / k_true)
        )
    for feat in ("B", "B_query", "B_value", "head"):
        dg = [runs[unit_key(s, "fedlease")]["diagnostics"][feat] for s in done]
        for key in ("ari", "ari_at_true_k", "within", "between"):
            unit = "ARI" if key.startswith("ari") else "cosine distance"
            rows.append(
                row(
                    f"warm-up {feat}",
                    key.replace("_", " "),
                    float(np.mean([d[key] for d in dg])),
                    unit,
                )
            )
    for cfg in SWEEP:
        key = sweep_key(*cfg)
        sw = [runs[unit_key(s, "warmup_sweep")]["sweep"][key] for s in done]
        for feat in ("B", "B_query", "B_value", "head"):
            for k, unit in (
                ("ari", "ARI"),
                ("within", "cosine distance"),
                ("between", "cosine distance"),
                ("M", "experts"),
            ):
                v = float(np.mean([d[feat][k] for d in sw]))
                rows.append(row(f"sweep {key} {feat}", k, v, unit))
    rows.append(row("run", "seeds done", float(len(done)), "count"))
    rows.append(row("run", "true tasks", float(k_true), "count"))
    return rows


def plot_curves(runs: dict, path: Path) -> None:
    """Mean client validation accuracy against rounds of every method and seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for j, group in enumerate((METHODS[:5], ("fedlease", *FIXED))):
        ax = axes[j]
        for k, m in enumerate(group):
            for key, u in runs.items():
                if key.endswith(f"/{m}"):
                    r, v = np.asarray(u["curve"])[:, :2].T
                    ls = "-" if u["converged"] else ":"
                    lab = m if key.startswith("seed=0/") else None
                    ax.plot(r, v, ls, color=f"C{k}", lw=0.8, label=lab)
        ax.set_xlabel("round (0 = warm-up)")
        ax.set_ylabel("mean client validation accuracy")
        ax.legend(fontsize=7)
    axes[0].set_title("FedLEASE and baselines (dotted: not flat)", fontsize=9)
    axes[1].set_title("adaptive top-M vs fixed top-k", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
