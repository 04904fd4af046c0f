"""FedLEASE, the decisive run: five offline text domains, label skew, 10 paired seeds, every
method trained until its validation accuracy is flat.

Clients (:func:`sci_moe.data.fed_tasks.build_fed_clients`): the five binary sentence tasks
of :data:`~sci_moe.data.fed_tasks.ALL_TASKS` (20-Newsgroups topic, Pang-Lee sentiment,
Lee-news-vs-Wikipedia source, templated negation, analogy questions semantic vs
grammatical) are the true clusters; ``clients_per_task`` clients per task with
Dirichlet(``alpha``) label skew. Each task's pool (``per_class`` sentences per class, the
sentiment sample has 100) keeps ``test_fraction`` per class out of training, half as a
validation pool and half as a test pool; every client draws ``eval_per_client``
validation and as many test examples from them with its own label shares. Model: the
frozen all-MiniLM-L6-v2 of ``run.py`` (cached hidden states, LoRA rank 4 on the last
layer's query and value, a linear head per expert), Adam 3e-3, batch 16.

Methods (:data:`_fedlease.METHODS`), one warm-up round of ``warmup_epochs`` local epochs
and then one local epoch per round, each trained round by round until the mean client
validation accuracy is flat (:data:`_fedlease.FLAT`: less than 1 % better over the last
20 % of the rounds, :func:`sci_moe.train.is_flat`, checked from ``min_rounds`` on; at most
``max_rounds``; ``converged`` records which); then every client's test accuracy:

* ``fedlease``: B-matrix clustering (M by silhouette, M_max = 8), adaptive top-M router;
* ``fedlease_oracle``: the true tasks as clusters (separates the clustering from the rest);
* ``fedit`` (one shared LoRA), ``local`` (no communication), ``ifca`` (K = the true number
  of tasks, an oracle K);
* ``fedlease_top1``, ``fedlease_top2``, ``fedlease_topmax``: FedLEASE's clustering and
  experts with a fixed top-k router (k = 1, 2, M_max; renormalised weights) instead of the
  adaptive top-M (:class:`sci_moe.federated.fedlease.ModelSpec` ``top_k``).

Measured per seed: mean client test accuracy of every method, ARI of FedLEASE's and
IFCA's clusters vs the true tasks, the chosen M, the warm-up diagnostics (ARI and
distances within and between tasks of the B matrices, of each projection's B and of the
heads), experts used per token, rounds to flat, bytes down and up per round.

Verdicts (:func:`verdicts`), over the seeds whose every method is done (paired t-test,
alpha 0.05, :func:`_common.decide_verdict`):

* clustering: the per-seed ARI of FedLEASE's clusters against 0.5 (one-sample t-test):
  reproduced when above with p < 0.05, contradicted when below, else not decided; the why
  says in how many seeds the silhouette picked the true number of tasks;
* FedLEASE beats FedIT, local-only, IFCA, and the strongest of the three (mean client test
  accuracy);
* the true-cluster oracle beats the strongest baseline, and beats FedLEASE (what the
  clustering costs);
* adaptive top-M beats fixed top-k for k = 1, 2 and M_max.

``converged`` (and so ``decisive``) needs every method of the comparison flat in every
seed.

Written in pieces (``--max-hours``, ``--resume``): one unit is one (seed, method) or a
seed's warm-up sweep (:data:`_fedlease.SWEEP`: the clustering diagnostics after the
warm-up only, label skew alpha 1 and 100 x warm-up 1, 2, 5 epochs with Adam, and 2 epochs
with SGD); the JSON holds every
finished unit under ``runs`` and is rewritten after each (the seed's hidden states are
cached under ``--cache``). Measured on the 2-core CPU beside other jobs (1 thread, seeds 0
and 1, 20 clients with 9-191 training and 20-115 test examples), with the flat check from
round 6: hidden states 38-47 s (8-13 s once cached), warm-up sweep 65 s, fedlease 35 s (6
rounds), fedlease_oracle 35 s (9), fedit 34 s (6), local 24 s (6), ifca 95 s (6; it scores
every cluster model on every client each round), fedlease_top1 62 s (10),
fedlease_topmax 38 s (6), i.e. 3.5-5.5 s a round (ifca 14 s). The run checks from round 10
(``min_rounds``; a tail of two rounds after six was within the validation noise of about
1 %): about 10 min a seed, 10 seeds about 1.7 h (more if methods need up to the 30
rounds): two pieces of ``--max-hours 1``.

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fedlease/full.py \\
        --threads 1 --max-hours 1 --resume --plots docs/results/img \\
        --json benchmarks/fedlease/results/fedlease_full.json

``--alpha 100`` (nearly no label skew; its own ``--json``) repeats the run where the
warm-up sweep says the B matrices do carry the tasks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common.py

import numpy as np
from _common import (
    OtherLoad,
    Row,
    base_parser,
    decide_verdict,
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
from _fedlease import (
    BASELINES,
    FIXED,
    FLAT,
    METHODS,
    SWEEP,
    UNITS,
    build_seed,
    make_rows,
    plot_curves,
    run_method,
    settings,
    unit_key,
    warmup_sweep,
)
from scipy import stats

BENCHMARK = "fedlease_full"
ARI_TARGET = 0.5


def _done_seeds(doc: dict) -> list[int]:
    cases = {r["case"] for r in doc["rows"]}
    return [s for s in doc["machine"]["seeds"] if f"fedlease seed {s}" in cases]


def _converged(doc: dict, methods) -> bool:
    return all(row_value(doc, m, "converged fraction") == 1.0 for m in methods)


def clustering_verdict(ari: list[float], chosen: list[float], k_true: int, converged: bool):
    """The B-matrix clustering recovers the tasks: the per-seed ARI against
    :data:`ARI_TARGET` by a one-sample t-test (reproduced above it with p < 0.05,
    contradicted below it, not decided otherwise)."""
    a = np.asarray(ari, dtype=float)
    if np.ptp(a) > 0:
        p = float(stats.ttest_1samp(a, ARI_TARGET).pvalue)
    else:
        p = 0.0 if a[0] != ARI_TARGET else 1.0
    if p >= 0.05:
        verdict = "not decided"
    else:
        verdict = "reproduced" if a.mean() > ARI_TARGET else "contradicted"
    hits = sum(int(c) == k_true for c in chosen)
    why = (
        f"mean ARI vs the true tasks {a.mean():.3g} over {len(a)} seeds (target "
        f"{ARI_TARGET}, one-sample t-test p = {p:.2g}); the silhouette picked the true "
        f"{k_true} tasks in {hits} of {len(a)} seeds (chosen M {[int(c) for c in chosen]})"
    )
    return verdict_entry(
        "B-matrix clustering recovers the clients' tasks (and the silhouette their number)",
        verdict=verdict,
        why=why,
        metric="ARI vs true tasks",
        ours=float(a.mean()),
        baseline="target ARI",
        baseline_value=ARI_TARGET,
        seeds=len(a),
        p_value=p,
        converged=converged,
        decisive=converged and verdict != "not decided" and p < 0.05,
    )


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim by the rules of the module docstring; none before two seeds
    are complete."""
    seeds = _done_seeds(doc)
    if len(seeds) < 2:
        return []

    def per_seed(m, metric="mean client accuracy"):
        return [row_value(doc, f"{m} seed {s}", metric) for s in seeds]

    k_true = int(row_value(doc, "run", "true tasks"))
    out = [
        clustering_verdict(
            per_seed("fedlease", "ARI vs true tasks"),
            per_seed("fedlease", "chosen M"),
            k_true,
            _converged(doc, ["fedlease"]),
        )
    ]
    strongest = max(BASELINES, key=lambda m: row_value(doc, m, "mean client accuracy"))
    note = f"strongest baseline of the run: {strongest}"
    pairs = [
        ("FedLEASE beats FedIT (one shared LoRA)", "fedlease", "fedit"),
        ("FedLEASE beats local-only LoRA", "fedlease", "local"),
        ("FedLEASE beats IFCA (given the true number of clusters)", "fedlease", "ifca"),
        ("FedLEASE beats the strongest baseline", "fedlease", strongest),
        (
            "FedLEASE with the true tasks as clusters (ablation) beats the strongest baseline",
            "fedlease_oracle",
            strongest,
        ),
        (
            "the true-task clusters beat FedLEASE's B-matrix clusters (what the clustering costs)",
            "fedlease_oracle",
            "fedlease",
        ),
    ]
    for k, m in zip(("1", "2", "M_max"), FIXED, strict=True):
        pairs.append((f"adaptive top-M routing beats fixed top-{k}", "fedlease", m))
    for claim, ours, base in pairs:
        out.append(
            decide_verdict(
                claim,
                metric="mean client accuracy",
                ours=per_seed(ours),
                baseline=base,
                baseline_values=per_seed(base),
                higher_is_better=True,
                converged=_converged(doc, [ours, base]),
                note=note,
            )
        )
    return out


