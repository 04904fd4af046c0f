"""Energy-based diffusion with and without the Fokker-Planck regulariser (ScoreMD).

Reproduces, at CPU scale, the central claim of Plainer et al. (NeurIPS 2025, arXiv
2506.17139): a diffusion model with an energy-parameterised score gives good i.i.d. samples,
but Langevin dynamics with its forces at t -> 0 is much worse unless the Fokker-Planck (FP)
residual is regularised; with FP (and/or a time mixture whose small-t expert is the force
field) simulation and i.i.d. metrics agree.

Mueller-Brown (kT = 23, ScoreMD's data recipe), four variants x seeds:

* ``plain``: one MLP energy (3 x 92, SiLU) on t in [1e-5, 1], DSM only (mid 0.5);
* ``fp``: the same with the two-probe FP term, weight 5e-4;
* ``moe``: time mixture (score MLPs on [0.6, 1] and [0.099, 0.6], energy MLP on
  [1e-5, 0.099]) trained high t first, DSM only;
* ``both``: the mixture with FP (5e-4) on the small-t energy expert.

Metrics against an independent reference run (ScoreMD's definitions, see
:mod:`sci_moe.sampling.diffusion.metrics`): JS divergence (100 x 100 bins on the box) and
PMF error (64 bins, (kT)^2, no root) of i.i.d. samples (reverse SDE, Euler-Maruyama) and of
Langevin dynamics with the learned forces; the FP residual sqrt(E r^2)/D at small t;
training time. ``floor`` compares the training data itself with the reference.

Alanine dipeptide (``--aldp MODEL.safetensors``): phi/psi JS and PMF of i.i.d. samples and
Langevin MD with the shipped model against the reference data, and bond-length
Wasserstein distances. The atoms a model describes come from its metadata
(``atom_indices``: the 5 beads by default, or e.g. the 10 heavy atoms of
``scripts/train_alanine_energy_model.py --atoms heavy``); phi/psi are taken on
:data:`~sci_moe.sampling.md.PHI_ATOMS` / ``PSI_ATOMS`` within them and the bond
W1 on the topology's bonds between them. ``--aldp-plot-name`` names the PNG.

Run: ``python benchmarks/energy_diffusion/run.py --json
benchmarks/energy_diffusion/results/energy_diffusion.json --plots docs/results/img``
(``--quick`` for a reduced run). :func:`verdicts` decides the paper's claims from the rows
and writes them into the JSON; ``--verdicts-only PATH`` recomputes a stored JSON's verdicts
(no training); ``--quoted-only PATH`` marks a stored paper-budget JSON's ScoreMD figures
(quoted from issue 28, not measured in that run) as quoted rows
(:func:`_energy_diffusion_paper.quoted_rows`)."""

from __future__ import annotations

import math
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

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
from _energy_diffusion_paper import PAPER, SCOREMD_SOURCE, quoted_rows, run_paper_budget

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
    )
    t0 = time.perf_counter()
    out = train(model, data, sde, cfg)
    t_train = time.perf_counter() - t0
    model.eval()
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


# ------------------------------------------------------------------ alanine dipeptide

ALDP_BEADS = (4, 6, 8, 14, 16)  # C(ACE), N, CA, C, N(NME)
ALDP_QUADS = [(0, 1, 2, 3), (1, 2, 3, 4)]  # phi, psi on the beads
ALDP_BONDS = [(0, 1), (1, 2), (2, 3), (3, 4)]


def load_aldp_reference(path: str, atoms=ALDP_BEADS) -> np.ndarray:
    """Positions (F, len(atoms), 3) nm from the reference .npz (or its running checkpoint)."""
    p = Path(path)
    if not p.exists():
        p = p.with_name(p.name + ".ckpt.npz")
    if not p.exists():
        raise SystemExit(f"no alanine reference at {path}")
    with np.load(p) as f:
        n = int(f["frames_done"]) if "frames_done" in f else len(f["positions"])
        return f["positions"][:n][:, list(atoms)].astype(np.float64)


