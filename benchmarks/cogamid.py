"""CoGaMiD (issue 21): Gaussian-mixture feature replay vs prototypes vs fine-tuning.

Class-incremental segmentation of procedural multimodal scenes (6 classes, 2-3 modes per
class, colour drift across steps), protocol 4-1 (base classes 1-4, then 5, then 6), with
the background-shift rule. Per seed one base model is trained on step 0 and shared by all
methods; then every method runs steps 1 and 2:

* ``finetune``: cross-entropy on the shifted labels only (no memory);
* ``prototype``: STAR-like replay of one prototype per old class;
* ``gmm_k1``: replay from one full-covariance Gaussian per class;
* ``gmm_k3``: CoGaMiD replay from a 3-component full-covariance mixture per class;
* ``gmm_k3_da_grc``: the same with Dynamic Adjustment (threshold 0.7) and the GRC loss
  (weight 0.1), both in this package's reading of the unpublished formulas.

Reported (mean over seeds, and the standard deviation): mIoU over all / old / new classes
after every step, forgetting of the base classes (mIoU at step 0 minus at the last step),
and the held-out log-likelihood per feature dimension of true base-class features (test
pixels, step-0 model) under the GMM (K = 3), a single Gaussian and the prototype
(isotropic Gaussian at the class mean).

    python benchmarks/cogamid.py --quick --json benchmarks/results/cogamid_quick.json
"""

from __future__ import annotations

import statistics
import time

import torch
from _common import Row, base_parser, machine_info, print_table, setup, write_json

from sci_moe.vision import (
    GaussianMixtureMemory,
    IncrementalConfig,
    PrototypeMemory,
    SceneConfig,
    SceneGenerator,
    background_shift_labels,
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
BASELINE = {
    "prototype": "finetune",
    "gmm_k1": "prototype",
    "gmm_k3": "prototype",
    "gmm_k3_da_grc": "prototype",
}


def _config(quick: bool, seed: int, **kw) -> IncrementalConfig:
    if quick:
        size = dict(
            scene=SceneConfig(image_size=32, min_size=0.3, max_size=0.5),
            n_train=120,
            n_test=40,
            base_iters=250,
            step_iters=60,
            width=8,
            feature_dim=16,
        )
    else:
        size = dict(
            scene=SceneConfig(image_size=64, min_size=0.25, max_size=0.45),
            n_train=200,
            n_test=60,
            base_iters=400,
            step_iters=120,
            width=12,
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


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    args = p.parse_args()
    setup(args)
    seeds = [args.seed + i for i in range(args.seeds)]
    t0 = time.time()
    runs: dict[str, list[list[dict]]] = {k: [] for k in METHODS}
    ll: dict[str, list[float]] = {}
    for seed in seeds:
        base_cfg = _config(args.quick, seed, method="finetune")
        base = run_incremental(base_cfg, stop_after=0)
        start = {"model": base["model"].state_dict()}
        for name, val in _heldout_loglik(base["model"], base_cfg, seed).items():
            ll.setdefault(name, []).append(val)
        for name, kw in METHODS.items():
            out = run_incremental(_config(args.quick, seed, **kw), start_state=start)
            runs[name].append(out["steps"])
            print(f"seed {seed} {name}: " + ", ".join(f"{s['miou_all']:.3f}" for s in out["steps"]))
    wall = time.time() - t0

    def stat(name, t, key):
        vals = [r[t][key] for r in runs[name]]
        return statistics.mean(vals), statistics.pstdev(vals)

    n_steps = len(runs["finetune"][0])
    rows: list[Row] = []
    table = []
    for name in METHODS:
        for t in range(n_steps):
            for key in ("miou_all", "miou_old", "miou_new"):
                if t == 0 and key == "miou_old":
                    continue
                mean, std = stat(name, t, key)
                vs = BASELINE.get(name)
                ref = stat(vs, t, key)[0] if vs and t > 0 else 0.0
                ratio = mean / ref if ref > 0 else None
                rows.append(Row(f"{name}/step{t}", key, mean, "IoU", vs if t > 0 else None, ratio))
                rows.append(Row(f"{name}/step{t}", key + "_std", std, "IoU"))
        forg = [r[0]["miou_base"] - r[-1]["miou_base"] for r in runs[name]]
        f_mean = statistics.mean(forg)
        vs = BASELINE.get(name)
        ratio = None
        if vs:
            f_vs = statistics.mean(r[0]["miou_base"] - r[-1]["miou_base"] for r in runs[vs])
            ratio = f_vs / f_mean if f_mean > 0 else None
        rows.append(Row(name, "forgetting_base", f_mean, "IoU", vs, ratio))
        rows.append(Row(name, "forgetting_base_std", statistics.pstdev(forg), "IoU"))
        last = n_steps - 1
        table.append(
            [name]
            + [f"{stat(name, t, 'miou_all')[0]:.3f}" for t in range(n_steps)]
            + [f"{stat(name, last, 'miou_old')[0]:.3f}", f"{stat(name, last, 'miou_new')[0]:.3f}"]
            + [f"{f_mean:.3f}"]
        )
    for name, vals in ll.items():
        rows.append(Row(f"heldout/{name}", "loglik_per_dim", statistics.mean(vals), "nat"))
        rows.append(Row(f"heldout/{name}", "loglik_per_dim_std", statistics.pstdev(vals), "nat"))
    for name in ("gmm_k3", "gaussian_k1"):
        gain = [a - b for a, b in zip(ll[name], ll["prototype"], strict=True)]
        rows.append(
            Row(
                f"heldout/{name}",
                "loglik_gain_vs_prototype",
                statistics.mean(gain),
                "nat",
                "prototype",
            )
        )
    rows.append(Row("all", "wall_time", wall, "s"))
    print_table(
        ["method"]
        + [f"mIoU all s{t}" for t in range(n_steps)]
        + ["old (last)", "new (last)", "forgetting"],
        table,
        title=f"CoGaMiD 4-1, {len(seeds)} seeds (mean), {'quick' if args.quick else 'full'}",
    )
    print_table(
        ["density", "held-out loglik / dim (nat)"],
        [[k, f"{statistics.mean(v):.3f} ± {statistics.pstdev(v):.3f}"] for k, v in ll.items()],
    )
    print(f"wall time {wall:.1f} s")
    if args.json:
        write_json(
            args.json, "cogamid", machine_info(seed=args.seed, seeds=seeds, quick=args.quick), rows
        )


if __name__ == "__main__":
    main()
