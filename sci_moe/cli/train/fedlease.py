"""``sci-moe train fedlease``: FedLEASE (or a baseline) in the in-process federated simulation.

The clients are those of :func:`sci_moe.data.fed_tasks.build_fed_clients`: binary sentence
tasks with a known cluster structure, split over ``--clients-per-task`` clients each
(Dirichlet label skew), encoded by the frozen all-MiniLM-L6-v2 up to its last layer, which
every client fine-tunes with LoRA on the attention query and value. The server runs one
warm-up round and ``--rounds`` federated rounds (:class:`sci_moe.federated.Server` over the
:class:`~sci_moe.federated.Simulator`); each client's local round runs on the training
engine with this command's optimiser options.

The server state is checkpointed after every round (``OUT/checkpoint.pt``, verified, the
previous round's kept as ``checkpoint_prev.pt``): clients keep no state between rounds,
so ``--resume`` continues a stopped run bit-identically from the last finished round.
``--max-hours`` is checked after each round. ``OUT/metrics.jsonl`` has one line per round;
``OUT/model.pt`` the final experts (and routers); ``results.json`` every client's test
accuracy, the mean per task and, for the clustered methods, the clusters found and their
adjusted Rand index against the true tasks. Without ``--cache`` the MiniLM hidden states
are cached in ``OUT/data/``.

``--device cuda`` runs every client's local round, IFCA's selection and the final
evaluation on the GPU (the client model, its frozen MiniLM inputs and labels); the clients
send their states back as CPU tensors, so the server's aggregation and clustering, its
checkpoints and ``model.pt`` are the same as a CPU run's (up to the GPU's rounding).
Where torch sees no GPU it is refused (exit code 2) before anything is written.

With ``--flower`` nothing is simulated: the command writes a Flower deployment of the same
run to ``OUT/flower`` (``strategy.pt`` for the server app, ``client_<i>.pt`` for the node
of client ``i``, the app directory ``app/`` for ``flwr run``;
:mod:`sci_moe.federated.flower`) and prints the commands that start it; a Flower run
with one intra-op thread per process equals the simulated one bit for bit.

Examples
--------
.. code-block:: console

    $ sci-moe train fedlease --out runs/fedlease --rounds 8
    $ sci-moe train fedlease --out runs/flower --rounds 8 --flower
    $ sci-moe train fedlease --out runs/fedit --strategy fedit --rounds 8
    $ sci-moe train fedlease --out runs/fedlease --rounds 8 --max-hours 0.2 --resume
    $ sci-moe train fedlease --out runs/fedlease_gpu --rounds 8 --device cuda
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..._util import check_int_attr
from ...data.fed_tasks import TASKS
from ...federated.client import TrainConfig
from ._common import TrainMethod

__all__ = ["METHOD", "STRATEGIES", "FedLEASERunConfig", "export_flower", "run"]

#: Server algorithms of ``--strategy``.
STRATEGIES = ("fedlease", "fedit", "local", "ifca")


@dataclass
class FedLEASERunConfig(TrainConfig):
    """Options of ``sci-moe train fedlease``: local training (the engine's options, per
    local round; ``steps`` is set by each round's epochs), the rounds, the data.

    Parameters
    ----------
    strategy : {"fedlease", "fedit", "local", "ifca"}
        FedLEASE, one shared LoRA (FedIT), every client alone, or IFCA.
    rounds : int
        Federated rounds after the warm-up round.
    warmup_epochs : int
        Local epochs of the warm-up round.
    local_epochs : int
        Local epochs of every later round.
    max_clusters : int
        FedLEASE's largest number of clusters (experts) in the silhouette search.
    oracle_clusters : bool
        FedLEASE with the true tasks as clusters (an ablation of the clustering).
    ifca_clusters : int
        IFCA's number of cluster models (0: the number of tasks).
    clients_per_task : int
        Clients of each task.
    per_class : int
        Sentences per class per task.
    tasks : tuple of str
        Tasks among topic, sentiment, source and negation.
    alpha : float
        Dirichlet concentration of the label skew within a task (small: more skewed).
    test_fraction : float
        Fraction of each client's examples held out for its test accuracy.
    max_len : int
        Tokens per sentence.
    data_seed : int
        Seed of the sentences and their split over the clients.
    rank : int
        LoRA rank.
    cache : str or None
        Folder of the cached MiniLM hidden states (none: OUT/data).
    flower : bool
        Write a Flower deployment of this run to OUT/flower (the strategy file, one file
        per client for its node, the app directory for flwr run) instead of simulating.
    """

    strategy: str = "fedlease"
    rounds: int = 8
    warmup_epochs: int = 2
    local_epochs: int = 1
    max_clusters: int = 8
    oracle_clusters: bool = False
    ifca_clusters: int = 0
    clients_per_task: int = 3
    per_class: int = 80
    tasks: tuple[str, ...] = TASKS
    alpha: float = 1.0
    test_fraction: float = 0.3
    max_len: int = 32
    data_seed: int = 0
    rank: int = 4
    cache: str | None = None
    flower: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        minimum = {"rounds": 1, "warmup_epochs": 1, "local_epochs": 1, "max_clusters": 2}
        minimum |= {"ifca_clusters": 0, "clients_per_task": 1, "per_class": 4, "max_len": 4}
        minimum |= {"rank": 1}
        for name, lo in minimum.items():
            check_int_attr(self, name, lo)
        for name in ("oracle_clusters", "flower"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        self.tasks = tuple(self.tasks)
        bad = [t for t in self.tasks if t not in TASKS]
        if not self.tasks or bad or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks must be distinct names among {TASKS}, got {self.tasks!r}")
        if len(self.tasks) * self.clients_per_task < 2:
            raise ValueError(
                "clients_per_task must give at least two clients in all (tasks x "
                f"clients_per_task = {len(self.tasks) * self.clients_per_task})"
            )
        for name, lo, hi in (("alpha", 0.0, None), ("test_fraction", 0.0, 1.0)):
            v = getattr(self, name)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and v > lo
            if not ok or (hi is not None and not v < hi):
                where = f"({lo}, {hi})" if hi is not None else f"> {lo}"
                raise ValueError(f"{name} must be a number {where}, got {v!r}")

    def plan(self):
        """The :class:`~sci_moe.federated.RoundPlan` (its seed: the shared initial LoRA)."""
        from ...federated import RoundPlan

        return RoundPlan(self.rounds, self.warmup_epochs, self.local_epochs, self.seed)


def build_strategy(cfg: FedLEASERunConfig, clients):
    """The server algorithm of ``cfg`` for a :class:`~sci_moe.data.fed_tasks.FedTaskSet`."""
    from ...federated.fedlease import IFCA, FedIT, FedLEASE, LocalLoRA

    n, plan = len(clients.clients), cfg.plan()
    if cfg.strategy == "fedlease":
        fixed = clients.tasks.tolist() if cfg.oracle_clusters else None
        if fixed is None and n < 3:
            raise ValueError(
                f"strategy fedlease clusters the clients and needs at least 3, got {n}; "
                "raise --clients-per-task or add --tasks"
            )
        return FedLEASE(clients.spec, n, plan, max_clusters=cfg.max_clusters, fixed_labels=fixed)
    if cfg.strategy == "ifca":
        return IFCA(clients.spec, n, plan, num_clusters=cfg.ifca_clusters or len(cfg.tasks))
    return {"fedit": FedIT, "local": LocalLoRA}[cfg.strategy](clients.spec, n, plan)


def run(cfg: FedLEASERunConfig, out: Path, resume: bool) -> dict:
    """Build the clients, run (or continue) the rounds, evaluate every client."""
    import numpy as np

    from ..._util import atomic_torch_save, previous_path, progress_bar, set_threads
    from ...data.fed_tasks import build_fed_clients
    from ...federated import Server, Simulator
    from ...train import CHECKPOINT_NAME, METRICS_NAME, MetricsLog, current_context

    if current_context().enabled:
        raise ValueError("fedlease simulates its clients in one process: run it without torchrun")
    set_threads(cfg.threads, default=1)
    cache = Path(cfg.cache) if cfg.cache is not None else out / "data"
    clients = build_fed_clients(
        clients_per_task=cfg.clients_per_task,
        per_class=cfg.per_class,
        tasks=cfg.tasks,
        alpha=cfg.alpha,
        test_fraction=cfg.test_fraction,
        max_len=cfg.max_len,
        seed=cfg.data_seed,
        train=cfg,
        rank=cfg.rank,
        cache=cache / f"fed_hidden_{cfg.max_len}.npz",
    )
    strategy = build_strategy(cfg, clients)
    if cfg.flower:
        return export_flower(strategy, clients.clients, out / "flower")
    ckpt = out / CHECKPOINT_NAME
    log = MetricsLog(out / METRICS_NAME)
    resumed_from = None
    if resume and (ckpt.exists() or previous_path(ckpt).exists()):
        server = Server.resume(strategy, ckpt)
        resumed_from = server.round
        log.truncate(server.round)
        print(f"fedlease: resumed after round {server.round} of {strategy.num_rounds}")
    else:
        server = Server(strategy, checkpoint=ckpt)
        log.reset()
    t0 = time.perf_counter()
    reason = "completed"
    bar = progress_bar(
        total=strategy.num_rounds,
        initial=server.round,
        desc=f"fedlease/{strategy.name}",
        unit="round",
        disable=not cfg.progress,
    )
    with Simulator(clients.clients) as engine:
        try:
            while not server.done:
                e = server.step(engine)
                spent = time.perf_counter() - t0
                log.write(
                    {
                        "step": server.round,
                        "time_s": spent,
                        "train_loss": e["loss"],
                        "updates": len(e["updates"]),
                        "excluded": e["excluded"],
                        "bytes_down": e["bytes_down"],
                        "bytes_up": e["bytes_up"],
                    }
                )
                bar.update(1)
                if cfg.max_hours is not None and spent >= 3600 * cfg.max_hours and not server.done:
                    reason = "budget"
                    break
        finally:
            bar.close()
        train = {
            "step": server.round,
            "steps": strategy.num_rounds,
            "reason": reason,
            "finished": server.done,
            "resumed_from": resumed_from,
            "train_time_s": time.perf_counter() - t0,
            "unit": "round (the warm-up round included)",
        }
        results: dict = {"train": train, "history": server.history}
        if not server.done:
            return results
        metrics = server.evaluate(engine)
    atomic_torch_save(out / "model.pt", {"strategy": strategy.name, "state": strategy.state_dict()})
    n = len(clients.clients)
    acc = [metrics[c]["accuracy"] if c in metrics else float("nan") for c in range(n)]
    tasks = clients.tasks.tolist()
    results["test"] = {
        "accuracy": acc,
        "mean_accuracy": float(np.nanmean(acc)),
        "per_task": {
            name: float(np.nanmean([a for a, t in zip(acc, tasks, strict=True) if t == i]))
            for i, name in enumerate(clients.task_names)
        },
        "experts_used": [metrics[c].get("experts_used") for c in sorted(metrics)],
    }
    results["tasks"] = tasks
    labels = getattr(strategy, "labels", None)
    if labels:
        from sklearn.metrics import adjusted_rand_score

        results["clusters"] = {
            "labels": list(labels),
            "count": len(set(labels)),
            "ari_vs_tasks": float(adjusted_rand_score(tasks, list(labels))),
        }
    return results


def export_flower(strategy, clients, folder: Path) -> dict:
    """Write the Flower deployment of a run (``--flower``) and print how to start it."""
    from ...federated.flower import save_client, save_strategy, write_app

    folder = folder.resolve()
    save_strategy(strategy, folder / "strategy.pt")
    files = [str(save_client(c, folder / f"client_{c.client_id}.pt")) for c in clients]
    app = write_app(folder / "app", strategy_file=str(folder / "strategy.pt"))
    print(
        f"Flower deployment of {len(files)} clients in {folder} (docs: federated page):\n"
        "  flower-superlink --ssl-certfile server.pem --ssl-keyfile server.key "
        "--ssl-ca-certfile ca.crt --host 0.0.0.0 --disable-runtime-dependency-installation\n"
        "  flower-supernode --root-certificates ca.crt --superlink HOST:8000 "
        f"--node-config 'data=\"{folder}/client_<i>.pt\"'   # on the node of client i\n"
        f"  flwr run {app} <connection> --run-config 'out=\"{folder}/out\"'"
    )
    return {
        "flower": {"strategy": str(folder / "strategy.pt"), "clients": files, "app": str(app)},
        "train": {"step": 0, "steps": strategy.num_rounds, "reason": "exported"},
    }


METHOD = TrainMethod(
    name="fedlease",
    help="FedLEASE federated LoRA experts (simulated clients)",
    config=lambda: FedLEASERunConfig,
    run=run,
    outputs=("model.pt",),
    description=(
        "Run FedLEASE (clustered LoRA experts with the adaptive top-M router) or a "
        "baseline (FedIT, local LoRA, IFCA) in the in-process federated simulation on "
        "four offline text tasks over a frozen MiniLM; each client's local round runs on "
        "the shared training engine; rounds are checkpointed for --resume."
    ),
)