def aldp_atom_geometry(atoms) -> tuple[list, list]:
    """phi/psi quadruples and bonds (sorted topology bonds) in a model's atom subset.

    ``atoms`` are all-atom indices (the model's ``atom_indices``); the results index into
    them. For the 5 beads this gives :data:`ALDP_QUADS` and :data:`ALDP_BONDS`.
    """
    from openmm import app

    from sci_moe.sampling.md import PHI_ATOMS, PSI_ATOMS, alanine_dipeptide_pdb

    pos = {int(a): k for k, a in enumerate(atoms)}
    missing = sorted(set(PHI_ATOMS + PSI_ATOMS) - set(pos))
    if missing:
        raise SystemExit(f"model atoms {list(atoms)} lack the phi/psi atoms {missing}")
    quads = [tuple(pos[a] for a in PHI_ATOMS), tuple(pos[a] for a in PSI_ATOMS)]
    top = app.PDBFile(str(alanine_dipeptide_pdb())).topology
    pairs = sorted(tuple(sorted((b[0].index, b[1].index))) for b in top.bonds())
    bonds = [(pos[i], pos[j]) for i, j in pairs if i in pos and j in pos]
    return quads, bonds


def run_aldp(args, rows, table):
    from sci_moe.sampling.diffusion import bond_wasserstein, load_diffusion_model, load_energy_model
    from sci_moe.sampling.md import dihedrals

    ref = load_aldp_reference(args.aldp_reference)
    ref_pp = dihedrals(ref, ALDP_QUADS)
    ref_by_atoms = {tuple(ALDP_BEADS): (ref, ALDP_QUADS, ALDP_BONDS)}
    print(f"alanine reference: {len(ref)} frames", flush=True)
    rows.append(_common.Row("aldp/reference", "frames", float(len(ref)), "frames (1 ps apart)"))
    half = len(ref) // 2
    floor_js = js_divergence(ref_pp[:half], ref_pp[half:], 64)
    rows.append(_common.Row("aldp/floor (half vs half)", "js", floor_js, "nats"))
    rows.append(
        _common.Row(
            "aldp/floor (half vs half)", "pmf", pmf_error(ref_pp[:half], ref_pp[half:], 64), "kT^2"
        )
    )
    table.append(["aldp/floor (1st vs 2nd half)", floor_js, None, rows[-1].value, None, None, None])
    results = {}
    n_atoms = {}
    for spec in args.aldp.split(","):
        name, path = spec.split("=") if "=" in spec else (Path(spec).stem, spec)
        model, sde, cfg = load_diffusion_model(path)
        nf = cfg["scale"]
        atoms = tuple(cfg.get("atom_indices") or ALDP_BEADS)
        if atoms not in ref_by_atoms:
            ref_by_atoms[atoms] = (
                load_aldp_reference(args.aldp_reference, atoms),
                *aldp_atom_geometry(atoms),
            )
        ref_m, quads, bonds = ref_by_atoms[atoms]
        n_atoms[name] = len(atoms)
        gen = torch.Generator().manual_seed(args.seed)
        t0 = time.perf_counter()
        x = reverse_sde_sample(
            model.score, sde, (args.aldp_iid, len(atoms), 3), n_steps=args.sde_steps, generator=gen
        )
        ok = torch.isfinite(x).flatten(1).all(1)
        iid = (x[ok] / nf).double().numpy()
        t_iid = time.perf_counter() - t0
        energy, masses, _, _ = load_energy_model(path)
        starts = torch.tensor(
            ref_m[torch.randint(len(ref_m), (args.aldp_walkers,), generator=gen).numpy()],
            dtype=torch.float32,
        )
        t0 = time.perf_counter()
        md = langevin_with_model(
            energy,
            starts,
            masses,
            cfg["kT"],
            0.002,
            1.0,
            args.aldp_frames,
            args.aldp_stride,
            args.seed + 1,
        )
        t_md = time.perf_counter() - t0
        md = md.double().numpy()
        md = md[np.isfinite(md).all((1, 2))]
        pp_iid = dihedrals(iid, quads) if len(iid) else np.zeros((0, 2))
        pp_md = dihedrals(md, quads) if len(md) else np.zeros((0, 2))
        nan = float("nan")
        r = {
            "iid_js": js_divergence(ref_pp, pp_iid, 64) if len(iid) else nan,
            "iid_pmf": pmf_error(ref_pp, pp_iid, 64) if len(iid) else nan,
            "md_js": js_divergence(ref_pp, pp_md, 64) if len(md) else nan,
            "md_pmf": pmf_error(ref_pp, pp_md, 64) if len(md) else nan,
            "iid_nan": float(1 - ok.double().mean()),
            "iid_bond_w1_mean": float(bond_wasserstein(ref_m, iid, bonds).mean())
            if len(iid)
            else nan,
            "md_bond_w1_mean": float(bond_wasserstein(ref_m, md, bonds).mean()) if len(md) else nan,
            "iid_s": t_iid,
            "md_s": t_md,
            "md_ns": args.aldp_walkers * args.aldp_frames * args.aldp_stride * 2e-6,
            "train_s": float(cfg.get("extra", {}).get("train_seconds", float("nan"))),
            "_iid": pp_iid,
            "_md": pp_md,
        }
        results[name] = r
        units = {
            **UNITS,
            "iid_bond_w1_mean": "nm",
            "md_bond_w1_mean": "nm",
            "iid_s": "s",
            "md_s": "s",
            "md_ns": "ns",
        }
        for k, v in r.items():
            if not k.startswith("_"):
                rows.append(_common.Row(f"aldp/{name}", k, float(v), units.get(k, "-")))
        table.append(
            [f"aldp/{name}", r["iid_js"], r["md_js"], r["iid_pmf"], r["md_pmf"], None, r["train_s"]]
        )
        print(
            f"  aldp {name}: iid JS {r['iid_js']:.4f} MD JS {r['md_js']:.4f} "
            f"iid PMF {r['iid_pmf']:.3f} MD PMF {r['md_pmf']:.3f}",
            flush=True,
        )
    if args.plots:
        sizes = set(n_atoms.values())
        what = "5 beads" if sizes == {5} else " / ".join(f"{k} atoms" for k in sorted(sizes))
        plot_aldp(results, ref_pp, Path(args.plots), args.aldp_plot_name, what)
    return results


