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

``DIR`` is a ``MoleculeSet`` folder (``sci-moe data molecules --out DIR --n 120``; built
with 50 molecules when missing).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    print_table,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _spice import (
    SPLIT_SEEDS,
    base_model_options,
    holm,
    load_set,
    run_key,
    sign_flip_test,
    train_record,
    val_change,
    verdict,
)

SINGLE = ("single_conformer", "random_conformer")
ENSEMBLE = ("mean_ensemble", "deepsets", "attention_ensemble", "boltzmann_ensemble", "gnn2d_3d")
SPICE = ("spice", "spice_dense")


def parse_args():
    p = base_parser(__doc__.splitlines()[0], verdicts=claim_verdicts)
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
    return p.parse_args()


def grid(name: str, widths: list[int], size: int) -> list[dict]:
    """The ``size`` tuning configurations of a model (the same count for every model).

    SPiCE's knobs are width, (experts, top-k) and the cross-conformer block; its full
    grid is ``widths x {(4, 1), (8, 2)} x {cross-conformer on, off}``, ordered so that the
    first 4 cover every knob at both levels: (w, 4, 1, on), (w, 8, 2, on), (w, 8, 2, off),
    (w', 4, 1, on) with ``w`` the widest and ``w'`` the next width, then the rest. Every
    other model gets the same number of configurations over its own knobs: width, then
    the attention heads (``attention_ensemble``: 4, then 2) or the atom pooling of a
    conformer (every other model: ``"sum"``, then ``"mean"``), i.e. ``widths x {default,
    alternative}`` with the default knob first. The first 2 configurations are those of
    earlier runs (``--grid-size 2``: SPiCE at the widest width with (4, 1) or (8, 2),
    every other model at the first two widths).

    Parameters
    ----------
    name : str
        Model name (:data:`sci_moe.molecules.spice.MODEL_NAMES`).
    widths : list of int
        Candidate hidden widths (channels), narrowest first.
    size : int
        Number of configurations (>= 1, at most the model's full grid).

    Returns
    -------
    list of dict
        ``build_model`` options per configuration.
    """
    if size < 1:
        raise ValueError(f"grid size must be >= 1, got {size}")
    if name == "spice":
        wide = list(reversed(widths))
        first = [(wide[0], 4, 1, True), (wide[0], 8, 2, True), (wide[0], 8, 2, False)]
        if len(wide) > 1:
            first.append((wide[1], 4, 1, True))
        rest = [
            (h, e, k, cc)
            for h in wide
            for cc in (True, False)
            for e, k in ((4, 1), (8, 2))
            if (h, e, k, cc) not in first
        ]
        configs = [
            {"hidden": h, "num_experts": e, "top_k": k, "cross_conformer": cc}
            for h, e, k, cc in first + rest
        ]
    else:
        alt = ("heads", 4, 2) if name == "attention_ensemble" else ("atom_pool", "sum", "mean")
        configs = [{"hidden": h, alt[0]: alt[1]} for h in widths]
        configs += [{"hidden": h, alt[0]: alt[2]} for h in widths]
    if size > len(configs):
        raise ValueError(f"grid size {size} > the {len(configs)} configurations of {name}")
    return configs[:size]


ENSEMBLE_HELPS = "best ensemble vs best single conformer"
CLAIM = "spice vs best ensemble"


