"""SPiCE's parts ablated one at a time, against full SPiCE and the strongest ensemble (issue 47).

SPiCE as :mod:`sci_moe.molecules.spice` builds it is a PaiNN backbone with, per layer, a
geometric MoE (8 experts, top-2, routed on invariant scalars and on the Gram matrix of
the vectors, noisy gating, load-balance and z-loss), optionally the hierarchical
ensemble encoder (mean over conformers, GINE on the bonds, cross-conformer attention:
``cross_conformer``), a uniform mean over conformers as the ensemble readout, and
optionally dense-to-sparse upcycling. The variants (:data:`VARIANTS`), each trained on
the same 1,000-ligand set, 30 targets and 3 molecule-level splits as
``results/spice_ligands_converged.json`` and with its chosen configurations (``spice``:
width 32, 8 experts, top-2, no cross-conformer block, the tuned optimum):

* ``spice`` (as tuned), ``spice_cross`` (+ the hierarchical ensemble encoder, the
  paper's full architecture), ``spice_cross_no_attention`` (the encoder without its
  cross-conformer attention, ``attention=False``: the conformer mean and GINE stay, and
  each conformer-atom gets its own atom's topology features instead),
  ``one_expert`` / ``one_expert_cross`` (the geometric MoE
  replaced by one dense expert of the same form, without / with the encoder),
  ``invariant`` (the equivariant features removed: the blocks see distances only and
  the vectors stay zero, same parameters), ``no_aux_loss`` (load-balance and z-loss
  weights 0), ``no_router_noise`` (no router logit noise in training),
  ``boltzmann_readout`` (the uniform conformer mean replaced by
  the Boltzmann weights) and ``upcycled`` (dense for the first quarter of the epochs,
  then every expert copies the dense one);
* the baselines ``boltzmann_ensemble`` (the strongest ensemble of the converged run) and
  ``single_conformer`` (for "where ensembles help").

Every run uses the shared trainer (:func:`sci_moe.molecules.spice.fit`, AdamW 1e-3,
cosine to 1 %, 2 warm-up epochs, batch 8, best-validation weights) on an epoch ladder
(``--epochs``, default 72 then 144): a run is *flat* when its best validation score of the
last 20 % of the epochs is less than 1 % below the best before them
(``_spice.flat``, :func:`sci_moe.train.is_flat`; five epochs at least), and a run that is
not is trained afresh at the next rung (the 36-epoch runs of
``results/spice_ligands_budget36.json`` still improved 2-3 % over their last 9 epochs).
Statistics as in ``run.py``: per target the per-molecule absolute test errors of two
models on the same molecules, pooled over the splits, a two-sided sign-flip test, Holm
over the 30 targets; the all-target score (mean over targets of test MAE / target std)
with a pooled paired test. Each part (:data:`PARTS`) gets a verdict on "this part helps
SPiCE" (:func:`claim_verdicts`), and every SPiCE variant is compared with the ensemble
baseline, on all targets and on the targets where that ensemble beats the single
conformer: which part costs.

Cost on one thread, the full set: 36 units (12 models x 3 splits) of 72 epochs, plus the
144-epoch reruns of the runs that are not flat, estimated at 6.5-12 h (the 6-11 h
estimated for the 33 units before ``spice_cross_no_attention``, scaled by 36/33) before
the faster training step of :mod:`sci_moe.molecules.spice` (gathers by ``index_select``,
the PaiNN vector messages one Cartesian component at a time, dense-mode MoE layers
without the dispatch), which made a training step 1.3-1.5x and a validation pass 1.2-1.5x faster
(old/new in one process, interleaved rounds, 48 RDKit ligands of the set's sizes, width
32; load ~2.6 on 2 CPUs), so about 5-9 h now.

A unit is one (variant, split) training; the JSON holds every finished unit under
``runs`` and is rewritten after each, so ``--max-hours`` / ``--resume`` continue it; a
unit whose expected time (its variant's seconds per epoch so far) would end past
``--max-hours`` is left for the next piece (except a piece's first unit, which always
starts), so a piece stays within ``--max-hours`` plus the summary (about 2 minutes)::

    nice -n 10 env OMP_NUM_THREADS=1 python benchmarks/spice/ablation.py --threads 1 \\
        --data data/ligand_set_full --json benchmarks/spice/results/spice_ablation.json \\
        --plots docs/results/img --max-hours 0.6 --resume
    python benchmarks/spice/ablation.py --quick --data DIR --json /tmp/spice_ablation.json

``--device cuda`` trains every unit on a GPU (``TrainConfig.device``; the default ``cpu``
is the reference of the stored results). The device is recorded in the JSON's ``machine``
block for information only: it is not one of the settings ``--resume`` compares, so a run
may continue on another device (its units then differ in rounding).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import json

import numpy as np
from _common import (
    OtherLoad,
    Row,
    base_parser,
    check_resume_settings,
    holm,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    refuse,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _spice import (
    base_model_options,
    flat,
    load_set,
    plot_curves,
    sign_flip_test,
    train_record,
    val_change,
    verdict,
)

HERE = Path(__file__).resolve().parent
CONVERGED = HERE / "results" / "spice_ligands_converged.json"
ENSEMBLE, SINGLE = "boltzmann_ensemble", "single_conformer"
# name -> (build_model name, options over the chosen SPiCE configuration, description)
VARIANTS = {
    "spice": ("spice", {}, "SPiCE as tuned (geometric MoE, no cross-conformer block)"),
    "spice_cross": (
        "spice",
        {"cross_conformer": True},
        "+ hierarchical ensemble encoder (conformer mean, GINE, cross-conformer attention)",
    ),
    "spice_cross_no_attention": (
        "spice",
        {"cross_conformer": True, "attention": False},
        "hierarchical ensemble encoder without the cross-conformer attention "
        "(conformer mean and GINE kept)",
    ),
    "one_expert": ("spice_dense", {}, "geometric MoE replaced by one dense expert"),
    "one_expert_cross": (
        "spice_dense",
        {"cross_conformer": True},
        "one dense expert, with the hierarchical ensemble encoder",
    ),
    "invariant": (
        "spice",
        {"directions": False},
        "equivariant features removed: the blocks see distances only, vectors stay zero",
    ),
    "no_aux_loss": (
        "spice",
        {"load_balance_coef": 0.0, "z_loss_coef": 0.0},
        "MoE load-balance and z-loss removed",
    ),
    "no_router_noise": ("spice", {"noise_std": 0.0}, "no router noise in training"),
    "boltzmann_readout": (
        "spice",
        {"readout": "boltzmann"},
        "uniform conformer mean replaced by Boltzmann weights",
    ),
    "upcycled": (
        "spice",
        {"upcycle": True},
        "dense for the first quarter of the epochs, then upcycled to the experts",
    ),
}
# part -> (variant with it, variant without it)
PARTS = {
    "the geometric MoE (vs one dense expert)": ("spice", "one_expert"),
    "the geometric MoE inside the hierarchical encoder (vs one dense expert)": (
        "spice_cross",
        "one_expert_cross",
    ),
    "the hierarchical ensemble encoder with cross-conformer attention": ("spice_cross", "spice"),
    "the cross-conformer attention (vs the hierarchical encoder without it)": (
        "spice_cross",
        "spice_cross_no_attention",
    ),
    "the equivariant (bond-direction) features (vs distances only)": ("spice", "invariant"),
    "the MoE auxiliary loss (load balance + z-loss)": ("spice", "no_aux_loss"),
    "the router noise": ("spice", "no_router_noise"),
    "the uniform conformer readout (vs Boltzmann weights)": ("spice", "boltzmann_readout"),
    "dense-to-sparse upcycling": ("upcycled", "spice"),
}
ALPHA = 0.05


def parse_args(argv=None):
    p = base_parser(__doc__.splitlines()[0], verdicts=claim_verdicts, device=True)
    p.add_argument("--data", type=Path, default=Path("data/ligand_set_full"))
    p.add_argument("--chosen-from", type=Path, default=CONVERGED, help="configurations")
    p.add_argument("--seeds", type=int, default=3, help="splits (default 3)")
    p.add_argument(
        "--epochs",
        default=None,
        help="comma-separated epoch ladder: a run not flat at one rung is trained afresh at "
        "the next (default 72,144; quick 2,3)",
    )
    p.add_argument("--variants", default=None, help="comma-separated (default: all)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--plots", type=Path, default=None, help="folder for the learning curves")
    piece_arguments(p, unit="training run")
    return p.parse_args(argv)


def plan(variants, seeds: int) -> list[tuple[str, int]]:
    """Units in run order: the baselines and ``spice`` first, then each variant's splits
    (a piece ends with whole comparisons where it can)."""
    first = [v for v in (ENSEMBLE, SINGLE, "spice") if v in variants]
    rest = [v for v in variants if v not in first]
    return [(v, s) for v in first + rest for s in range(seeds)]


def next_rung(record: dict | None, rungs: list[int]) -> int | None:
    """The epochs to train a unit at next: the first rung without a record; after a run
    that is not flat (:func:`_spice.flat`), the next longer rung; None when the run is flat
    or already at the last rung (the unit is done)."""
    if record is None:
        return rungs[0]
    if flat(record["history"]["val_score"]):
        return None
    longer = [e for e in rungs if e > record["epochs_run"]]
    return longer[0] if longer else None


def unit_options(variant: str, chosen: dict, base: dict, epochs: int) -> tuple[str, dict, dict]:
    """``(build_model name, model options, TrainConfig overrides)`` of a variant."""
    if variant in (ENSEMBLE, SINGLE):
        return variant, {**base, **chosen[variant]}, {}
    if variant not in VARIANTS:
        raise ValueError(
            f"unknown variant {variant!r}; choose from {[*VARIANTS, ENSEMBLE, SINGLE]}"
        )
    name, extra, _ = VARIANTS[variant]
    opts = {**base, **chosen["spice"], **extra}
    train = {"upcycle_epochs": max(1, epochs // 4)} if extra.get("upcycle") else {}
    return name, opts, train


def compare(a: list[dict], b: list[dict], y: np.ndarray, scale: np.ndarray, targets) -> dict:
    """Paired comparison of two models' runs (same splits, same order).

    Parameters
    ----------
    a, b : list of dict
        Run records (:func:`_spice.train_record`) of the two models, one per split.
    y : ndarray, shape (M, T)
        Labels of every molecule.
    scale : ndarray, shape (T,)
        Std of every target over the set (the all-target score's unit).
    targets : sequence of str

    Returns
    -------
    dict
        ``score_a``/``score_b`` (all-target test score, mean over splits), ``mean_diff``
        and ``p`` of the pooled per-molecule score difference ``a - b`` (lower: ``a``
        better), ``per_target`` ``{t: {mean_diff, p, p_holm, verdict}}`` (Holm over the
        targets) and ``counts`` of ``better``/``worse``/``noise`` for ``a``.
    """
    if [(r["seed"], r["test_index"]) for r in a] != [(r["seed"], r["test_index"]) for r in b]:
        raise ValueError("compare needs the same splits (test molecules) in the same order")
    err = {}
    for key, runs in (("a", a), ("b", b)):
        err[key] = np.concatenate(
            [np.abs(np.asarray(r["test_pred"]) - y[r["test_index"]]) for r in runs]
        )
    d = err["a"] - err["b"]  # (n, T), paired per molecule and split
    per = {}
    for k, t in enumerate(targets):
        dk = d[np.isfinite(d[:, k]), k]
        per[t] = {"mean_diff": float(dk.mean()), "p": sign_flip_test(dk)}
    for t, ph in zip(targets, holm([per[t]["p"] for t in targets]), strict=True):
        per[t]["p_holm"] = ph
        per[t]["verdict"] = verdict(per[t], ALPHA)
    pooled = np.nanmean(d / scale, axis=1)
    pooled = pooled[np.isfinite(pooled)]

    def score(runs):
        return float(np.mean([np.mean(np.asarray(r["test_mae"]) / scale) for r in runs]))

    return {
        "score_a": score(a),
        "score_b": score(b),
        "mean_diff": float(pooled.mean()),
        "p": sign_flip_test(pooled),
        "n": int(pooled.size),
        "per_target": per,
        "counts": {
            k: sum(v["verdict"] == k for v in per.values()) for k in ("better", "worse", "noise")
        },
    }


def rule(c: dict) -> str:
    """``run.py``'s claim rule on a comparison of ``a`` (claimed better) with ``b``."""
    if c["p"] >= ALPHA:
        out = "not decided"
    elif c["mean_diff"] < 0:
        out = "reproduced" if c["counts"]["worse"] == 0 else "not decided"
    else:
        out = "contradicted"
    if c["counts"]["worse"] > c["counts"]["better"]:
        out = "contradicted"
    return out


def summarize(runs: dict, ms, targets, seeds: int) -> tuple[list[Row], dict]:
    """Rows and details of every comparison whose models have all ``seeds`` splits."""
    done = {v: [rs[str(s)] for s in range(seeds)] for v, rs in runs.items() if len(rs) >= seeds}
    y = np.asarray(ms.targets, dtype=float)
    scale = np.nanstd(y, axis=0, ddof=1)
    rows, det = [], {"parts": {}, "vs_ensemble": {}, "flat": {}, "ensemble_helps": None}
    for v, rs in done.items():
        det["flat"][v] = [flat(r["history"]["val_score"]) for r in rs]
        score = [float(np.mean(np.asarray(r["test_mae"]) / scale)) for r in rs]
        wall = float(np.mean([r["wall_s"] for r in rs]))
        rows.append(
            Row(v, "test score: mean over targets of MAE / target std", float(np.mean(score)), "")
        )
        rows.append(
            Row(v, "runs with a flat validation curve", float(sum(det["flat"][v])), "count")
        )
        rows.append(Row(v, "training wall time (mean over splits)", wall, "s"))
        ep = float(np.mean([r["epochs_run"] for r in rs]))
        rows.append(Row(v, "epochs of the kept run (mean over splits)", ep, "epoch"))
    helps = None
    if ENSEMBLE in done and SINGLE in done:
        c = compare(done[ENSEMBLE], done[SINGLE], y, scale, targets)
        det["ensemble_helps"] = c
        helps = [t for t, v in c["per_target"].items() if v["verdict"] == "better"]
    for label, (a, b) in [(f"{v} vs {ENSEMBLE}", (v, ENSEMBLE)) for v in VARIANTS] + [
        (part, ab) for part, ab in PARTS.items()
    ]:
        if a not in done or b not in done:
            continue
        c = compare(done[a], done[b], y, scale, targets)
        c.update(a=a, b=b, converged=bool(all(det["flat"][a]) and all(det["flat"][b])))
        if label in PARTS:
            det["parts"][label] = c
        else:
            if helps is not None:
                c["where_ensembles_help"] = {
                    k: sum(c["per_target"][t]["verdict"] == k for t in helps)
                    for k in ("better", "worse", "noise")
                }
            det["vs_ensemble"][a] = c
        rows.append(Row(label, f"test score {a}", c["score_a"], "", b, c["score_b"] / c["score_a"]))
        rows.append(Row(label, "mean paired score difference (a - b)", c["mean_diff"], ""))
        rows.append(Row(label, "pooled sign-flip p-value", c["p"], ""))
        for k, n in c["counts"].items():
            rows.append(Row(label, f"targets {k} after Holm (alpha {ALPHA})", float(n), "count"))
    return rows, det


def claim_verdicts(doc: dict) -> list[dict]:
    """The verdicts: SPiCE (as tuned, and with the hierarchical encoder) against the
    ensemble baseline, then one per part, "<part>: SPiCE is better with it" (contradicted: the part
    costs), each by :func:`rule` on the pooled test and the per-target Holm counts;
    decisive only when every run of both models is flat and the pooled test resolves the
    difference (p < 0.05)."""
    out = []
    seeds = int(doc["machine"].get("seeds", 1))
    det = doc["details"]
    claims = [
        (f"SPiCE ({v}) outperforms the strongest conformer ensemble", det["vs_ensemble"][v])
        for v in ("spice", "spice_cross")
        if v in det.get("vs_ensemble", {})
    ]
    claims += [(f"{part}: SPiCE is better with it", c) for part, c in det.get("parts", {}).items()]
    for claim, c in claims:
        v = rule(c)
        n = c["counts"]
        out.append(
            verdict_entry(
                claim,
                verdict=v,
                why=(
                    f"all-target score {c['score_a']:.4g} ({c['a']}) vs {c['score_b']:.4g} "
                    f"({c['b']}), lower is better; pooled paired sign-flip p = {c['p']:.2g}; "
                    f"per target after Holm: better on {n['better']}, worse on {n['worse']}, "
                    f"noise on {n['noise']}; "
                    + (
                        "where ensembles help (after Holm): better on {better}, worse on "
                        "{worse}, noise on {noise}; ".format(**c["where_ensembles_help"])
                        if "where_ensembles_help" in c
                        else ""
                    )
                    + ("all runs flat" if c["converged"] else "not every run flat")
                ),
                metric="all-target test score (MAE / target std)",
                ours=c["score_a"],
                baseline=c["b"],
                baseline_value=c["score_b"],
                seeds=seeds,
                p_value=c["p"],
                converged=c["converged"],
                decisive=v != "not decided" and c["converged"] and c["p"] < ALPHA,
            )
        )
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    if verdicts_only(args) is not None:
        return
    setup(args)

    load, deadline = OtherLoad(), piece_deadline(args)
    ms = load_set(args.data)
    targets = list(ms.target_names)
    graphs = ms.graphs(heavy_only=True)
    source = json.loads(args.chosen_from.read_text())
    chosen = source["details"]["chosen"]
    same_data = source["machine"].get("data_sha256") == ms.content_sha256()
    if not same_data:  # recorded in the JSON; the comparisons stay paired within this run
        print(f"warning: {args.data} is not the data set of {args.chosen_from} (content hash)")
    rungs = sorted(int(e) for e in (args.epochs or ("2,3" if args.quick else "72,144")).split(","))
    if rungs[0] < 2:
        raise SystemExit("--epochs: every rung needs >= 2 epochs (the last-quarter change)")
    variants = args.variants.split(",") if args.variants else [ENSEMBLE, SINGLE, *VARIANTS]
    base = base_model_options(len(targets))
    if args.quick:
        chosen = {k: {**v, "hidden": 8} for k, v in chosen.items()}
    tcfg = dict(
        batch_size=args.batch_size,
        lr=1e-3,
        weight_decay=1e-3,
        schedule="cosine",
        warmup_epochs=1 if args.quick else 2,
        patience=0,
        progress=False,
    )
    setting = {
        "data_sha256": ms.content_sha256(),
        "epochs": rungs,
        "seeds": args.seeds,
        "chosen": chosen,
        "model_options": base,
        "train_options": tcfg,
    }
    prev = previous_run(args)
    runs: dict[str, dict[str, dict]] = {}
    if prev is not None:
        try:
            check_resume_settings(
                {k: prev["machine"].get(k) for k in setting},
                setting,
                args.json,
                fix="resume with the same settings, or drop --resume",
            )
        except ValueError as err:
            refuse(str(err))
        runs = prev["runs"]
    units = plan(variants, args.seeds)
    print(f"{len(ms)} molecules, {len(targets)} targets; {len(units)} units, epoch ladder {rungs}")

    summary: dict = {"rows": [], "details": {}, "verdicts": []}
    if prev is not None:
        summary = {k: prev.get(k, summary[k]) for k in summary}

    def write(complete: bool, summarized: bool) -> None:
        """Rewrite the JSON; the (slow) tests only when ``summarized``, else the last ones."""
        if summarized:
            rows, det = summarize(runs, ms, targets, args.seeds)
            summary.update(rows=[r.__dict__ for r in rows], details=det)
        machine = machine_info(
            seed=args.seed,
            quick=args.quick,
            data=str(args.data),
            contention=load.report(),
            chosen_from=str(args.chosen_from),
            variants=variants,
            data_as_chosen_from=same_data,
            device=args.device,
            **setting,
        )
        doc = {"benchmark": "spice_ablation", "machine": machine, "complete": complete}
        doc.update(rows=summary["rows"], details=summary["details"])
        doc["verdicts"] = claim_verdicts(doc) if summarized else summary["verdicts"]
        summary["verdicts"] = doc["verdicts"]
        doc["runs"] = runs
        if args.json is not None:
            write_json_doc(args.json, doc, indent=None)

    def rate(v: str) -> float:
        """Seconds per epoch of a variant so far (else the slowest model's; 0 at first)."""
        per = {u: [r["wall_s"] / r["epochs_run"] for r in rs.values()] for u, rs in runs.items()}
        if per.get(v):
            return float(np.mean(per[v]))
        return max((max(x) for x in per.values() if x), default=0.0)

    skipped, trained = set(), 0  # a piece's first unit always starts (progress is sure)
    while True:
        todo = [
            (v, s, e)
            for v, s in units
            if (v, s) not in skipped
            and (e := next_rung(runs.get(v, {}).get(str(s)), rungs)) is not None
        ]
        if not todo:
            break
        v, s, e = todo[0]
        if time.perf_counter() > deadline or (
            trained and time.perf_counter() + rate(v) * e > deadline
        ):
            print(f"{v} split {s} ({e} epochs) would end past --max-hours: left for --resume")
            skipped.add((v, s))
            continue
        name, opts, extra = unit_options(v, chosen, base, e)
        # the device is not a setting: a resumed run may continue on another one
        train = {**tcfg, "epochs": e, **extra, "device": args.device}
        r = train_record(ms, graphs, targets, name, opts, train, s)
        old = runs.get(v, {}).get(str(s))
        r["ladder"] = [
            *(old or {}).get("ladder", []),
            {
                "epochs": e,
                "val_change": val_change(r["history"]["val_score"]),
                "wall_s": r["wall_s"],
            },
        ]
        runs.setdefault(v, {})[str(s)] = r
        trained += 1
        print(
            f"{v:18s} split {s}, {e} epochs: val score {r['val_score']:.4f}, "
            f"last-quarter change {r['ladder'][-1]['val_change']:+.3f}, {r['wall_s']:.0f} s",
            flush=True,
        )
        write(False, False)
    done = all(next_rung(runs.get(v, {}).get(str(s)), rungs) is None for v, s in units)
    write(done, True)
    if args.plots is not None and runs:  # after the JSON: a plotting error loses no result
        name = args.json.stem if args.json is not None else "spice_ablation"
        plot_curves(args.plots / f"{name}_curves.png", runs, dashed=(ENSEMBLE, SINGLE))
    for e in summary["verdicts"]:
        print(f"{e['verdict']:13s} {e['claim']}: {e['why']}")


if __name__ == "__main__":
    main()
