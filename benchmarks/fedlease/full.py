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
(``warmup_optimizer`` at ``warmup_lr``: Adam at 3e-3 as in the rounds, or with
``--warmup-optimizer sgd`` SGD with momentum 0.9 at 3e-2, the warm-up sweep's setting, for
every method) and then one local epoch per round with Adam, each trained round by round
until the mean client validation accuracy is flat; then every client's test accuracy.

The flat rule (:func:`_fedlease.run_flat`; the JSON's ``machine.flat_rule`` states it in
words): at round ``r`` (counted after the warm-up) :func:`sci_moe.train.is_flat`
(:data:`_fedlease.FLAT`: less than 1 % better over the last 20 % of the rounds so far)
must hold at each of the last ``patience`` rounds, all at least ``min_rounds``; so no run
stops before round ``min_rounds + patience - 1`` (30 and 3: round 32). At most
``max_rounds`` (60); ``converged`` records whether the run stopped flat. (The first run,
from round 10 with a single check, called most runs flat at round 10 while FedIT was still
rising: a 20 % tail of 10 rounds is 2 rounds, within the validation noise.)

The trivial baseline (:data:`_fedlease.TRIVIAL`, :func:`_fedlease.majority_class`): every
client predicts its most frequent training label; its mean client test accuracy is a row
per seed like a method's.

* ``fedlease``: B-matrix clustering (M by silhouette, M_max = 8), adaptive top-M router;
* ``fedlease_oracle``: the true tasks as clusters (separates the clustering from the rest);
* ``fedit`` (one shared LoRA), ``local`` (no communication: its bytes per round are 0;
  the simulator's traffic, which only stands in for the client's own memory, is kept as
  ``simulator_bytes_down`` / ``_up`` in its runs), ``ifca`` (K = the true number of tasks,
  an oracle K);
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
* adaptive top-M beats fixed top-k for k = 1, 2 and M_max. Fixed top-k takes
  ``min(k, M)`` experts, so where the chosen M is at most 2, top-M_max is the same model as
  top-2: that comparison uses only the seeds with M > 2, and is "not decided" (why: in how
  many seeds the two are identical) when fewer than two such seeds are left;
* last (from runs with the trivial baseline): every learned method beats the per-client
  majority class (:func:`trivial_check`: paired t-test of each method against it,
  beaten when higher with p < 0.05); reproduced when all do, contradicted when one is below
  it with p < 0.05, else not decided. The JSON's ``beats_trivial`` holds the test per
  method; a comparison above whose method or baseline does not beat the majority class
  says so in its why and is not decisive (a model no better than the trivial predictor is
  not a result).

``converged`` (and so ``decisive``) needs every method of the comparison flat in every
seed. ``--verdicts-only`` reads older JSONs too (no trivial rows: no trivial check; the M
of a seed from its ``fedlease`` row when ``runs`` lacks it).

Written in pieces (``--max-hours``, ``--resume``): one unit is one (seed, method) or a
seed's warm-up sweep (:data:`_fedlease.SWEEP`: the clustering diagnostics after the
warm-up only, label skew alpha 1 and 100 x warm-up 1, 2, 5 epochs with Adam, and 2 epochs
with SGD); the JSON holds every
finished unit under ``runs`` and is rewritten after each (the seed's hidden states are
cached under ``--cache``). Timing of the first full run (10 seeds, checks from round 10,
2-core CPU beside other jobs, 1 thread): about 2.0-2.4 s a round per method (ifca 4.9 s:
it scores every cluster model on every client each round), warm-up sweep 27 s a seed,
2,700 s of units in all. With the flat rule above every method runs at least 32 rounds: about
11 min a seed, 10 seeds about 1.9 h if every run is flat at round 32, 3.5 h if every run
goes to 60: two to four pieces of ``--max-hours 1`` (the plot is named after ``--json``;
``--resume`` refuses a JSON of other settings, so a run with new settings needs a new one).

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fedlease/full.py \\
        --threads 1 --max-hours 1 --resume --plots docs/results/img \\
        --json benchmarks/fedlease/results/fedlease_full.json

``--alpha 100`` (nearly no label skew; its own ``--json``) repeats the run where the
warm-up sweep says the B matrices do carry the tasks.