def verdict_rows(tests: dict, targets, alpha: float = 0.05) -> tuple[list[Row], dict]:
    """Per-comparison counts of the Holm-corrected per-target verdicts.

    Parameters
    ----------
    tests : dict
        ``tests[target][label]`` with ``mean_diff`` (a - b) and ``p_holm``, as built by
        the paired tests of :func:`main`.
    targets : sequence of str
    alpha : float
        Family-wise level of the Holm-adjusted p-values.

    Returns
    -------
    rows : list of Row
        For every comparison label, the number of targets on which ``a`` is better,
        worse or within noise; and the paper's claim (SPiCE vs the best ensemble)
        restricted to the targets where the best ensemble beats the best single
        conformer (where ensembles help).
    out : dict
        ``{label: {target: verdict}}`` and the restricted claim under
        ``"spice vs best ensemble where ensembles help"``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    out: dict[str, dict[str, str]] = {}
    for t in targets:
        for label, v in tests.get(t, {}).items():
            out.setdefault(label, {})[t] = verdict(v, alpha)
    helps = [t for t, v in out.get(ENSEMBLE_HELPS, {}).items() if v == "better"]
    if CLAIM in out:
        out[f"{CLAIM} where ensembles help"] = {t: out[CLAIM][t] for t in helps if t in out[CLAIM]}
    rows = []
    for label, per in out.items():
        for kind in ("better", "worse", "noise"):
            rows.append(
                Row(
                    f"verdicts {label}",
                    f"targets {kind} after Holm (alpha {alpha})",
                    float(sum(v == kind for v in per.values())),
                    "count",
                )
            )
    return rows, out


def throughput(models, opts_of, graphs, batch_size: int, repeats: int = 3) -> dict[str, float]:
    """Training molecules/s (fwd + bwd + AdamW) per model, interleaved, median of repeats."""
    from sci_moe.molecules import collate_ensembles
    from sci_moe.molecules.spice import build_model

    batches = [
        collate_ensembles(graphs[s : s + batch_size])
        for s in range(0, min(len(graphs), 4 * batch_size), batch_size)
    ]
    n_mols = sum(b.num_mols for b in batches)
    built = {}
    for name in models:
        torch.manual_seed(0)
        m = build_model(name, **opts_of(name)).train()
        m.set_target_stats(torch.stack([g.y for g in graphs]))
        built[name] = (m, torch.optim.AdamW(m.parameters(), lr=1e-4))

    def epoch(name):
        m, opt = built[name]
        for b in batches:
            loss, _ = m.loss(b)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    times: dict[str, list[float]] = {n: [] for n in models}
    for name in models:
        epoch(name)  # warm-up
    for _ in range(repeats):
        for name in models:
            t0 = time.perf_counter()
            epoch(name)
            times[name].append(time.perf_counter() - t0)
    return {n: n_mols / float(np.median(t)) for n, t in times.items()}


def overall_rows(runs, refs, targets, scale, y=None) -> tuple[list[Row], dict]:
    """All-target summary: test score per seed and a pooled paired test (one test, no Holm).

    The test score of a run is the mean over targets of test MAE / ``scale`` (the std of
    each target over the whole set). With per-molecule predictions of every seed
    (``r["test_pred"]`` and the labels ``y``), the per-molecule score difference of SPiCE
    and the best baseline by validation score (and of the best ensemble and the best
    single-conformer model) is sign-flip tested, pooled over seeds.
    """
    scale = np.asarray(scale, dtype=float)
    rows, out = [], {}
    score = {
        m: [float(np.mean(np.asarray(r["test_mae"]) / scale)) for r in rs] for m, rs in runs.items()
    }
    score.update({m: [float(np.mean(np.asarray(v) / scale)) for v in vs] for m, vs in refs.items()})
    for m, v in score.items():
        a = np.asarray(v)
        rows.append(
            Row(
                m,
                "test score: mean over targets of MAE / target std (mean over seeds)",
                float(a.mean()),
                "",
            )
        )
        rows.append(
            Row(m, "test score (std over seeds)", float(a.std(ddof=1)) if a.size > 1 else 0.0, "")
        )
    out["test_score"] = score
    val = {m: float(np.mean([r["val_score"] for r in rs])) for m, rs in runs.items()}
    have = y is not None and all("test_pred" in r for rs in runs.values() for r in rs)

    def per_mol(m):
        return np.concatenate(
            [
                (np.abs(np.asarray(r["test_pred"]) - y[r["test_index"]]) / scale).mean(1)
                for r in runs[m]
            ]
        )

    pairs = []
    base = [m for m in runs if m not in SPICE]
    ens, sing = [m for m in runs if m in ENSEMBLE], [m for m in runs if m in SINGLE]
    if "spice" in runs and base:
        pairs.append(("overall spice vs best baseline", "spice", min(base, key=val.get)))
    if "spice" in runs and ens:
        pairs.append(("overall spice vs best ensemble", "spice", min(ens, key=val.get)))
    if ens and sing:
        pairs.append(
            (
                "overall best ensemble vs best single conformer",
                min(ens, key=val.get),
                min(sing, key=val.get),
            )
        )
    for label, a, b in pairs:
        case = f"{label} ({a} vs {b})"
        rows.append(
            Row(
                case,
                f"test score {a}",
                float(np.mean(score[a])),
                "",
                b,
                float(np.mean(score[b]) / np.mean(score[a])),
            )
        )
        if have:
            d = per_mol(a) - per_mol(b)
            p = sign_flip_test(d)
            rows.append(Row(case, "mean paired score difference", float(d.mean()), ""))
            rows.append(Row(case, "sign-flip p-value", p, ""))
            out[label] = {"a": a, "b": b, "mean_diff": float(d.mean()), "p": p, "n": int(d.size)}
    return rows, out


def claim_verdicts(doc: dict) -> list[dict]:
    """The paper's claims, by rules applied to the run's all-target rows (issue 41).

    The all-target score is the mean over targets of test MAE / target std (lower is
    better); the pooled paired sign-flip test compares two models' per-molecule scores
    (rows ``overall <comparison> (<a> vs <b>)``), the per-target counts are the Holm-
    corrected paired tests (rows ``verdicts <comparison>``).

    * SPiCE consistently outperforms the existing conformer-ensemble methods (against the
      best ensemble of the run, or the best baseline where the run has no ensemble row):
      reproduced when the pooled test resolves SPiCE as better (p < 0.05) and no target is
      worse after Holm; contradicted when the pooled test resolves it as worse, or when
      more targets are worse than better after Holm; not decided otherwise;
    * the premise, conformer ensembles beat one conformer: the best ensemble against the
      best single-conformer model, by the pooled test alone.

    A run without the pooled test (older JSONs) gets "not decided". Training is not
    converged (the validation curves still fall), so nothing is decisive.
    """
    rows = doc["rows"]

    def overall(prefix):
        found = [r for r in rows if r["case"].startswith(f"overall {prefix} (")]
        if not found:
            return None
        case = found[0]["case"]
        a, b = case[case.index("(") + 1 : -1].split(" vs ")
        get = {r["metric"]: r for r in rows if r["case"] == case}
        score = get[f"test score {a}"]
        p = get.get("sign-flip p-value")
        diff = get.get("mean paired score difference")
        return {
            "a": a,
            "b": b,
            "ours": score["value"],
            "base": score["value"] * score["ratio"],
            "p": None if p is None else p["value"],
            "diff": None if diff is None else diff["value"],
        }

    def counts(label):
        got = {
            r["metric"].split()[1]: int(r["value"])
            for r in rows
            if r["case"] == f"verdicts {label}"
        }
        return got or None

    out = []
    for claim, prefix, per_target in (
        (
            "SPiCE consistently outperforms existing conformer-ensemble methods",
            "spice vs best ensemble",
            "spice vs best ensemble",
        ),
        (
            "conformer ensembles beat a single conformer",
            "best ensemble vs best single conformer",
            None,
        ),
    ):
        o = overall(prefix)
        if o is None and prefix.startswith("spice"):
            o = overall("spice vs best baseline")
            per_target = "spice vs best baseline"
        if o is None:
            continue
        c = counts(per_target) if per_target else None
        resolved = o["p"] is not None and o["p"] < 0.05
        better = o["diff"] is not None and o["diff"] < 0
        if not resolved:
            verdict = "not decided"
        elif better and (c is None or c.get("worse", 0) == 0):
            verdict = "reproduced"
        elif not better:
            verdict = "contradicted"
        else:
            verdict = "not decided"
        if c is not None and c.get("worse", 0) > c.get("better", 0) and per_target:
            verdict = "contradicted"
        why = (
            f"all-target score {o['ours']:.4g} ({o['a']}) vs {o['base']:.4g} ({o['b']}), "
            "lower is better"
        )
        if o["p"] is not None:
            why += f"; pooled paired sign-flip test p = {o['p']:.2g}"
        else:
            why += "; no pooled test in this run"
        if c is not None:
            why += (
                f"; per target after Holm: better on {c.get('better', 0)}, worse on "
                f"{c.get('worse', 0)}, within noise on {c.get('noise', 0)}"
            )
        why += "; not trained to convergence"
        out.append(
            verdict_entry(
                claim,
                verdict=verdict,
                why=why,
                metric="all-target test score (MAE / target std)",
                ours=o["ours"],
                baseline=o["b"],
                baseline_value=o["base"],
                seeds=int(doc["machine"].get("seeds", 1)),
                p_value=o["p"],
                converged=False,
                decisive=False,
            )
        )
    return out


def resummarize(args) -> None:
    """Add the all-target rows of :func:`overall_rows` and the verdict counts of
    :func:`verdict_rows` to a finished JSON (``--resummarize``)."""
    doc = json.loads(args.resummarize.read_text())
    det = doc["details"]
    ms = load_set(args.data)
    if ms.content_sha256() != doc["machine"]["data_sha256"]:
        raise SystemExit(f"{args.data} is not the data set of {args.resummarize} (content hash)")
    scale = np.nanstd(ms.targets, axis=0, ddof=1)
    rows, out = overall_rows(det["runs"], det["references"], det["targets"], scale, ms.targets)
    v_rows, det["verdicts"] = verdict_rows(det["tests"], det["targets"])
    keep = [
        r
        for r in doc["rows"]
        if not r["case"].startswith(("overall ", "verdicts ")) and "test score" not in r["metric"]
    ]
    doc["rows"] = keep + [r.__dict__ for r in rows + v_rows]
    det["overall"] = out
    write_json_doc(args.resummarize, doc, indent=1)
    print(f"rewrote {args.resummarize}: {len(rows)} all-target and {len(v_rows)} verdict rows")


def replot(args) -> None:
    """Redraw the plots of a finished run from its JSON (``--replot JSON --plots DIR``)."""
    doc = json.loads(args.replot.read_text())
    det = doc["details"]
    ms = load_set(args.data)
    if ms.content_sha256() != doc["machine"]["data_sha256"]:
        raise SystemExit(f"{args.data} is not the data set of {args.replot} (content hash)")
    runs = det["runs"]
    for m, pred in det["parity_seed0"].items():
        runs[m][0]["test_pred"] = pred
    plot(
        args.plots or Path("."),
        args.replot.stem,
        det["targets"],
        det["units"],
        runs,
        det["references"],
        list(runs),
        ms,
        det["tests"],
    )


def main() -> None:
    args = parse_args()
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
        r = train_record(ms, graphs, targets, name, {**base_opts, **extra}, tcfg, s)
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
    thr = throughput(models, thr_opts, graphs, args.batch_size)
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


def _panels(plt, n: int, size: float, ncols: int = 6):
    """A grid of ``n`` axes, at most ``ncols`` wide (unused axes hidden)."""
    cols = min(n, ncols)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def plot(folder: Path, prefix, targets, units, runs, refs, models, ms, tests) -> None:
    """Parity (seed 0), test MAE per target and model, learning curves (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    T = len(targets)
    # parity: SPiCE and the best baseline of each target, seed 0
    fig, axes = _panels(plt, T, 3.0)
    for k, ax in enumerate(axes):
        shown = ["spice"] if "spice" in models else []
        b = tests.get(targets[k], {}).get("spice vs best baseline", {}).get("b")
        shown += [b] if b else []
        for m in shown:
            r = runs[m][0]
            y = ms.targets[r["test_index"], k]
            ax.scatter(y, np.asarray(r["test_pred"])[:, k], s=10, label=m, alpha=0.7)
        y = ms.targets[:, k]
        ax.plot([y.min(), y.max()], [y.min(), y.max()], "k--", lw=0.8)
        ax.set_xlabel(f"label ({units[k]})", fontsize=8)
        ax.set_ylabel("prediction", fontsize=8)
        ax.set_title(targets[k], fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle("test-set parity, seed 0")
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_parity.png", dpi=90 if T > 6 else 110)
    plt.close(fig)

    names = list(models) + list(refs)
    vals = {
        m: np.asarray([r["test_mae"] for r in runs[m]], dtype=float).reshape(-1, T) for m in models
    }
    vals.update({m: np.asarray(refs[m], dtype=float).reshape(-1, T) for m in refs})
    if T > 6:
        # many targets: test MAE / std of the target (mean over seeds) as a table-like heatmap
        scale = np.nanstd(ms.targets, axis=0, ddof=1)
        mat = np.stack([vals[m].mean(0) / scale for m in names])
        fig, ax = plt.subplots(figsize=(0.55 * T + 3, 0.42 * len(names) + 2))
        im = ax.imshow(mat, cmap="viridis_r", aspect="auto", vmin=0, vmax=1.5)
        best = np.argmin(mat[: len(models)], axis=0)
        for (i, k), v in np.ndenumerate(mat):
            weight = "bold" if i < len(models) and best[k] == i else "normal"
            ax.text(
                k,
                i,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=6,
                weight=weight,
                color="w" if v > 0.9 else "k",
            )
        ax.set_xticks(range(T))
        ax.set_xticklabels(targets, rotation=70, ha="right", fontsize=7)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        ax.axhline(len(models) - 0.5, color="w", lw=2)
        fig.colorbar(im, ax=ax, fraction=0.02, label="test MAE / target std")
        ax.set_title("test MAE / target std, mean over seeds (bold: best model per target)")
    else:
        colors = {
            **{m: "C1" for m in SPICE},
            **{m: "C0" for m in ENSEMBLE},
            **{m: "C2" for m in SINGLE},
            "gnn2d": "C4",
        }
        fig, axes = _panels(plt, T, 3.6)
        for k, ax in enumerate(axes):
            v = [vals[m][:, k] for m in names]
            ax.bar(
                range(len(names)),
                [x.mean() for x in v],
                yerr=[x.std(ddof=1) if len(x) > 1 else 0 for x in v],
                capsize=2,
                color=[colors.get(m, "0.6") for m in names],
            )
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
            ax.set_title(f"{targets[k]} test MAE ({units[k]})")
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_mae.png", dpi=110)
    plt.close(fig)

    # learning curves (chosen configs, mean over seeds): training loss and validation score
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, m in enumerate(models):
        loss = np.mean([r["history"]["train_loss"] for r in runs[m]], axis=0)
        val = np.mean([r["history"]["val_score"] for r in runs[m]], axis=0)
        ep = np.arange(1, len(loss) + 1)
        style = "-" if m in SPICE else "--"
        axes[0].plot(ep, loss, style, color=f"C{i % 10}", label=m)
        axes[1].plot(ep, val, style, color=f"C{i % 10}", label=m)
    axes[0].set_yscale("log")
    axes[0].set_title("training loss (z-scored MSE), mean over seeds")
    axes[1].set_title("validation MAE / target std (mean over targets and seeds)")
    for ax in axes:
        ax.set_xlabel("epoch")
    axes[1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_curves.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