def plot_aldp(
    results, ref_pp, out: Path, name: str = "energy_diffusion_aldp.png", what: str = "5 beads"
):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    box = ((-math.pi, math.pi), (-math.pi, math.pi))
    names = list(results)
    fig, axes = plt.subplots(len(names), 3, figsize=(9, 3 * len(names)), squeeze=False)
    for i, n in enumerate(names):
        r = results[n]
        _hist2d(axes[i, 0], ref_pp, box, "reference")
        _hist2d(axes[i, 1], r["_iid"], box, f"{n}: iid (JS {r['iid_js']:.3f})")
        _hist2d(axes[i, 2], r["_md"], box, f"{n}: MD (JS {r['md_js']:.3f})")
        for ax in axes[i]:
            ax.set_xlabel("phi")
            ax.set_ylabel("psi")
    fig.suptitle(f"Alanine dipeptide ({what}) Ramachandran free energy (kT)")
    fig.tight_layout()
    fig.savefig(out / name, dpi=90)
    plt.close(fig)


#: "MD agrees with i.i.d.": the MD JS at most this multiple of the i.i.d. JS (issue 28).
AGREE_FACTOR = 1.5


def verdicts(doc: dict) -> list[dict]:
    """The paper's central claims, by rules applied to the run's rows (issue 41).

    Per seed, the JS divergence of MD with the learned forces and of i.i.d. samples
    (Mueller-Brown at the paper's budget: ScoreMD's JS definition; alanine: phi/psi JS),
    for the models without FP (``plain`` / ``moe``) and with it (``fp`` / ``both``):

    * without FP, MD is worse than i.i.d.: MD JS vs i.i.d. JS of the same models,
      :func:`_common.decide_verdict` over the paired seeds (a run with one seed: not
      decided);
    * with FP, MD agrees with i.i.d.: reproduced when MD JS is within a factor
      :data:`AGREE_FACTOR` of the i.i.d. JS (either way) in every seed, contradicted when
      in none, not decided otherwise;
    * FP improves MD: MD JS with FP vs without, paired over seeds.

    Training has a fixed budget and no validation plateau is recorded: not decisive.
    A JSON of neither kind (the superseded small run) gets no verdicts.
    """
    cases = {r["case"] for r in doc["rows"]}
    val = {(r["case"], r["metric"]): r["value"] for r in doc["rows"]}
    if any(c.startswith("mb_paper/") for c in cases):
        pairs = [(a, b) for a, b in (("plain", "fp"), ("moe", "both")) if f"mb_paper/{a}" in cases]
        metric = ("md_js_scoremd", "iid_js_scoremd")

        def seeds(v):
            return sorted(
                int(c.rsplit("seed", 1)[1]) for c in cases if c.startswith(f"mb_paper/{v}/seed")
            )

        def case(v, s):
            return f"mb_paper/{v}/seed{s}"

        where = "Mueller-Brown"
    elif any(c.startswith("aldp/") for c in cases):
        heavy = any(re.fullmatch(r"aldp/moe_heavy_seed\d+", c) for c in cases)
        pairs = [("moe_heavy", "both_heavy")] if heavy else [("moe", "both")]
        metric = ("md_js", "iid_js")

        def seeds(v):
            found = (re.fullmatch(rf"aldp/{v}_seed(\d+)", c) for c in cases)
            return sorted(int(m.group(1)) for m in found if m)

        def case(v, s):
            return f"aldp/{v}_seed{s}"

        where = "alanine dipeptide"
    else:
        return []
    md, iid = metric
    out = []
    for plain, fp in pairs:
        ss = seeds(plain)
        md_plain = [val[(case(plain, s), md)] for s in ss]
        iid_plain = [val[(case(plain, s), iid)] for s in ss]
        md_fp = [val[(case(fp, s), md)] for s in seeds(fp)]
        iid_fp = [val[(case(fp, s), iid)] for s in seeds(fp)]
        tag = f"{where}, {plain} / {fp}"
        for claim, ours, base, name in (
            (
                "without FP, MD is worse than i.i.d. sampling",
                md_plain,
                iid_plain,
                f"i.i.d. samples of the same {plain} models",
            ),
            ("FP improves MD", md_fp, md_plain, f"MD without FP ({plain})"),
        ):
            if len(ss) >= 2 and len(ours) == len(base):
                out.append(
                    _common.decide_verdict(
                        f"{claim} ({tag})",
                        metric=md,
                        ours=ours,
                        baseline=name,
                        baseline_values=base,
                        higher_is_better=False,
                        converged=False,
                        expect="better" if claim.startswith("FP") else "worse",
                    )
                )
            else:
                out.append(
                    _common.verdict_entry(
                        f"{claim} ({tag})",
                        verdict="not decided",
                        why=f"{md} {sum(ours) / len(ours):.4g} vs {sum(base) / len(base):.4g}; "
                        "one seed in this run: nothing to test (the other seeds are in "
                        "other runs)",
                        metric=md,
                        ours=sum(ours) / len(ours),
                        baseline=name,
                        baseline_value=sum(base) / len(base),
                        seeds=len(ss),
                        p_value=None,
                        converged=False,
                        decisive=False,
                    )
                )
        ratios = [m / i for m, i in zip(md_fp, iid_fp, strict=True)]
        inside = sum(1 / AGREE_FACTOR <= r <= AGREE_FACTOR for r in ratios)
        verdict = (
            "reproduced"
            if inside == len(ratios)
            else "contradicted"
            if inside == 0
            else "not decided"
        )
        out.append(
            _common.verdict_entry(
                f"with FP, MD agrees with i.i.d. sampling ({tag})",
                verdict=verdict,
                why=f"MD / i.i.d. JS per seed {', '.join(f'{r:.3g}' for r in ratios)}: "
                f"{inside} of {len(ratios)} within a factor {AGREE_FACTOR} (rule: all reproduce, "
                "none contradict)",
                metric=f"{md} / {iid}",
                ours=max(ratios),
                baseline=f"agreement within {AGREE_FACTOR}x",
                baseline_value=AGREE_FACTOR,
                seeds=len(ratios),
                p_value=None,
                converged=False,
                decisive=False,
            )
        )
    return out