``--device cuda`` runs the clients' local rounds and evaluations on a GPU (their
``TrainConfig.device``; the server aggregates and clusters the CPU states they send). The
device is recorded in ``machine.device`` for information only, not in
``machine.settings``: ``--resume`` may continue a run on another device (the stored CPU
results stay the reference).
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
    check_resume_settings,
    decide_verdict,
    machine_info,
    paired_test,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    refuse,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _fedlease import (
    BASELINES,
    FIXED,
    METHODS,
    SWEEP,
    TRIVIAL,
    UNITS,
    build_seed,
    flat_rule,
    majority_class,
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


def _has_rows(doc: dict, case: str) -> bool:
    return any(r["case"] == case for r in doc["rows"])


def trivial_check(doc: dict) -> dict | None:
    """Whether each learned method beats the per-client majority class
    (:data:`_fedlease.TRIVIAL`) on mean client test accuracy over the done seeds: paired
    t-test, beaten when the method is higher with p < 0.05. ``{method: {"beats", "accuracy",
    "majority", "wins", "seeds", "p_value"}}``; None before two seeds or without the trivial
    rows (older runs)."""
    seeds = _done_seeds(doc)
    if len(seeds) < 2 or not _has_rows(doc, f"{TRIVIAL} seed {seeds[0]}"):
        return None
    base = [row_value(doc, f"{TRIVIAL} seed {s}", "mean client accuracy") for s in seeds]
    out = {}
    for m in METHODS:
        ours = [row_value(doc, f"{m} seed {s}", "mean client accuracy") for s in seeds]
        res = paired_test(ours, base)
        out[m] = dict(
            beats=bool(res["mean_diff"] > 0 and res["t"] < 0.05),
            accuracy=float(np.mean(ours)),
            majority=float(np.mean(base)),
            wins=res["wins"],
            seeds=res["n"],
            p_value=res["t"],
        )
    return out


def trivial_verdict(check: dict, converged: bool) -> dict:
    """Every learned method beats the majority class (:func:`trivial_check`): reproduced
    when all do, contradicted when one is below it with p < 0.05, else not decided."""
    failing = [m for m, c in check.items() if not c["beats"]]
    below = [m for m in failing if check[m]["accuracy"] < check[m]["majority"]]
    below = [m for m in below if check[m]["p_value"] < 0.05]
    if not failing:
        verdict, p = "reproduced", max(c["p_value"] for c in check.values())
    elif below:
        verdict, p = "contradicted", min(check[m]["p_value"] for m in below)
    else:
        verdict, p = "not decided", max(check[m]["p_value"] for m in failing)
    weakest = min(check, key=lambda m: check[m]["accuracy"])
    c0 = check[weakest]
    why = (
        f"paired t-test of each method's mean client accuracy against the per-client "
        f"majority class ({c0['majority']:.4g}) over {c0['seeds']} seeds: "
        + "; ".join(
            f"{m} {c['accuracy']:.4g} ({c['wins']} wins, p = {c['p_value']:.2g})"
            for m, c in check.items()
        )
        + (f"; not above the majority class: {', '.join(failing)}" if failing else "; all above it")
    )
    return verdict_entry(
        "every learned method beats the per-client majority-class predictor (sanity check)",
        verdict=verdict,
        why=why,
        metric="mean client accuracy",
        ours=c0["accuracy"],
        baseline=f"{TRIVIAL} (weakest method: {weakest})",
        baseline_value=c0["majority"],
        seeds=c0["seeds"],
        p_value=p,
        converged=converged,
        decisive=converged and verdict != "not decided" and p < 0.05,
    )


def _seed_m(doc: dict, seed: int) -> int:
    """The M of a seed's fixed top-M_max run (its ``runs`` record; older JSONs without it:
    FedLEASE's chosen M, the same clustering of the same warm-up)."""
    rec = doc.get("runs", {}).get(unit_key(seed, "fedlease_topmax"))
    if rec is not None and "M" in rec:
        return int(rec["M"])
    return int(row_value(doc, f"fedlease seed {seed}", "chosen M"))


def topmax_verdict(doc: dict, seeds: list[int], claim: str, note: str) -> dict:
    """Adaptive top-M against fixed top-M_max on the seeds where M > 2 only (elsewhere
    top-M_max is top-2: fixed top-k takes ``min(k, M)`` experts); "not decided" when fewer
    than two such seeds are left."""
    ms = [_seed_m(doc, s) for s in seeds]
    keep = [s for s, m in zip(seeds, ms, strict=True) if m > 2]
    same = len(seeds) - len(keep)
    why_same = (
        f"top-M_max is the same model as top-2 when M <= 2 (fixed top-k takes min(k, M) "
        f"experts): identical in {same} of {len(seeds)} seeds (chosen M {ms})"
    )
    converged = _converged(doc, ["fedlease", "fedlease_topmax"])
    acc = {
        m: [row_value(doc, f"{m} seed {s}", "mean client accuracy") for s in keep or seeds]
        for m in ("fedlease", "fedlease_topmax")
    }
    if len(keep) < 2:
        return verdict_entry(
            claim,
            verdict="not decided",
            why=f"{why_same}; {len(keep)} seed(s) with M > 2 left, too few for a paired "
            f"test; {note}",
            metric="mean client accuracy",
            ours=float(np.mean(acc["fedlease"])),
            baseline="fedlease_topmax",
            baseline_value=float(np.mean(acc["fedlease_topmax"])),
            seeds=len(seeds),
            p_value=None,
            converged=converged,
            decisive=False,
        )
    return decide_verdict(
        claim,
        metric="mean client accuracy",
        ours=acc["fedlease"],
        baseline="fedlease_topmax",
        baseline_values=acc["fedlease_topmax"],
        higher_is_better=True,
        converged=converged,
        note=f"only the {len(keep)} seeds with M > 2 ({why_same}); {note}",
    )


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim by the rules of the module docstring; none before two seeds
    are complete."""
    seeds = _done_seeds(doc)
    if len(seeds) < 2:
        return []

    def per_seed(m, metric="mean client accuracy"):
        return [row_value(doc, f"{m} seed {s}", metric) for s in seeds]

    check = trivial_check(doc)

    def flag(v: dict, methods) -> dict:  # a method not above the majority class: no result
        bad = [m for m in methods if check is not None and not check[m]["beats"]]
        if bad:
            v = dict(
                v,
                why=f"{v['why']}; not above the per-client majority class: {', '.join(bad)} "
                "(so not decisive)",
                decisive=False,
            )
        return v

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
    for k, m in zip(("1", "2"), FIXED[:2], strict=True):
        pairs.append((f"adaptive top-M routing beats fixed top-{k}", "fedlease", m))
    for claim, ours, base in pairs:
        v = decide_verdict(
            claim,
            metric="mean client accuracy",
            ours=per_seed(ours),
            baseline=base,
            baseline_values=per_seed(base),
            higher_is_better=True,
            converged=_converged(doc, [ours, base]),
            note=note,
        )
        out.append(flag(v, [ours, base]))
    claim = "adaptive top-M routing beats fixed top-M_max"
    out.append(flag(topmax_verdict(doc, seeds, claim, note), ["fedlease", "fedlease_topmax"]))
    if check is not None:
        out.append(trivial_verdict(check, _converged(doc, METHODS)))
    return out


def main(argv=None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
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
        "--warmup-optimizer",
        choices=("adam", "sgd"),
        default=None,
        help="optimiser of the warm-up round of every method: adam (3e-3, the setting's) "
        "or sgd (momentum 0.9, 3e-2: B closer to the accumulated gradient, the warm-up "
        "sweep's better clustering); recorded in the settings",
    )
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
    if args.warmup_optimizer == "sgd":
        s.update(warmup_optimizer="sgd", warmup_lr=3e-2)
    seeds = list(range(args.seed, args.seed + args.seeds))
    machine = machine_info(
        seed=args.seed,
        seeds=seeds,
        quick=args.quick,
        settings=s,
        methods=list(METHODS),
        ari_target=ARI_TARGET,
        sweep=[list(c) for c in SWEEP],
        flat_rule=flat_rule(s),
        device=args.device,  # information only: not in the settings --resume compares
    )
    runs: dict = {}
    if (old := previous_run(args)) is not None:
        try:
            check_resume_settings(old["machine"].get("settings"), s, args.json)
        except ValueError as err:
            refuse(str(err))
        runs = old.get("runs", {})
        machine["pieces"] = list(old["machine"].get("pieces", []))
    machine.setdefault("pieces", []).append({"units": 0, "load": None})
    other, t0, deadline = OtherLoad(), time.perf_counter(), piece_deadline(args)

    def write() -> dict:
        rows = make_rows(runs, seeds, Row)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [vars(r) for r in rows]}
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)]
        doc["beats_trivial"] = trivial_check(doc)
        doc["complete"] = all(unit_key(sd, m) in runs for sd in seeds for m in UNITS)
        doc["runs"] = runs
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    for sd in seeds:
        todo = [m for m in UNITS if unit_key(sd, m) not in runs]
        if not todo or time.perf_counter() > deadline:
            continue
        fs = build_seed(sd, s, args.cache, device=args.device)
        for m in todo:
            if time.perf_counter() > deadline:
                break
            if m == TRIVIAL:
                runs[unit_key(sd, m)] = rec = majority_class(fs)
                piece = machine["pieces"][-1]
                piece.update(units=piece["units"] + 1, load=other.report())
                print(f"seed {sd} {m}: test {np.mean(rec['accuracy']):.4f}", flush=True)
                write()
                continue
            if m == "warmup_sweep":
                rec = warmup_sweep(sd, s, args.cache, device=args.device)
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
        p_value = "-" if v["p_value"] is None else f"{v['p_value']:.2g}"
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  p={p_value}  {v['claim']}")
    if args.plots is not None and runs:
        name = f"fedlease_full{'_quick' if args.quick else ''}"
        plot_curves(
            runs, args.plots / f"{name if args.json is None else args.json.stem}_curves.png"
        )
    print(f"piece {time.perf_counter() - t0:.0f} s; complete: {doc['complete']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
