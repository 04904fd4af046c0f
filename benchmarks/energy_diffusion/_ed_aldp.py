"""The alanine-dipeptide part of ``run.py`` (``--aldp``): model files scored on phi/psi.

:func:`run_aldp` evaluates each model file's i.i.d. and MD samples of the five beads
(:data:`ALDP_BEADS`) against the reference (:func:`load_aldp_reference`) and appends the
rows; :func:`plot_aldp` draws the Ramachandran histograms. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import _common
import numpy as np
import torch
from _ed_mb import UNITS, _hist2d
from _energy_diffusion import (
    langevin_with_model,
)

from sci_moe.sampling.diffusion import (
    js_divergence,
    pmf_error,
    reverse_sde_sample,
)

__all__ = [
    "ALDP_BEADS",
    "ALDP_BONDS",
    "ALDP_QUADS",
    "aldp_atom_geometry",
    "load_aldp_reference",
    "plot_aldp",
    "run_aldp",
]


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
