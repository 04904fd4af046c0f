"""The Muller-Brown part of ``run.py``: every variant trained per seed, i.i.d. and MD scored.

:func:`run_mb` draws the data and the reference, runs :func:`mb_case` per variant and seed
(train, reverse-SDE samples, Langevin MD on the model's energy, JS and PMF errors) and
appends the rows (units in :data:`UNITS`); :func:`plot_mb` draws the histograms. A helper
module: ``run.py`` imports it.
"""

from __future__ import annotations

import time
from pathlib import Path

import _common
import numpy as np
import torch
from _energy_diffusion import (
    MB_DT,
    MB_KT,
    MB_MASS,
    MB_STRIDE,
    langevin_with_model,
)

from sci_moe.data.toy import MULLER_BROWN_BOX, muller_brown_samples
from sci_moe.sampling.diffusion import (
    MUELLER_BROWN_VARIANTS,
    VPSDE,
    EnergyAtTime,
    TrainConfig,
    fp_error_curve,
    js_divergence,
    mueller_brown_model,
    mueller_brown_stages,
    pmf_error,
    reverse_sde_sample,
    train,
)

__all__ = [
    "FP_TS",
    "UNITS",
    "VARIANTS",
    "mb_case",
    "plot_mb",
    "run_mb",
]


VARIANTS = MUELLER_BROWN_VARIANTS
FP_TS = (1e-3, 1e-2, 5e-2)


def mb_case(variant, seed, data, ref, args):
    torch.manual_seed(seed)
    model = mueller_brown_model(variant)
    sde = VPSDE()
    # EMA kept aside and copied in at the end of each stage: ScoreMD's per-epoch reset
    # stalls learning with the short epochs of a CPU-sized run.
    cfg = TrainConfig(
        stages=mueller_brown_stages(variant, args.epochs, lr=3e-3),
        batch_size=args.batch,
        max_batches_per_epoch=args.batches_per_epoch,
        seed=seed,
        progress=False,
        ema_reset=False,
        device=getattr(args, "device", None),
    )
    t0 = time.perf_counter()
    out = train(model, data, sde, cfg)
    t_train = time.perf_counter() - t0
    model.cpu().eval()  # the sampling, MD and FP residual on the CPU (the reference's)
    gen = torch.Generator().manual_seed(10_000 + seed)
    x_iid = reverse_sde_sample(
        model.score,
        sde,
        (args.n_iid, 1, 2),
        n_steps=args.sde_steps,
        generator=gen,
        dtype=torch.float32,
    )
    iid = x_iid[:, 0].numpy()
    energy = EnergyAtTime(model, kT=MB_KT, scale=1.0, t_eval=1e-5)
    idx = torch.randint(len(data), (args.walkers,), generator=gen)
    md = langevin_with_model(
        energy,
        data[idx],
        torch.tensor([MB_MASS]),
        MB_KT,
        MB_DT,
        1.0,
        args.md_frames,
        MB_STRIDE,
        20_000 + seed,
    )[:, 0].numpy()
    fp = fp_error_curve(model.energy, sde, data, FP_TS, n_per_t=512, generator=gen)
    box = MULLER_BROWN_BOX
    return {
        "iid_js": js_divergence(ref, iid, 100, box),
        "iid_pmf": pmf_error(ref, iid, 64, box),
        "md_js": js_divergence(ref, md, 100, box),
        "md_pmf": pmf_error(ref, md, 64, box),
        "iid_nan": float(1 - np.isfinite(iid).all(1).mean()),
        "md_outside": float(
            1
            - (
                (md[:, 0] > box[0][0])
                & (md[:, 0] < box[0][1])
                & (md[:, 1] > box[1][0])
                & (md[:, 1] < box[1][1])
            ).mean()
        ),
        **{f"fp_t{t:g}": float(v) for t, v in zip(FP_TS, fp, strict=True)},
        "train_s": t_train,
        "final_loss": out["history"][-1]["dsm"],
        "_iid": iid,
        "_md": md,
    }


UNITS = {
    "iid_js": "nats",
    "md_js": "nats",
    "iid_pmf": "kT^2",
    "md_pmf": "kT^2",
    "train_s": "s",
    "iid_nan": "fraction",
    "md_outside": "fraction",
}