def main() -> None:
    p = _common.base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--plots", default="", help="folder for PNGs, e.g. docs/results/img")
    p.add_argument(
        "--aldp", default=None, help="alanine model files to evaluate, NAME=PATH[,NAME=PATH...]"
    )
    p.add_argument("--skip-mb", action="store_true", help="only the alanine part")
    p.add_argument("--aldp-reference", default="/work/data/alanine_reference.npz")
    p.add_argument(
        "--aldp-plot-name", default="energy_diffusion_aldp.png", help="PNG name for --aldp"
    )
    p.add_argument(
        "--paper-budget",
        action="store_true",
        help="Mueller-Brown at ScoreMD's budget (_energy_diffusion_paper.py); --quick shrinks it",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="--paper-budget: epochs (default ScoreMD's 180; fewer = a stated reduced budget)",
    )
    p.add_argument("--paper-seeds", default="1", help="--paper-budget: seeds, e.g. 1,2,3")
    p.add_argument(
        "--paper-iid",
        type=int,
        nargs=2,
        default=(100_000, 1000),
        metavar=("N", "STEPS"),
        help="--paper-budget: i.i.d. samples and reverse-SDE steps (ScoreMD: 100k)",
    )
    p.add_argument(
        "--paper-md",
        type=int,
        nargs=2,
        default=(100, 1000),
        metavar=("WALKERS", "FRAMES"),
        help="--paper-budget: Langevin walkers and frames (x 50 steps; ScoreMD: 100k frames)",
    )
    p.add_argument(
        "--eager",
        action="store_true",
        help="--paper-budget: train with the eager step (default: TrainConfig(compile=True))",
    )
    p.add_argument(
        "--work-dir",
        default="benchmarks/.energy_diffusion_paper",
        help="--paper-budget: checkpoints and per-case results (a rerun resumes)",
    )
    p.add_argument(
        "--quoted-only",
        type=Path,
        default=None,
        metavar="JSON",
        help="mark a stored paper-budget JSON's ScoreMD figures as quoted rows (no training)",
    )
    args = p.parse_args()
    if _common.verdicts_only(args) is not None:
        return
    if args.quoted_only is not None:
        _common.rederive_rows(args.quoted_only, quoted_rows)
        return
    args.variants = [v for v in args.variants.split(",") if v]
    bad = set(args.variants) - set(VARIANTS)
    if bad:
        raise SystemExit(f"unknown variants {bad}; choose from {VARIANTS}")
    policy = _common.setup(args)
    if args.paper_budget:
        return _paper_main(args, policy)
    if args.quick:
        args.n_data, args.epochs, args.batch, args.batches_per_epoch = 20_000, 4, 256, 100
        args.n_iid, args.sde_steps, args.walkers, args.md_frames = 4000, 200, 100, 40
        args.aldp_iid, args.aldp_walkers, args.aldp_frames, args.aldp_stride = 1000, 50, 50, 50
    else:
        args.n_data, args.epochs, args.batch, args.batches_per_epoch = 50_000, 15, 256, 100
        args.n_iid, args.sde_steps, args.walkers, args.md_frames = 10_000, 500, 200, 50
        args.aldp_iid, args.aldp_walkers, args.aldp_frames, args.aldp_stride = 10_000, 100, 300, 50
    rows: list[_common.Row] = []
    table: list[list] = []
    t0 = time.perf_counter()
    if not args.skip_mb:
        run_mb(args, rows, table)
    if args.aldp:
        run_aldp(args, rows, table)
    _common.print_table(
        ["case", "iid JS", "MD JS", "iid PMF", "MD PMF", "FP r(1e-3)", "train s"],
        table,
        title=f"Energy diffusion; Mueller-Brown: {args.seeds} seeds (means)",
    )
    machine = _common.machine_info(
        seed=args.seed,
        quick=args.quick,
        malloc=policy,
        seeds=args.seeds,
        epochs=args.epochs,
        batch=args.batch,
        batches_per_epoch=args.batches_per_epoch,
        n_data=args.n_data,
        wall_s=time.perf_counter() - t0,
    )
    if args.json:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        _common.write_json(args.json, "energy_diffusion", machine, rows, verdicts=verdicts(doc))


