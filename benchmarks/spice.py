"""SPiCE vs baselines on the offline conformer-ensemble set (same budget, several seeds).

Models (all from :func:`sci_moe.molecules.build_model`, same width, depth, cutoff,
optimiser, epochs, batch size and early stopping):

* ``spice`` — SPiCE: PaiNN blocks + geometric MoE (top-2 of 8) + cross-conformer
  integration, mean ensemble readout;
* ``spice_dense`` — (d) the same without MoE (one dense scalar and vector expert);
* ``single_conformer`` — (a) the PaiNN backbone on the lowest-energy conformer;
* ``deepsets`` — (b) the backbone on every conformer with a DeepSets readout;
* ``gnn2d`` — (c) a 2D GINE network (no coordinates).

Three references put the numbers in context: ``train_mean`` (predict the training
mean), ``linear_heavy_atoms`` (least squares on the heavy-atom count, fitted on the
training split: what molecular size alone explains) and ``lowest_conformer_oracle``
(the exact GFN2 value of the lowest-energy conformer as the prediction of the Boltzmann
average: how much of each label an ideal single-conformer model could get right).

Protocol (MARCEL / SPiCE): for each seed ``s`` a molecule-level 70/10/20 split with
``sklearn.utils.shuffle`` seed ``(123, 8888, 8889, ...)[s]``, every model trained with
seed ``s`` on all targets at once (z-scored), early stopping on the validation MAE,
test MAE at the best validation epoch; mean +- std over seeds.

Run::

    python benchmarks/spice.py --data DIR --json benchmarks/results/spice.json
    python benchmarks/spice.py --quick --data DIR --json benchmarks/results/spice_quick.json

``DIR`` is a set built by ``sci-moe data molecules --out DIR`` (built there
when missing: 50 molecules, ~2-4 min on 2 cores).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from _common import OtherLoad, Row, base_parser, machine_info, print_table, setup, write_json_doc

SPLIT_SEEDS = (123, 8888, 8889, 4242, 7)
MODELS = ("spice", "spice_dense", "single_conformer", "deepsets", "gnn2d")
LABELS = {
    "spice": "SPiCE",
    "spice_dense": "(d) SPiCE w/o MoE",
    "single_conformer": "(a) lowest-energy conformer",
    "deepsets": "(b) DeepSets ensemble",
    "gnn2d": "(c) 2D GNN",
}


def parse_args():
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("data/molecule_set_small"))
    p.add_argument("--seeds", type=int, default=3, help="seeds / splits (default 3)")
    p.add_argument("--epochs", type=int, default=None, help="max epochs (default 100, quick 8)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--hidden", type=int, default=None, help="channels (default 32, quick 16)")
    p.add_argument(
        "--with-h", action="store_true", help="keep hydrogens (default: heavy atoms only)"
    )
    p.add_argument("--plots", type=Path, default=None, help="folder for the PNG plots")
    return p.parse_args()


def load_set(path: Path):
    from sci_moe.data.molecule_set import MoleculeSet, MoleculeSetConfig, build_molecule_set

    if not (path / "molecule_set.npz").exists():
        print(f"building the 50-molecule set in {path} (a few minutes)", flush=True)
        build_molecule_set(path, MoleculeSetConfig(n_molecules=50))
    return MoleculeSet.load(path)


def main() -> None:
    args = parse_args()
    setup(args)
    from sci_moe.data.molecule_set import TARGET_UNITS
    from sci_moe.molecules import (
        ATOM_FEATURE_DIM,
        BOND_FEATURE_DIM,
        TrainConfig,
        build_model,
        evaluate,
        fit,
    )

    load = OtherLoad()
    ms = load_set(args.data)
    targets = list(ms.target_names)
    units = [TARGET_UNITS.get(t, "") for t in targets]
    graphs = ms.graphs(heavy_only=not args.with_h)
    lowest = ms.lowest_energy_targets()
    models = [m for m in args.models.split(",") if m]
    epochs = args.epochs or (8 if args.quick else 100)
    hidden = args.hidden or (16 if args.quick else 32)
    if args.seeds > len(SPLIT_SEEDS):
        raise SystemExit(f"--seeds at most {len(SPLIT_SEEDS)}")
    opts = dict(
        n_targets=len(targets),
        atom_dim=ATOM_FEATURE_DIM,
        bond_dim=BOND_FEATURE_DIM,
        hidden=hidden,
        num_layers=2,
        num_rbf=16,
        cutoff_nm=0.5,
        num_experts=8,
        top_k=2,
        heads=4,
        noise_std=0.1,
    )
    tcfg = dict(
        epochs=epochs,
        batch_size=4,
        lr=1e-3,
        weight_decay=1e-3,
        schedule="cosine",
        warmup_epochs=2 if not args.quick else 1,
        patience=30,
        progress=False,
    )
    n_pts = sum(g.num_atoms * g.num_confs for g in graphs)
    print(
        f"{len(ms)} molecules, {sum(g.num_confs for g in graphs)} conformers, {n_pts} "
        f"conformer-atoms ({'with H' if args.with_h else 'heavy atoms'}); targets {targets}; "
        f"{args.seeds} seeds x {len(models)} models x <= {epochs} epochs",
        flush=True,
    )

    runs: dict[str, list[dict]] = {m: [] for m in models}
    refs: dict[str, list[list[float]]] = {
        "train_mean": [],
        "linear_heavy_atoms": [],
        "lowest_conformer_oracle": [],
    }
    heavy = np.array([sum(int(z) > 1 for z in g.z) for g in graphs], dtype=float)
    parity, usage = None, None
    for s in range(args.seeds):
        tr, va, te = ms.split(seed=SPLIT_SEEDS[s])
        train_g = [graphs[i] for i in tr]
        val_g = [graphs[i] for i in va]
        test_g = [graphs[i] for i in te]
        y_te = ms.targets[te]
        refs["train_mean"].append(np.abs(y_te - ms.targets[tr].mean(0)).mean(0).tolist())
        design = np.c_[heavy, np.ones_like(heavy)]
        coef, *_ = np.linalg.lstsq(design[tr], ms.targets[tr], rcond=None)
        refs["linear_heavy_atoms"].append(np.abs(y_te - design[te] @ coef).mean(0).tolist())
        refs["lowest_conformer_oracle"].append(np.abs(y_te - lowest[te]).mean(0).tolist())
        for name in models:
            torch.manual_seed(s)
            model = build_model(name, **opts)
            t0 = time.perf_counter()
            res = fit(
                model, train_g, val_g, test_g, TrainConfig(seed=s, **tcfg), target_names=targets
            )
            wall = time.perf_counter() - t0
            mae = [res["test_mae"][t] for t in targets]
            runs[name].append(
                {
                    "seed": s,
                    "split_seed": SPLIT_SEEDS[s],
                    "test_mae": mae,
                    "best_epoch": res["best_epoch"],
                    "epochs_run": res["epochs_run"],
                    "train_time_s": res["train_time_s"],
                    "wall_s": wall,
                    "n_params": res["n_params"],
                }
            )
            print(
                f"seed {s} {name:17s} test MAE "
                + " ".join(f"{t}={v:.4g}" for t, v in zip(targets, mae, strict=True))
                + f"  best epoch {res['best_epoch']}/{res['epochs_run']}  {wall:.0f} s",
                flush=True,
            )
            if name == "spice" and s == 0:
                ev = evaluate(model, test_g)
                parity = {"pred": ev["pred"].tolist(), "y": ev["y"].tolist()}
                usage = ev["expert_load"]

    def stats(rows):
        a = np.asarray(rows, dtype=float)
        return a.mean(0), (a.std(0, ddof=1) if len(a) > 1 else np.zeros(a.shape[1]))

    base = "single_conformer" if "single_conformer" in models else None
    table, out_rows = [], []
    for ref, vals in refs.items():
        mean, std = stats(vals)
        for k, t in enumerate(targets):
            table.append([f"{ref} {t}", mean[k], std[k], None, None, None])
            out_rows.append(Row(f"{ref} / {t}", "test MAE (mean)", float(mean[k]), units[k]))
    for name in models:
        mean, std = stats([r["test_mae"] for r in runs[name]])
        bmean = stats([r["test_mae"] for r in runs[base]])[0] if base else None
        params = runs[name][0]["n_params"]
        ttime = float(np.mean([r["train_time_s"] for r in runs[name]]))
        for k, t in enumerate(targets):
            ratio = float(bmean[k] / mean[k]) if base and name != base else None
            table.append([f"{name} {t}", mean[k], std[k], ratio, params, ttime])
            out_rows.append(
                Row(
                    f"{name} / {t}",
                    "test MAE (mean)",
                    float(mean[k]),
                    units[k],
                    base if ratio is not None else None,
                    ratio,
                )
            )
            out_rows.append(
                Row(f"{name} / {t}", "test MAE (std over seeds)", float(std[k]), units[k])
            )
        out_rows.append(Row(name, "parameters", float(params), "count"))
        out_rows.append(Row(name, "training time (mean over seeds)", ttime, "s"))
    if "spice" in models:
        smean = stats([r["test_mae"] for r in runs["spice"]])[0]
        for other in models:
            if other in ("spice", base):
                continue
            omean = stats([r["test_mae"] for r in runs[other]])[0]
            for k, t in enumerate(targets):
                out_rows.append(
                    Row(
                        f"spice / {t}",
                        "test MAE (mean)",
                        float(smean[k]),
                        units[k],
                        other,
                        float(omean[k] / smean[k]),
                    )
                )
    print_table(
        ["model / target", "test MAE", "std", f"{base} / model", "params", "train s"],
        table,
        title=f"\ntest MAE over {args.seeds} seeds (ratio > 1: better than {base})",
    )
    contention = load.report()
    if args.plots is not None and parity is not None:
        # Plot names follow the JSON's: spice.json -> spice_*.png, spice_full.json -> spice_full_*.
        prefix = args.json.stem if args.json is not None else "spice"
        plot(args.plots, targets, units, parity, usage, runs, models, refs, prefix)
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
            model_options=opts,
            train_options=tcfg,
        )
        doc = {
            "benchmark": "spice",
            "machine": machine,
            "rows": [r.__dict__ for r in out_rows],
            "details": {
                "targets": targets,
                "units": units,
                "runs": runs,
                "references": refs,
                "parity_seed0": parity,
                "expert_load_seed0": usage,
            },
        }
        write_json_doc(args.json, doc, indent=1)
        print(f"wrote {args.json}")


def plot(folder: Path, targets, units, parity, usage, runs, models, refs, prefix="spice") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    pred, y = np.asarray(parity["pred"]), np.asarray(parity["y"])
    fig, axes = plt.subplots(1, len(targets), figsize=(3.2 * len(targets), 3.2))
    for k, ax in enumerate(np.atleast_1d(axes)):
        ax.scatter(y[:, k], pred[:, k], s=14)
        lo, hi = min(y[:, k].min(), pred[:, k].min()), max(y[:, k].max(), pred[:, k].max())
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xlabel(f"GFN2 Boltzmann average ({units[k]})")
        ax.set_ylabel("SPiCE prediction")
        ax.set_title(targets[k])
    fig.suptitle("SPiCE test-set parity (seed 0)")
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_parity.png", dpi=120)
    plt.close(fig)

    if usage:
        fig, axes = plt.subplots(1, 2, figsize=(9, 1.2 + 0.7 * len(usage)))
        for ax, path in zip(axes, ("scalar", "vector"), strict=True):
            mat = np.asarray([layer[path] for layer in usage])
            im = ax.imshow(mat, vmin=0, vmax=max(0.25, mat.max()), cmap="viridis", aspect="auto")
            ax.set_xlabel("expert")
            ax.set_ylabel("layer")
            ax.set_yticks(range(len(usage)))
            ax.set_title(f"{path} experts")
            for (i, j), v in np.ndenumerate(mat):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
        fig.suptitle("share of test conformer-atoms per expert (seed 0)", y=1.08)
        fig.colorbar(im, ax=axes, shrink=0.8)
        fig.savefig(folder / f"{prefix}_expert_usage.png", dpi=120, bbox_inches="tight")
        plt.close(fig)

    fig, axes = plt.subplots(1, len(targets), figsize=(3.4 * len(targets), 3.4))
    for k, ax in enumerate(np.atleast_1d(axes)):
        names = list(models) + list(refs)
        vals = [np.asarray([r["test_mae"][k] for r in runs[m]]) for m in models]
        vals += [np.asarray([r[k] for r in refs[m]]) for m in refs]
        ax.bar(
            range(len(names)),
            [v.mean() for v in vals],
            yerr=[v.std(ddof=1) if len(v) > 1 else 0 for v in vals],
            capsize=3,
            color=["C0"] * len(models) + ["0.6"] * len(refs),
        )
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
        ax.set_title(f"{targets[k]} test MAE ({units[k]})")
    fig.tight_layout()
    fig.savefig(folder / f"{prefix}_mae.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