def run_mb(args, rows, table):
    n = args.n_data
    print(f"Mueller-Brown data: 2 x {n} samples (train seed 1, reference seed 2) ...", flush=True)
    data = muller_brown_samples(n, n_walkers=100, seed=1, progress=False)
    data = torch.tensor(data, dtype=torch.float32).view(-1, 1, 2)
    ref = muller_brown_samples(n, n_walkers=100, seed=2, progress=False)
    box = MULLER_BROWN_BOX
    floor = {
        "js": js_divergence(ref, data[:, 0].numpy(), 100, box),
        "pmf": pmf_error(ref, data[:, 0].numpy(), 64, box),
    }
    rows.append(_common.Row("mb/floor", "js", floor["js"], "nats"))
    rows.append(_common.Row("mb/floor", "pmf", floor["pmf"], "kT^2"))
    table.append(
        [f"mb/floor ({args.n_iid} train vs ref)", floor["js"], None, floor["pmf"], None, None, None]
    )
    results = {}
    for variant in args.variants:
        per = []
        for s in range(args.seeds):
            seed = args.seed + s
            r = mb_case(variant, seed, data, ref, args)
            per.append(r)
            print(
                f"  {variant} seed {seed}: iid JS {r['iid_js']:.4f} MD JS {r['md_js']:.4f} "
                f"iid PMF {r['iid_pmf']:.3f} MD PMF {r['md_pmf']:.3f} "
                f"fp(1e-3) {r['fp_t0.001']:.3g} train {r['train_s']:.0f} s",
                flush=True,
            )
        results[variant] = per
    for variant, per in results.items():
        keys = [k for k in per[0] if not k.startswith("_")]
        mean = {k: float(np.mean([p[k] for p in per])) for k in keys}
        std = {k: float(np.std([p[k] for p in per])) for k in keys}
        for k in keys:
            vs, ratio = None, None
            if (
                variant != "plain"
                and "plain" in results
                and k in ("md_js", "md_pmf", "iid_js", "iid_pmf")
            ):
                base = float(np.mean([p[k] for p in results["plain"]]))
                vs, ratio = "mb/plain", base / mean[k] if mean[k] > 0 else None
            rows.append(_common.Row(f"mb/{variant}", k, mean[k], UNITS.get(k, "-"), vs, ratio))
            rows.append(_common.Row(f"mb/{variant}", k + "_std", std[k], UNITS.get(k, "-")))
            for i, p in enumerate(per):
                rows.append(
                    _common.Row(
                        f"mb/{variant}/seed{args.seed + i}", k, float(p[k]), UNITS.get(k, "-")
                    )
                )
        table.append(
            [
                f"mb/{variant}",
                mean["iid_js"],
                mean["md_js"],
                mean["iid_pmf"],
                mean["md_pmf"],
                mean["fp_t0.001"],
                mean["train_s"],
            ]
        )
    if args.plots:
        plot_mb(results, ref, Path(args.plots))
    return results


def _hist2d(ax, xy, box, title):
    h, _, _ = np.histogram2d(xy[:, 0], xy[:, 1], bins=80, range=box, density=True)
    f = -np.log(np.where(h > 0, h, np.nan))
    ax.imshow(
        (f - np.nanmin(f)).T,
        origin="lower",
        extent=[*box[0], *box[1]],
        aspect="auto",
        vmax=8,
        cmap="viridis",
    )
    ax.set_title(title, fontsize=9)


def plot_mb(results, ref, out: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    vs = list(results)
    fig, axes = plt.subplots(2, len(vs) + 1, figsize=(3 * (len(vs) + 1), 5.6))
    box = MULLER_BROWN_BOX
    _hist2d(axes[0, 0], ref, box, "reference")
    axes[1, 0].axis("off")
    for j, v in enumerate(vs):
        r = results[v][0]
        _hist2d(axes[0, j + 1], r["_iid"], box, f"{v}: iid (JS {r['iid_js']:.3f})")
        _hist2d(axes[1, j + 1], r["_md"], box, f"{v}: MD (JS {r['md_js']:.3f})")
    fig.suptitle("Mueller-Brown free energy -log p (kT), first seed")
    fig.tight_layout()
    fig.savefig(out / "energy_diffusion_mb.png", dpi=90)
    plt.close(fig)