def _paper_main(args, policy: str) -> None:
    other, t0 = _common.OtherLoad(), time.perf_counter()
    args.paper_seeds = [int(s) for s in args.paper_seeds.split(",") if s]
    args.n_data, args.steps_per_epoch = PAPER["n_data"], PAPER["steps_per_epoch"]
    args.epochs = args.epochs or (2 if args.quick else PAPER["epochs"])
    args.n_iid, args.sde_steps = args.paper_iid
    args.walkers, args.md_frames = args.paper_md
    args.speed_steps = 300
    if args.quick:
        args.n_data, args.steps_per_epoch = 4000, 10
        args.n_iid, args.sde_steps, args.walkers, args.md_frames = 2000, 50, 20, 20
        args.speed_steps = 20
    rows = run_paper_budget(args)
    machine = _common.machine_info(
        seed=args.seed,
        quick=args.quick,
        malloc=policy,
        paper_seeds=args.paper_seeds,
        variants=args.variants,
        epochs=args.epochs,
        paper_epochs=PAPER["epochs"],
        budget_fraction=args.epochs / PAPER["epochs"],
        steps_per_epoch=args.steps_per_epoch,
        n_data=args.n_data,
        n_iid=args.n_iid,
        sde_steps=args.sde_steps,
        md_walkers_x_frames=[args.walkers, args.md_frames],
        ema="ema_decay=0.005 (ScoreMD's 'EMA 0.995'), reset every epoch",
        compiled=not args.eager,
        scoremd_source=SCOREMD_SOURCE,
    )
    _common.finish(args, "energy_diffusion_paper", machine, rows, other, t0)
    if args.json is not None:  # the verdicts, by the same rule as --verdicts-only
        _common.rederive_verdicts(args.json, verdicts)


if __name__ == "__main__":
    main()
