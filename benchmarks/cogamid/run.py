"""CoGaMiD (issue 21): Gaussian-mixture feature replay vs prototypes vs fine-tuning.

Class-incremental segmentation of procedural scenes (6 classes, colour drift across
steps), protocol 4-1 (base classes 1-4, then 5, then 6), with the background-shift rule.
Two worlds are run with the same protocol:

* ``multimodal`` (the paper's setting): every class has 2-3 appearance modes;
* ``unimodal`` (the control): every class has one mode. GMM replay should NOT beat
  prototype replay here; the paper's mechanism says its gain comes from multimodality.

Per seed and world one base model is trained on step 0 and shared by all methods; then
every method runs steps 1 and 2:

* ``finetune``: cross-entropy on the shifted labels only (no memory);
* ``prototype``: STAR-like replay of one prototype per old class;
* ``gmm_k1``: replay from one full-covariance Gaussian per class;
* ``gmm_k3``: CoGaMiD replay from a 3-component full-covariance mixture per class;
* ``gmm_k3_da_grc``: the same with Dynamic Adjustment (threshold 0.7) and the GRC loss
  (weight 0.1), both in this package's reading of the unpublished formulas.

The unimodal control runs ``prototype`` and ``gmm_k3``; the full run leaves out
``gmm_k3_da_grc`` (its CPU budget), which runs in ``--quick``.

Reported (mean over seeds, and the population standard deviation): mIoU over all / old /
new classes after every step, forgetting of the base classes (mIoU at step 0 minus at the
last step), the per-seed last-step mIoU, the gap GMM K=3 minus prototype per world and its
difference between the worlds, and the held-out log-likelihood per feature dimension of
true base-class features (test pixels, step-0 model) under the GMM (K = 3), a single
Gaussian and the prototype (isotropic Gaussian at the class mean). Case names of the
unimodal world start with ``unimodal/``. ``--plots PREFIX`` writes
``PREFIX_miou.png``, ``PREFIX_loglik.png`` and ``PREFIX_predictions.png``.

    python benchmarks/cogamid/run.py --quick --json benchmarks/cogamid/results/cogamid_quick.json
    python benchmarks/cogamid/run.py --json benchmarks/cogamid/results/cogamid.json \\
        --plots docs/results/img/cogamid

:func:`verdicts` decides the paper's claims from the rows and writes them into the JSON;
``--verdicts-only PATH`` recomputes a stored JSON's verdicts (no training).
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
    decide_verdict,
    difference_verdict,
    machine_info,
    print_table,
    row_value,
    setup,
    summary_verdict,
    verdicts_only,
    write_json,
    write_json_doc,
)

from sci_moe.vision import background_shift_labels, incremental_tasks
from sci_moe.vision.cogamid import (
    GaussianMixtureMemory,
    IncrementalConfig,
    PrototypeMemory,
    SceneConfig,
    SceneGenerator,
    run_incremental,
    step_features,
)

METHODS = {
    "finetune": {"method": "finetune"},
    "prototype": {"method": "prototype"},
    "gmm_k1": {"method": "gmm", "n_components": 1},
    "gmm_k3": {"method": "gmm", "n_components": 3},
    "gmm_k3_da_grc": {
        "method": "gmm",
        "n_components": 3,
        "dynamic_adjustment": True,
        "grc_weight": 0.1,
    },
}
LABELS = {
    "finetune": "fine-tune",
    "prototype": "prototype",
    "gmm_k1": "GMM K=1",
    "gmm_k3": "GMM K=3",
    "gmm_k3_da_grc": "GMM K=3 +DA+GRC",
}
COLOURS = {
    "finetune": "C0",
    "prototype": "C1",
    "gmm_k1": "C2",
    "gmm_k3": "C3",
    "gmm_k3_da_grc": "C4",
}
BASELINE = {
    "prototype": "finetune",
    "gmm_k1": "prototype",
    "gmm_k3": "prototype",
    "gmm_k3_da_grc": "prototype",
}
WORLDS = {"multimodal": (2, 3), "unimodal": (1,)}
PREFIX = {"multimodal": "", "unimodal": "unimodal/"}


def _mean(vals) -> float:
    return float(np.mean(np.asarray(list(vals), dtype=float)))


def _std(vals) -> float:
    """Population standard deviation (NaN-propagating, unlike ``statistics.pstdev``)."""
    return float(np.std(np.asarray(list(vals), dtype=float)))


def _world_methods(world: str, quick: bool) -> list[str]:
    if world == "multimodal":
        # The DA+GRC ablation runs in --quick only (CPU budget of the full run).
        return list(METHODS) if quick else [m for m in METHODS if m != "gmm_k3_da_grc"]
    return ["prototype", "gmm_k3"]


def _config(quick: bool, seed: int, world: str = "multimodal", **kw) -> IncrementalConfig:
    modes = WORLDS[world]
    if quick:
        size = dict(
            scene=SceneConfig(image_size=32, min_size=0.3, max_size=0.5, modes_per_class=modes),
            n_train=120,
            n_test=40,
            steps=250,
            increment_steps=60,
            width=8,
            feature_dim=16,
        )
    else:
        size = dict(
            scene=SceneConfig(image_size=64, min_size=0.25, max_size=0.45, modes_per_class=modes),
            n_train=160,
            n_test=60,
            steps=400,
            increment_steps=100,
            width=8,
            feature_dim=16,
        )
    return IncrementalConfig(seed=seed, **size, **kw)


def _heldout_loglik(model, cfg: IncrementalConfig, seed: int) -> dict[str, float]:
    """Mean log-likelihood per feature dim of held-out base-class features (step-0 model)."""
    base = list(range(1, cfg.base + 1))
    gen = SceneGenerator(cfg.scene)
    g = torch.Generator().manual_seed(10_000 + seed)
    x, m = gen.generate(cfg.n_train, step=0, classes=base, generator=g)
    f, y = step_features(model, x, background_shift_labels(m, base), base, 4000, g)
    xt, mt = gen.generate(cfg.n_test, step=0, classes=base, generator=g)
    ft, yt = step_features(model, xt, mt, base, 4000, g)
    mems = {
        "gmm_k3": GaussianMixtureMemory(3, "full", reg_covar=1e-3),
        "gaussian_k1": GaussianMixtureMemory(1, "full", reg_covar=1e-3),
        "prototype": PrototypeMemory(),
    }
    out = {}
    d = f.shape[1]
    for name, mem in mems.items():
        mem.fit(f, y, base, generator=torch.Generator().manual_seed(seed))
        lls = [float(mem.log_prob(ft[yt == c], c).mean()) / d for c in base]
        out[name] = sum(lls) / len(lls)
    return out


def _example_images(cfg: IncrementalConfig, n: int = 4):
    """Fixed test scenes of the last step holding every class at least once overall."""
    last = len(incremental_tasks(cfg.scene.n_classes, cfg.base, cfg.increment)) - 1
    return SceneGenerator(cfg.scene).generate(
        n, step=last, generator=torch.Generator().manual_seed(777)
    )


def _predict(model, x: torch.Tensor, n_classes: int) -> torch.Tensor:
    with torch.no_grad():
        return model(x)[:, : n_classes + 1].argmax(1)


def _run_world(world: str, args, seeds: list[int]):
    """All methods of one world: per-step metrics, held-out log-likelihoods, examples."""
    runs: dict[str, list[list[dict]]] = {k: [] for k in _world_methods(world, args.quick)}
    ll: dict[str, list[float]] = {}
    examples: dict[str, torch.Tensor] = {}
    for seed in seeds:
        base_cfg = _config(args.quick, seed, world, method="finetune")
        base = run_incremental(base_cfg, stop_after=0)
        start = {"model": base["model"].state_dict()}
        for name, val in _heldout_loglik(base["model"], base_cfg, seed).items():
            ll.setdefault(name, []).append(val)
        if seed == seeds[0]:
            x_ex, m_ex = _example_images(base_cfg)
            examples["image"], examples["truth"] = x_ex, m_ex
        for name in runs:
            cfg = _config(args.quick, seed, world, **METHODS[name])
            out = run_incremental(cfg, start_state=start)
            runs[name].append(out["steps"])
            if seed == seeds[0]:
                examples[name] = _predict(out["model"], examples["image"], cfg.scene.n_classes)
            print(
                f"{world} seed {seed} {name}: "
                + ", ".join(f"{s['miou_all']:.3f}" for s in out["steps"]),
                flush=True,
            )
    return runs, ll, examples


def _rows(world: str, runs, ll, seeds) -> tuple[list[Row], list[list]]:
    pre = PREFIX[world]

    def stat(name, t, key):
        vals = np.array([r[t][key] for r in runs[name]], dtype=float)
        return float(vals.mean()), float(vals.std())

    n_steps = len(next(iter(runs.values()))[0])
    last = n_steps - 1
    rows: list[Row] = []
    table = []
    for name in runs:
        vs = BASELINE.get(name) if BASELINE.get(name) in runs else None
        for t in range(n_steps):
            for key in ("miou_all", "miou_old", "miou_new"):
                if t == 0 and key == "miou_old":
                    continue
                mean, std = stat(name, t, key)
                ref = stat(vs, t, key)[0] if vs and t > 0 else 0.0
                ratio = mean / ref if ref > 0 else None
                rows.append(
                    Row(f"{pre}{name}/step{t}", key, mean, "IoU", vs if t > 0 else None, ratio)
                )
                rows.append(Row(f"{pre}{name}/step{t}", key + "_std", std, "IoU"))
        for seed, r in zip(seeds, runs[name], strict=True):
            rows.append(Row(f"{pre}{name}/seed{seed}", "miou_all_last", r[last]["miou_all"], "IoU"))
        forg = [r[0]["miou_base"] - r[-1]["miou_base"] for r in runs[name]]
        f_mean = _mean(forg)
        ratio = None
        if vs:
            f_vs = _mean(r[0]["miou_base"] - r[-1]["miou_base"] for r in runs[vs])
            ratio = f_vs / f_mean if f_mean > 0 else None
        rows.append(Row(f"{pre}{name}", "forgetting_base", f_mean, "IoU", vs, ratio))
        rows.append(Row(f"{pre}{name}", "forgetting_base_std", _std(forg), "IoU"))
        table.append(
            [f"{pre}{name}"]
            + [stat(name, t, "miou_all")[0] for t in range(n_steps)]
            + [stat(name, last, "miou_old")[0], stat(name, last, "miou_new")[0], f_mean]
        )
    gaps = [
        a[last]["miou_all"] - b[last]["miou_all"]
        for a, b in zip(runs["gmm_k3"], runs["prototype"], strict=True)
    ]
    rows.append(Row(f"{pre}gmm_k3", "miou_all_last_gap_vs_prototype", _mean(gaps), "IoU"))
    rows.append(Row(f"{pre}gmm_k3", "miou_all_last_gap_vs_prototype_std", _std(gaps), "IoU"))
    rows.append(
        Row(
            f"{pre}gmm_k3",
            "seeds_above_prototype_last",
            float(sum(g > 0 for g in gaps)),
            "count",
        )
    )
    for name, vals in ll.items():
        rows.append(Row(f"{pre}heldout/{name}", "loglik_per_dim", _mean(vals), "nat"))
        rows.append(Row(f"{pre}heldout/{name}", "loglik_per_dim_std", _std(vals), "nat"))
    for name in ("gmm_k3", "gaussian_k1"):
        gain = [a - b for a, b in zip(ll[name], ll["prototype"], strict=True)]
        rows.append(
            Row(
                f"{pre}heldout/{name}",
                "loglik_gain_vs_prototype",
                _mean(gain),
                "nat",
                "prototype",
            )
        )
    gain = [a - b for a, b in zip(ll["gmm_k3"], ll["gaussian_k1"], strict=True)]
    rows.append(Row(f"{pre}heldout/gmm_k3", "loglik_gain_vs_gaussian_k1", _mean(gain), "nat"))
    rows.append(Row(f"{pre}heldout/gmm_k3", "loglik_gain_vs_gaussian_k1_std", _std(gain), "nat"))
    return rows, table


def _plots(prefix: str, results: dict, quick: bool) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    written = []
    size = "32 x 32 (quick)" if quick else "64 x 64"

    # mIoU per step, mean +- std over seeds.
    panels = [("multimodal", "miou_all"), ("multimodal", "miou_old"), ("unimodal", "miou_all")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, (world, key) in zip(axes, panels, strict=True):
        runs = results[world][0]
        for name, per_seed in runs.items():
            steps = range(len(per_seed[0]))
            ts = [t for t in steps if not (key == "miou_old" and t == 0)]
            vals = torch.tensor([[r[t][key] for t in ts] for r in per_seed])
            mean, std = vals.mean(0), vals.std(0, unbiased=False)
            ax.errorbar(
                ts, mean, yerr=std, marker="o", capsize=3, label=LABELS[name], color=COLOURS[name]
            )
        ax.set_xticks(list(steps))
        ax.set_xlabel("step (4-1: classes 1-4, +5, +6)")
        ax.set_title(f"{world}: {'all seen' if key == 'miou_all' else 'old'} classes")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mIoU (mean ± std over seeds)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"CoGaMiD benchmark, {size}")
    fig.tight_layout()
    path = prefix.with_name(prefix.name + "_miou.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # Held-out log-likelihood bars.
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    dens = [("gmm_k3", "GMM K=3"), ("gaussian_k1", "one Gaussian"), ("prototype", "prototype")]
    width = 0.27
    for i, (name, label) in enumerate(dens):
        means, stds = [], []
        for world in WORLDS:
            vals = results[world][1][name]
            means.append(_mean(vals))
            stds.append(_std(vals))
        xs = [j + (i - 1) * width for j in range(len(WORLDS))]
        ax.bar(xs, means, width, yerr=stds, capsize=3, label=label)
    ax.set_xticks(range(len(WORLDS)), [f"{w} classes" for w in WORLDS])
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylabel("held-out log-lik. / feature dim (nat)")
    ax.set_title(f"True base-class features, step-0 model ({size})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = prefix.with_name(prefix.name + "_loglik.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # Example predictions after the last step (first seed, multimodal world).
    ex = results["multimodal"][2]
    names = ["truth", *results["multimodal"][0]]
    cmap = ListedColormap(
        ["#000000", "#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#ffff33"]
    )
    n = ex["image"].shape[0]
    fig, axes = plt.subplots(n, len(names) + 1, figsize=(1.9 * (len(names) + 1), 1.9 * n))
    for i in range(n):
        axes[i, 0].imshow(ex["image"][i].permute(1, 2, 0).numpy())
        for j, name in enumerate(names):
            axes[i, j + 1].imshow(ex[name][i].numpy(), cmap=cmap, vmin=0, vmax=6)
        for a in axes[i]:
            a.set_xticks([])
            a.set_yticks([])
    axes[0, 0].set_title("image", fontsize=9)
    for j, name in enumerate(names):
        axes[0, j + 1].set_title(LABELS.get(name, "ground truth"), fontsize=9)
    fig.suptitle(
        "After step 2 (multimodal world, first seed); colours = classes 1-6, black = background",
        fontsize=9,
    )
    fig.tight_layout()
    path = prefix.with_name(prefix.name + "_predictions.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def _save_raw(path: Path, results: dict, seeds: list[int], args, wall: float, load) -> None:
    doc = {"seeds": seeds, "quick": args.quick, "wall": wall, "contention": load, "worlds": {}}
    for world, (runs, ll, ex) in results.items():
        doc["worlds"][world] = {
            "runs": runs,
            "ll": ll,
            "examples": {k: v.tolist() for k, v in ex.items()},
        }
    write_json_doc(path, doc)


def _load_raw(paths: list[Path]):
    """Merge ``--raw-out`` parts (any split of worlds and seeds) in seed order."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    if len({p["quick"] for p in parts}) != 1:
        raise SystemExit("--combine: mix of --quick and full parts; combine one kind only")
    results, seeds_of = {}, {}
    for world in WORLDS:
        have = [(p["seeds"], p["worlds"][world]) for p in parts if world in p["worlds"]]
        if not have:
            raise SystemExit(f"--combine: no part holds the {world} world")
        have.sort(key=lambda h: h[0][0])
        seeds_of[world] = [s for h in have for s in h[0]]
        runs = {k: [r for h in have for r in h[1]["runs"][k]] for k in have[0][1]["runs"]}
        ll = {k: [v for h in have for v in h[1]["ll"][k]] for k in have[0][1]["ll"]}
        ex = {k: torch.tensor(v) for k, v in have[0][1]["examples"].items()}
        results[world] = (runs, ll, ex)
    if len({tuple(v) for v in seeds_of.values()}) != 1:
        raise SystemExit(f"--combine: the worlds have different seeds {seeds_of}")
    info = {
        "quick": parts[0]["quick"],
        "wall": [p["wall"] for p in parts],
        "contention": [p["contention"] for p in parts],
    }
    return results, seeds_of["multimodal"], info


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the paper, by rules applied to the run's rows (issue 41).

    Method comparisons use the per-seed last-step mIoU rows (``<method>/seed<N>``) in
    :func:`_common.decide_verdict` (paired t-test, alpha 0.05; seed ``N`` of every method
    shares the base model). Density claims and the multimodal-vs-unimodal comparison have
    only means and population standard deviations over seeds: Welch's t-test from them
    (:func:`_common.summary_verdict`, ``ddof=0``), except GMM vs one Gaussian, whose per-seed
    gain is stored with its deviation: the paired test from it
    (:func:`_common.difference_verdict`).

    * feature replay prevents forgetting: GMM K=3 replay vs fine-tuning;
    * a GMM describes the class features better than a prototype, and than one Gaussian
      (held-out log-likelihood per dimension, multimodal world);
    * GMM replay beats prototype replay (the main claim), and K = 3 beats K = 1;
    * the gain comes from multimodal classes: the GMM-minus-prototype gap is larger in the
      multimodal world than in the unimodal control;
    * Dynamic Adjustment and GRC improve GMM replay (where the run has them).

    Fixed iteration budgets, no validation plateau: nothing is converged or decisive.
    """
    seeds = doc["machine"]["seeds"]
    n = len(seeds)

    def last(method):
        return [row_value(doc, f"{method}/seed{s}", "miou_all_last") for s in seeds]

    def compare(claim, ours, base, note=""):
        return decide_verdict(
            claim,
            metric="last-step mIoU (all classes)",
            ours=last(ours),
            baseline=base,
            baseline_values=last(base),
            higher_is_better=True,
            converged=False,
            note=note,
        )

    def stats(case, metric):
        return (row_value(doc, case, metric), row_value(doc, case, f"{metric}_std"), n)

    def density(claim, ours, base):
        return summary_verdict(
            claim,
            metric="held-out log-likelihood per dimension (nat)",
            ours=stats(f"heldout/{ours}", "loglik_per_dim"),
            baseline=base,
            baseline_stats=stats(f"heldout/{base}", "loglik_per_dim"),
            higher_is_better=True,
            converged=False,
            ddof=0,
        )

    out = [
        compare("replaying stored features prevents forgetting", "gmm_k3", "finetune"),
        density(
            "a Gaussian mixture fits the class features better than a prototype",
            "gmm_k3",
            "prototype",
        ),
        difference_verdict(
            "a Gaussian mixture fits the class features better than one Gaussian",
            metric="held-out log-likelihood per dimension (nat)",
            ours=row_value(doc, "heldout/gmm_k3", "loglik_per_dim"),
            baseline="gaussian_k1",
            baseline_value=row_value(doc, "heldout/gaussian_k1", "loglik_per_dim"),
            difference=stats("heldout/gmm_k3", "loglik_gain_vs_gaussian_k1"),
            higher_is_better=True,
            converged=False,
            ddof=0,
        ),
        compare("GMM replay gives higher mIoU than prototype replay", "gmm_k3", "prototype"),
        compare("three mixture components beat one", "gmm_k3", "gmm_k1"),
        summary_verdict(
            "the gain of GMM replay comes from multimodal classes (gap larger than in the "
            "unimodal control)",
            metric="last-step mIoU gap GMM K=3 minus prototype",
            ours=stats("gmm_k3", "miou_all_last_gap_vs_prototype"),
            baseline="the same gap with unimodal classes",
            baseline_stats=stats("unimodal/gmm_k3", "miou_all_last_gap_vs_prototype"),
            higher_is_better=True,
            converged=False,
            ddof=0,
        ),
    ]
    if any(r["case"] == f"gmm_k3_da_grc/seed{seeds[0]}" for r in doc["rows"]):
        out.append(
            compare(
                "Dynamic Adjustment and GRC improve GMM replay",
                "gmm_k3_da_grc",
                "gmm_k3",
                note="both in this package's reading of the unpublished formulas",
            )
        )
    return out


def main() -> None:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    p.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    p.add_argument("--plots", default=None, metavar="PREFIX", help="write PREFIX_*.png plots")
    p.add_argument(
        "--worlds", nargs="+", choices=list(WORLDS), default=list(WORLDS), help="worlds to run"
    )
    p.add_argument(
        "--raw-out", type=Path, default=None, help="save the raw per-seed results of this part"
    )
    p.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        default=None,
        metavar="RAW",
        help="do not run: merge --raw-out parts (run as separate processes) into one result",
    )
    args = p.parse_args()
    if verdicts_only(args) is not None:
        return
    setup(args)
    if args.combine:
        results, seeds, info = _load_raw(args.combine)
        args.quick = info["quick"]
        wall = sum(info["wall"])
        load = info["contention"]
    else:
        seeds = [args.seed + i for i in range(args.seeds)]
        probe = OtherLoad()
        t0 = time.time()
        results = {world: _run_world(world, args, seeds) for world in args.worlds}
        wall = time.time() - t0
        load = probe.report()
        if args.raw_out:
            _save_raw(args.raw_out, results, seeds, args, wall, load)
        if set(results) != set(WORLDS):
            print(f"wall time {wall:.1f} s (one part; merge the parts with --combine)")
            return
    rows: list[Row] = []
    for world, (runs, ll, _) in results.items():
        world_rows, table = _rows(world, runs, ll, seeds)
        rows += world_rows
        n_steps = len(table[0]) - 4
        print_table(
            ["method"]
            + [f"mIoU all s{t}" for t in range(n_steps)]
            + ["old (last)", "new (last)", "forgetting"],
            table,
            title=f"CoGaMiD 4-1, {world}, {len(seeds)} seeds (mean), "
            + ("quick" if args.quick else "full"),
        )
        print_table(
            ["density", "held-out loglik / dim (nat)"],
            [[k, f"{_mean(v):.3f} ± {_std(v):.3f}"] for k, v in ll.items()],
        )
    gap = {
        w: next(
            r.value
            for r in rows
            if r.case == f"{PREFIX[w]}gmm_k3" and r.metric == "miou_all_last_gap_vs_prototype"
        )
        for w in WORLDS
    }
    rows.append(
        Row("gmm_k3", "gap_multimodal_minus_unimodal", gap["multimodal"] - gap["unimodal"], "IoU")
    )
    rows.append(Row("all", "wall_time", wall, "s"))  # summed over the parts of a --combine
    print(
        f"GMM K=3 minus prototype, last-step mIoU: multimodal {gap['multimodal']:+.3f}, "
        f"unimodal {gap['unimodal']:+.3f}"
    )
    print(f"wall time {wall:.1f} s")
    if args.plots:
        for path in _plots(args.plots, results, args.quick):
            print(f"wrote {path}")
    if args.json:
        machine = machine_info(seed=seeds[0], seeds=seeds, quick=args.quick, contention=load)
        if args.combine:
            machine["parts"] = [str(p) for p in args.combine]
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, "cogamid", machine, rows, verdicts=verdicts(doc))


if __name__ == "__main__":
    main()
