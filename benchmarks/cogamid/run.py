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
``--verdicts-only PATH`` recomputes a stored JSON's verdicts (no training). ``--device
cuda`` trains and scores the networks on a GPU (default cpu, the reference of the stored
results; the scenes and the class memories stay on the CPU); the JSON's machine record
(and a ``--raw-out`` part) notes it for information.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _cogamid_plots import _plots
from _cogamid_rows import PREFIX, WORLDS, _mean, _rows, _std
from _cogamid_verdicts import verdicts
from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    print_table,
    setup,
    verdicts_only,
    write_json,
    write_json_doc,
)

from sci_moe._util import module_device
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


def _world_methods(world: str, quick: bool) -> list[str]:
    if world == "multimodal":
        # The DA+GRC ablation runs in --quick only (CPU budget of the full run).
        return list(METHODS) if quick else [m for m in METHODS if m != "gmm_k3_da_grc"]
    return ["prototype", "gmm_k3"]


def _config(
    quick: bool, seed: int, world: str = "multimodal", device: str = "cpu", **kw
) -> IncrementalConfig:
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
    return IncrementalConfig(seed=seed, device=device, **size, **kw)


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
    """The predicted classes (on the CPU) of images ``x`` (moved to the model's device)."""
    with torch.no_grad():
        return model(x.to(module_device(model)))[:, : n_classes + 1].argmax(1).cpu()


def _run_world(world: str, args, seeds: list[int]):
    """All methods of one world: per-step metrics, held-out log-likelihoods, examples."""
    runs: dict[str, list[list[dict]]] = {k: [] for k in _world_methods(world, args.quick)}
    ll: dict[str, list[float]] = {}
    examples: dict[str, torch.Tensor] = {}
    for seed in seeds:
        base_cfg = _config(args.quick, seed, world, args.device, method="finetune")
        base = run_incremental(base_cfg, stop_after=0)
        start = {"model": base["model"].state_dict()}
        for name, val in _heldout_loglik(base["model"], base_cfg, seed).items():
            ll.setdefault(name, []).append(val)
        if seed == seeds[0]:
            x_ex, m_ex = _example_images(base_cfg)
            examples["image"], examples["truth"] = x_ex, m_ex
        for name in runs:
            cfg = _config(args.quick, seed, world, args.device, **METHODS[name])
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


def _save_raw(path: Path, results: dict, seeds: list[int], args, wall: float, load) -> None:
    doc = {
        "seeds": seeds,
        "quick": args.quick,
        "device": args.device,
        "wall": wall,
        "contention": load,
        "worlds": {},
    }
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
        "device": sorted({p.get("device", "cpu") for p in parts}),
    }
    return results, seeds_of["multimodal"], info


def main() -> None:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
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
        # where the networks trained, for information (the memories stay on the CPU)
        machine["device"] = info["device"] if args.combine else args.device
        if args.combine:
            machine["parts"] = [str(p) for p in args.combine]
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, "cogamid", machine, rows, verdicts=verdicts(doc))


if __name__ == "__main__":
    main()
