"""SPiCE vs conformer-ensemble baselines on one backbone: tuned on validation, several seeds.

Models (all from :func:`sci_moe.molecules.spice.build_model`, the same PaiNN backbone, depth,
cutoff, optimiser, epochs, batch size and early stopping; see
:data:`sci_moe.molecules.spice.MODELS`): ``spice``, ``spice_dense`` (SPiCE without MoE, an
ablation), the single-conformer models ``single_conformer`` (lowest energy) and
``random_conformer``, the ensemble models ``mean_ensemble``, ``deepsets``,
``attention_ensemble``, ``boltzmann_ensemble``, ``gnn2d_3d`` (2D + 3D), and ``gnn2d``.

Protocol:

1. **tuning** (same budget for every model): on split seed 123 and training seed 0,
   ``--grid-size`` configurations per model (:func:`grid`; default 2: SPiCE at width 32
   with (experts, top-k) = (4, 1) or (8, 2), every other model at width 16 or 32; 4:
   SPiCE's width, (experts, top-k) and cross-conformer block, every other model's width
   and attention heads or atom pooling), chosen on the validation MAE (mean over targets
   of MAE / target std) only; or, with ``--chosen-from``, the configurations another run
   chose (e.g. tuned on the 100-ligand set, whose ligands are the first 100 of the full
   set), then seed 0 is trained afresh;
2. **evaluation**: the chosen configuration of each model on ``--seeds`` molecule-level
   70/10/20 splits (``sklearn.utils.shuffle`` seeds ``123, 8888, 8889``), training seed
   = split index; test MAE at the best validation epoch, mean +- std over seeds;
3. **paired test** SPiCE vs the best baseline per target (the non-SPiCE model with the
   lowest mean *validation* MAE on that target) and SPiCE vs the best ensemble model
   (the same among the ensemble models: the paper's claim): per molecule, the absolute test errors
   of the two models on the same molecules of the same split, pooled over seeds; a
   two-sided sign-flip permutation test of the mean difference (20,000 flips), and the
   same for the best ensemble model vs the best single-conformer model ("does the
   ensemble help");
4. **references**: training mean, least squares on the heavy-atom count, and the oracle
   gap (the exact label of the lowest-energy conformer used as the prediction,
   ``MoleculeSet.lowest_energy_targets``: what an ideal single-conformer model misses);
5. **throughput**: training molecules/s (forward + backward + AdamW step) of every model
   at one common size, on the same training batches, interleaved, median of 3; ratios to
   DeepSets.

Run::

    python benchmarks/spice/run.py --data DIR \\
        --json benchmarks/spice/results/spice_ensembles.json --plots docs/results/img
    python benchmarks/spice/run.py --quick --data DIR --json /tmp/spice_quick.json

With ``--checkpoint FOLDER`` every finished training run is kept as one JSON there (named
by a hash of the data, model, configuration, seed and options): a killed run resumes,
and processes with disjoint ``--models`` can train in parallel into one folder, after
which one run with all models only reads them and writes the summary.

``--device cuda`` trains, evaluates and times every model on a GPU
(``TrainConfig.device``; the default ``cpu`` is the reference of the stored results). The
device is recorded in the JSON's ``machine`` block for information only: it is not part of
a ``--checkpoint`` run's key (a finished run is reused on any device).

``DIR`` is a ``MoleculeSet`` folder (``sci-moe data molecules --out DIR --n 120``; built
with 50 molecules when missing).

This script holds the command line and the run; its parts are helper modules beside it:
``_spice.py`` (shared with ``ablation.py``: data, training, tests), ``_spice_grid.py`` (the
tuning grid), ``_spice_throughput.py`` (training throughput), ``_spice_verdicts.py`` (model
groups, all-target rows, verdicts, ``--resummarize``) and ``_spice_plots.py`` (plots,
``--replot``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _common import (
    OtherLoad,
    Row,
    base_parser,
    holm,
    machine_info,
    print_table,
    setup,
    verdicts_only,
    write_json_doc,
)
from _spice import (
    SPLIT_SEEDS,
    base_model_options,
    load_set,
    run_key,
    sign_flip_test,
    train_record,
    val_change,
)
from _spice_grid import grid
from _spice_plots import plot, replot
from _spice_throughput import throughput
from _spice_verdicts import (
    CLAIM,
    ENSEMBLE,
    ENSEMBLE_HELPS,
    SINGLE,
    SPICE,
    claim_verdicts,
    overall_rows,
    resummarize,
    verdict_rows,
)


def parse_args(argv=None):
    p = base_parser(__doc__.splitlines()[0], verdicts=claim_verdicts, device=True)
    p.add_argument("--data", type=Path, default=Path("data/molecule_set_small"))
    p.add_argument("--seeds", type=int, default=3, help="seeds / splits (default 3)")
    p.add_argument("--epochs", type=int, default=None, help="max epochs (default 30, quick 4)")
    p.add_argument("--models", default=None, help="comma-separated (default: all)")
    p.add_argument("--widths", default=None, help="tuning widths (default 16,32)")
    p.add_argument("--grid-size", type=int, default=2, help="tuning configs per model (2)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--with-h", action="store_true", help="keep hydrogens (default: heavy only)")
    p.add_argument("--plots", type=Path, default=None, help="folder for the PNG plots")
    p.add_argument(
        "--replot",
        type=Path,
        default=None,
        help="only redraw the plots of this JSON (needs --data)",
    )
    p.add_argument(
        "--resummarize",
        type=Path,
        default=None,
        help="only add the all-target rows to this finished JSON (needs --data)",
    )
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="folder of finished training runs (one JSON each): a rerun reuses them, so a "
        "killed run resumes and processes with different --models can share the folder",
    )
    p.add_argument(
        "--chosen-from",
        type=Path,
        default=None,
        help="skip tuning: take each model's configuration from this finished JSON's "
        "'chosen' (e.g. tuned on a smaller set's validation split)",
    )
    p.add_argument(
        "--only-seeds",
        default=None,
        help="with --chosen-from and --checkpoint: only train these comma-separated split "
        "indices of --models into the checkpoint folder and exit (parallel processes)",
    )
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if verdicts_only(args) is not None:
        return
    setup(args)
    if args.replot is not None:
        replot(args)
        return
    if args.resummarize is not None:
        resummarize(args)
        return
    from sci_moe._util import atomic_save_json
    from sci_moe.data.ligands_build import LIGAND_TARGET_UNITS
    from sci_moe.data.molecule_set_store import ELECTRONIC_TARGET_UNITS, TARGET_UNITS
    from sci_moe.molecules.spice import MODEL_NAMES

    load = OtherLoad()
    ms = load_set(args.data)
    targets = list(ms.target_names)
    known_units = {**TARGET_UNITS, **ELECTRONIC_TARGET_UNITS, **LIGAND_TARGET_UNITS}
    units = [known_units.get(t, "") for t in targets]
    graphs = ms.graphs(heavy_only=not args.with_h)
    lowest = ms.lowest_energy_targets()
    models = args.models.split(",") if args.models else list(MODEL_NAMES)
    epochs = args.epochs or (4 if args.quick else 20)
    widths = [int(w) for w in (args.widths or ("8,16" if args.quick else "16,32")).split(",")]
    if args.seeds > len(SPLIT_SEEDS):
        raise SystemExit(f"--seeds at most {len(SPLIT_SEEDS)}")
    base_opts = base_model_options(len(targets))
    tcfg = dict(
        epochs=epochs,
        batch_size=args.batch_size,
        lr=1e-3,
        weight_decay=1e-3,
        schedule="cosine",
        warmup_epochs=1 if args.quick else 2,
        patience=0,
        progress=False,
    )
    n_pts = sum(g.num_atoms * g.num_confs for g in graphs)
    print(
        f"{len(ms)} molecules, {sum(g.num_confs for g in graphs)} conformers, {n_pts} "
        f"conformer-atoms ({'with H' if args.with_h else 'heavy atoms'}); targets {targets}; "
        f"{len(models)} models x {args.grid_size} tuning configs, then x {args.seeds} seeds; "
        f"{epochs} epochs",
        flush=True,
    )

    data_sha = ms.content_sha256()

    def run(name, extra, s):
        key = run_key(data_sha, name, extra, s, base_opts, tcfg, args.with_h)
        if args.checkpoint is not None and (args.checkpoint / f"{key}.json").exists():
            return json.loads((args.checkpoint / f"{key}.json").read_text())
        r = train_run(name, extra, s)
        if args.checkpoint is not None:
            args.checkpoint.mkdir(parents=True, exist_ok=True)
            atomic_save_json(args.checkpoint / f"{key}.json", r, indent=None)
        return r

    def train_run(name, extra, s):
        # the device is not in the run's key: a finished run is reused on any device
        train = {**tcfg, "device": args.device}
        r = train_record(ms, graphs, targets, name, {**base_opts, **extra}, train, s)
        return {"config": extra, **r}

    # 1. tuning on seed 0 (validation only), or the configurations chosen in another run
    tuning: dict[str, list[dict]] = {}
    chosen: dict[str, dict] = {}
    seed0: dict[str, dict] = {}
    tuned_on = None
    if args.only_seeds is not None and args.chosen_from is None:
        raise SystemExit("--only-seeds needs --chosen-from")
    if args.chosen_from is not None:
        other = json.loads(args.chosen_from.read_text())
        missing = [m for m in models if m not in other["details"]["chosen"]]
        if missing:
            raise SystemExit(f"{args.chosen_from} has no chosen configuration for {missing}")
        tuned_on = {
            "json": str(args.chosen_from),
            "data": other["machine"].get("data"),
            "data_sha256": other["machine"].get("data_sha256"),
            "epochs": other["machine"].get("epochs"),
            "grid_size": other["machine"].get("grid_size"),
        }
        if args.only_seeds is not None:
            if args.checkpoint is None:
                raise SystemExit("--only-seeds needs --checkpoint")
            for s in (int(x) for x in args.only_seeds.split(",")):
                for name in models:
                    r = run(name, other["details"]["chosen"][name], s)
                    print(f"seed {s} {name:18s} val score {r['val_score']:.4f}", flush=True)
            return
        for name in models:
            chosen[name] = other["details"]["chosen"][name]
            tuning[name] = other["details"]["tuning"].get(name, [])
            seed0[name] = run(name, chosen[name], 0)
            print(f"seed 0 {name:18s} {chosen[name]} (chosen in {args.chosen_from})", flush=True)
    for name in models if tuned_on is None else ():
        tuning[name] = []
        for extra in grid(name, widths, args.grid_size):
            r = run(name, extra, 0)
            tuning[name].append(r)
            print(
                f"tune {name:18s} {extra}  val score {r['val_score']:.4f}  {r['wall_s']:.0f} s",
                flush=True,
            )
        best = min(tuning[name], key=lambda r: r["val_score"])
        chosen[name], seed0[name] = best["config"], best
    # 2. evaluation over seeds (seed 0 reuses the tuning run of the chosen config)
    runs: dict[str, list[dict]] = {m: [seed0[m]] for m in models}
    for s in range(1, args.seeds):
        for name in models:
            r = run(name, chosen[name], s)
            runs[name].append(r)
            print(
                f"seed {s} {name:18s} test MAE "
                + " ".join(f"{t}={v:.4g}" for t, v in zip(targets, r["test_mae"], strict=True))
                + f"  {r['wall_s']:.0f} s",
                flush=True,
            )

    # 4. references
    refs: dict[str, list[list[float]]] = {
        "train_mean": [],
        "linear_heavy_atoms": [],
        "oracle_gap": [],
    }
    heavy = np.array([sum(int(z) > 1 for z in g.z) for g in graphs], dtype=float)
    for s in range(args.seeds):
        tr, _, te = ms.split(seed=SPLIT_SEEDS[s])
        y_te = ms.targets[te]
        refs["train_mean"].append(np.abs(y_te - ms.targets[tr].mean(0)).mean(0).tolist())
        design = np.c_[heavy, np.ones_like(heavy)]
        coef, *_ = np.linalg.lstsq(design[tr], ms.targets[tr], rcond=None)
        refs["linear_heavy_atoms"].append(np.abs(y_te - design[te] @ coef).mean(0).tolist())
        refs["oracle_gap"].append(np.abs(y_te - lowest[te]).mean(0).tolist())

    def stats(rows):
        a = np.asarray(rows, dtype=float)
        return a.mean(0), (a.std(0, ddof=1) if len(a) > 1 else np.zeros(a.shape[1]))

    def abs_err(name, k):
        """Per-molecule absolute test errors of target k, concatenated over seeds."""
        out = []
        for r in runs[name]:
            pred = np.asarray(r["test_pred"])[:, k]
            out.append(np.abs(pred - ms.targets[r["test_index"], k]))
        return np.concatenate(out)

    rows, table = [], []
    for ref, vals in refs.items():
        mean, std = stats(vals)
        for k, t in enumerate(targets):
            table.append([f"{ref} {t}", mean[k], std[k], None])
            rows.append(Row(f"{ref} / {t}", "test MAE (mean)", float(mean[k]), units[k]))
            rows.append(Row(f"{ref} / {t}", "test MAE (std over seeds)", float(std[k]), units[k]))
    for name in models:
        mean, std = stats([r["test_mae"] for r in runs[name]])
        for k, t in enumerate(targets):
            table.append([f"{name} {t}", mean[k], std[k], runs[name][0]["n_params"]])
            rows.append(Row(f"{name} / {t}", "test MAE (mean)", float(mean[k]), units[k]))
            rows.append(Row(f"{name} / {t}", "test MAE (std over seeds)", float(std[k]), units[k]))
        rows.append(Row(name, "parameters", float(runs[name][0]["n_params"]), "count"))
        rows.append(Row(name, "chosen width", float(chosen[name]["hidden"]), "channels"))
        for knob in ("num_experts", "top_k", "heads"):
            if knob in chosen[name]:
                rows.append(Row(name, f"chosen {knob}", float(chosen[name][knob]), "count"))
        if "cross_conformer" in chosen[name]:
            rows.append(
                Row(name, "chosen cross_conformer", float(chosen[name]["cross_conformer"]), "bool")
            )
        rows.append(
            Row(
                name,
                "best epoch (mean over seeds)",
                float(np.mean([r["best_epoch"] for r in runs[name]])),
                "epoch",
            )
        )
        curves = [np.asarray(r["history"]["val_score"]) for r in runs[name]]
        q = max(1, len(curves[0]) // 4)
        rows.append(
            Row(
                name,
                f"validation score change over the last {q} epochs (mean over seeds)",
                float(np.mean([val_change(c) for c in curves])),
                "fraction",
            )
        )
    # 3. paired tests
    tests = {}
    baselines = [m for m in models if m not in SPICE]
    singles = [m for m in models if m in SINGLE]
    ensembles = [m for m in models if m in ENSEMBLE]

    def val_mean(name, k):
        return float(np.mean([r["val_mae"][k] for r in runs[name]]))

    def test_mean(name, k):
        return float(np.mean([r["test_mae"][k] for r in runs[name]]))

    def paired(a, b, k, label):
        d = abs_err(a, k) - abs_err(b, k)
        p = sign_flip_test(d)
        t = targets[k]
        tests.setdefault(t, {})[label] = {
            "a": a,
            "b": b,
            "mean_diff": float(d.mean()),
            "p": p,
            "n": int(d.size),
        }
        rows.append(
            Row(
                f"{label} / {t}",
                f"test MAE {a}",
                test_mean(a, k),
                units[k],
                b,
                test_mean(b, k) / test_mean(a, k),
            )
        )
        rows.append(
            Row(f"{label} / {t}", "mean paired |error| difference", float(d.mean()), units[k])
        )
        rows.append(Row(f"{label} / {t}", "sign-flip p-value", p, ""))

    for k, _t in enumerate(targets):
        if "spice" in models and baselines:
            best = min(baselines, key=lambda m: val_mean(m, k))
            paired("spice", best, k, "spice vs best baseline")
        if "spice" in models and ensembles:
            be = min(ensembles, key=lambda m: val_mean(m, k))
            paired("spice", be, k, CLAIM)
        if singles and ensembles:
            be = min(ensembles, key=lambda m: val_mean(m, k))
            bs = min(singles, key=lambda m: val_mean(m, k))
            paired(be, bs, k, ENSEMBLE_HELPS)
    # multiple testing: Holm over the targets, separately for each comparison
    for label in {lab for d in tests.values() for lab in d}:
        ts = [t for t in targets if label in tests.get(t, {})]
        for t, a in zip(ts, holm([tests[t][label]["p"] for t in ts]), strict=True):
            tests[t][label]["p_holm"] = a
            rows.append(Row(f"{label} / {t}", f"Holm p-value (over {len(ts)} targets)", a, ""))
    v_rows, verdicts = verdict_rows(tests, targets)
    rows += v_rows
    scale = np.nanstd(ms.targets, axis=0, ddof=1)
    o_rows, overall = overall_rows(runs, refs, targets, scale, ms.targets)
    rows += o_rows
    # 5. throughput at one common size
    thr_opts = lambda name: {**base_opts, "hidden": 32}  # noqa: E731
    thr = throughput(models, thr_opts, graphs, args.batch_size, device=args.device)
    ref_thr = thr.get("deepsets")
    for name, v in thr.items():
        rows.append(
            Row(
                name,
                "training throughput (hidden 32)",
                v,
                "molecules/s",
                "deepsets" if ref_thr and name != "deepsets" else None,
                v / ref_thr if ref_thr and name != "deepsets" else None,
            )
        )
    print_table(
        ["model / target", "test MAE", "std", "params"],
        table,
        title=f"\ntest MAE over {args.seeds} seeds",
    )
    for t, d in tests.items():
        for label, v in d.items():
            print(
                f"{t:10s} {label}: {v['a']} - {v['b']} = {v['mean_diff']:+.4g} "
                f"(p={v['p']:.3g}, Holm {v['p_holm']:.3g})"
            )
    print("throughput (molecules/s):", {k: round(v, 1) for k, v in thr.items()})
    contention = load.report()
    if args.json:
        machine = machine_info(
            seed=args.seed,
            quick=args.quick,
            contention=contention,
            data=str(args.data),
            n_molecules=len(ms),
            n_conformers=int(sum(g.num_confs for g in graphs)),
            n_conformer_atoms=int(n_pts),
            data_sha256=ms.content_sha256(),
            hydrogens=bool(args.with_h),
            seeds=args.seeds,
            epochs=epochs,
            widths=widths,
            grid_size=args.grid_size,
            batch_size=args.batch_size,
            tuned_on=tuned_on,
            model_options=base_opts,
            train_options=tcfg,
            device=args.device,  # information only: the stored CPU results are the reference
        )
        doc = {
            "benchmark": "spice",
            "machine": machine,
            "rows": [r.__dict__ for r in rows],
            "details": {
                "targets": targets,
                "units": units,
                "chosen": chosen,
                "tests": tests,
                "verdicts": verdicts,
                "throughput": thr,
                "references": refs,
                "tuning": {
                    m: [{k: r[k] for k in ("config", "val_score", "val_mae")} for r in v]
                    for m, v in tuning.items()
                },
                "runs": runs,  # with every seed's test predictions (pooled tests)
                "overall": overall,
                "parity_seed0": {m: runs[m][0]["test_pred"] for m in models},
            },
        }
        doc["verdicts"] = claim_verdicts(doc)
        write_json_doc(args.json, doc, indent=1)
        print(f"wrote {args.json}")
    if args.plots is not None:  # after the JSON: a plotting error loses no result
        prefix = args.json.stem if args.json is not None else "spice"
        plot(args.plots, prefix, targets, units, runs, refs, models, ms, tests)


if __name__ == "__main__":
    main()