def main(argv=None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    piece_arguments(p, unit="(seed, method) unit")
    p.add_argument("--seeds", type=int, default=10, help="paired seeds (default 10)")
    p.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "sci_moe" / "fedlease",
        help="hidden-state cache (default ~/.cache/sci_moe/fedlease)",
    )
    p.add_argument("--plots", type=Path, default=None, help="write the learning curves here")
    p.add_argument("--progress", action="store_true", help="print every round")
    p.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="Dirichlet label skew instead of the setting's 1.0 (e.g. 100: nearly "
        "none; a separate --json)",
    )
    args = p.parse_args(argv)
    if verdicts_only(args) is not None:
        return 0
    setup(args)
    s = settings(args.quick)
    if args.alpha is not None:
        if not args.alpha > 0:
            raise SystemExit(f"--alpha must be > 0, got {args.alpha}")
        s["alpha"] = args.alpha
    seeds = list(range(args.seed, args.seed + args.seeds))
    machine = machine_info(
        seed=args.seed,
        seeds=seeds,
        quick=args.quick,
        settings=s,
        methods=list(METHODS),
        ari_target=ARI_TARGET,
        sweep=[list(c) for c in SWEEP],
        flat_rule="mean client validation accuracy < 1 % better over the "
        f"last 20 % of the rounds (sci_moe.train.is_flat {FLAT})",
    )
    runs: dict = {}
    if (old := previous_run(args)) is not None:
        if old["machine"]["settings"] != s:
            raise SystemExit(f"--resume: {args.json} was run with other settings")
        runs = old.get("runs", {})
        machine["pieces"] = list(old["machine"].get("pieces", []))
    machine.setdefault("pieces", []).append({"units": 0, "load": None})
    other, t0, deadline = OtherLoad(), time.perf_counter(), piece_deadline(args)

    def write() -> dict:
        rows = make_rows(runs, seeds, Row)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [vars(r) for r in rows]}
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)]
        doc["complete"] = all(unit_key(sd, m) in runs for sd in seeds for m in UNITS)
        doc["runs"] = runs
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    for sd in seeds:
        todo = [m for m in UNITS if unit_key(sd, m) not in runs]
        if not todo or time.perf_counter() > deadline:
            continue
        fs = build_seed(sd, s, args.cache)
        for m in todo:
            if time.perf_counter() > deadline:
                break
            if m == "warmup_sweep":
                rec = warmup_sweep(sd, s, args.cache)
                runs[unit_key(sd, m)] = rec
                piece = machine["pieces"][-1]
                piece.update(units=piece["units"] + 1, load=other.report())
                b = {k: round(v["B"]["ari"], 2) for k, v in rec["sweep"].items()}
                print(f"seed {sd} warm-up sweep: B-matrix ARI {b}, {rec['seconds']:.0f} s")
                write()
                continue
            rec = run_method(m, sd, fs, s, args.progress)
            runs[unit_key(sd, m)] = rec
            piece = machine["pieces"][-1]
            piece.update(units=piece["units"] + 1, load=other.report())
            extra = f"; ARI {rec['ari']:.2f}, M {rec.get('M')}" if "ari" in rec else ""
            print(
                f"seed {sd} {m}: test {np.mean(rec['accuracy']):.4f}, {rec['rounds']} rounds, "
                f"flat {rec['converged']}, {rec['seconds']:.0f} s{extra}",
                flush=True,
            )
            write()
    doc = write()
    table = [[r["case"], r["metric"], r["value"]] for r in doc["rows"] if "seed" not in r["case"]]
    print_table(["case", "metric", "value"], table, BENCHMARK)
    for v in doc["verdicts"]:
        print(
            f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  p={v['p_value']:.2g}  {v['claim']}"
        )
    if args.plots is not None and runs:
        tag = "_quick" if args.quick else ""
        plot_curves(runs, args.plots / f"fedlease_full{tag}_curves.png")
    print(f"piece {time.perf_counter() - t0:.0f} s; complete: {doc['complete']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
