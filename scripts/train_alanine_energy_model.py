"""Train the shipped alanine-dipeptide energy diffusion model (5-bead coarse-grained).

ScoreMD's alanine-dipeptide setup (Plainer et al., NeurIPS 2025) at CPU scale: the five
backbone beads C(ACE), N, CA, C, N(NME) (all-atom indices 4, 6, 8, 14, 16) of an OpenMM
reference trajectory (amber99sbildn + OBC, 300 K; written by
:func:`sci_moe.data.alanine_dipeptide.generate_reference`), centred and scaled by
``nf = 1/std``; VP SDE; a time mixture of three SE(3)-invariant MLP energies
(:class:`~sci_moe.sampling.diffusion.InvariantMLPEnergy`: pairwise distances + signed
volumes, so chirality is seen) on t in [0.6, 1], [0.099, 0.6], [1e-5, 0.099], trained high t
first (10/20/70 % of the epochs, mids 0.8/0.35/0.03) with the Fokker-Planck regulariser
(weight 1e-3, ScoreMD's "Both" for ALDP) on the small-t expert, which is the force field.

``--atoms heavy`` trains the same recipe on the 10 heavy atoms (:data:`HEAVY_ATOMS`, which
contain the phi/psi atoms) instead of the 5 beads.

Writes a model file (:func:`~sci_moe.sampling.diffusion.save_energy_model`) usable by
``sci-moe md run --model FILE``; energies in kJ/mol for bead positions in nm at t = 1e-5.

Example::

    OMP_NUM_THREADS=1 python scripts/train_alanine_energy_model.py \\
        --data /work/data/alanine_reference.npz --variant both --epochs 80 \\
        --out sci_moe/sampling/files/alanine_energy_model.safetensors
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from sci_moe._util import BOLTZMANN_KJ_PER_MOL_K
from sci_moe.sampling.diffusion import (
    VPSDE,
    InvariantMLPEnergy,
    Stage,
    TimeMixture,
    TrainConfig,
    save_energy_model,
    train,
)
from sci_moe.sampling.md import ATOM_NAMES, BACKBONE_ATOMS, HEAVY_ATOMS

KB = BOLTZMANN_KJ_PER_MOL_K  # kJ/mol/K
RANGES = [(0.6, 1.0), (0.099, 0.6), (1e-5, 0.099)]
VARIANTS = ("plain", "fp", "moe", "both")
ATOM_SETS = {
    "backbone": (BACKBONE_ATOMS, "alanine dipeptide, 5 backbone beads (C, N, CA, C, N)"),
    "heavy": (HEAVY_ATOMS, "alanine dipeptide, 10 heavy atoms"),
}


def load_frames(path: str | Path) -> dict:
    """Positions (F, 22, 3) nm, masses (22,) and temperature from a reference ``.npz``.

    Falls back to the generator's checkpoint ``<path>.ckpt.npz`` (frames done so far) while
    the reference run is still going; masses then come from the OpenMM system.
    """
    path = Path(path)
    if path.exists():
        with np.load(path) as f:
            return {
                "positions": f["positions"],
                "masses": f["masses"],
                "temperature_k": float(f["temperature_k"]),
                "source": str(path),
            }
    ck = path.with_name(path.name + ".ckpt.npz")
    if not ck.exists():
        raise SystemExit(f"no reference data at {path} (nor {ck}); run generate_reference first")
    with np.load(ck) as f:
        n = int(f["frames_done"])
        pos = f["positions"][:n]
        cfg = json.loads(str(f["config"]))
    from openmm import unit as u

    from sci_moe.sampling.md import build_system

    _, system, _ = build_system(cfg["forcefield"], cfg["implicit_solvent"], cfg["constraints"])
    masses = np.array(
        [system.getParticleMass(i).value_in_unit(u.dalton) for i in range(system.getNumParticles())]
    )
    return {
        "positions": pos,
        "masses": masses,
        "temperature_k": cfg["temperature_k"],
        "source": f"{ck} ({n} frames)",
    }


def coarse_grain(positions: np.ndarray, atoms=BACKBONE_ATOMS) -> np.ndarray:
    """Selected atoms (F, len(atoms), 3), centred per frame (default: the 5 backbone beads)."""
    x = positions[:, list(atoms)].astype(np.float64)
    return x - x.mean(1, keepdims=True)


def build_model(variant: str, n_atoms: int = 5) -> torch.nn.Module:
    if variant in ("plain", "fp"):
        return InvariantMLPEnergy(n_atoms, (256, 256, 256), t_range=(0.0, 1.0))
    return TimeMixture(
        [
            InvariantMLPEnergy(n_atoms, (128, 128), t_range=RANGES[0]),
            InvariantMLPEnergy(n_atoms, (128, 128), t_range=RANGES[1]),
            InvariantMLPEnergy(n_atoms, (256, 256, 256), t_range=RANGES[2]),
        ],
        RANGES,
    )


def stages(variant: str, epochs: int, lr: float, high=None, low=None) -> list[Stage]:
    """ScoreMD's schedule: 10 / 20 / 70 % of the epochs per expert, high t first.

    ``high = (e1, e2)`` and ``low`` override the epochs of the experts (0 skips one).
    """
    if variant in ("plain", "fp"):
        return [Stage(epochs, (1e-5, 1.0), 0.3, 5e-4 if variant == "fp" else 0.0, lr=lr)]
    e1, e2 = high if high is not None else (max(1, epochs // 10), max(1, epochs // 5))
    e3 = low if low is not None else max(1, epochs - e1 - e2)
    fp = 1e-3 if variant == "both" else 0.0
    return [
        Stage(e1, RANGES[0], 0.8, 0.0, expert=0, lr=lr),
        Stage(e2, RANGES[1], 0.35, 0.0, expert=1, lr=lr),
        Stage(e3, RANGES[2], 0.03, fp, expert=2, lr=lr),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="/work/data/alanine_reference.npz")
    p.add_argument("--out", default="sci_moe/sampling/files/alanine_energy_model.safetensors")
    p.add_argument("--variant", choices=VARIANTS, default="both")
    p.add_argument(
        "--atoms",
        choices=tuple(ATOM_SETS),
        default="backbone",
        help="5 backbone beads (default, the shipped model) or the 10 heavy atoms",
    )
    p.add_argument("--epochs", type=int, default=80)
    p.add_argument("--batches-per-epoch", type=int, default=100)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-frames", type=int, default=None)
    p.add_argument("--work-dir", default=None, help="checkpoints (resumable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", default=None, help="start from the weights of this model file")
    p.add_argument(
        "--high-epochs",
        type=int,
        nargs=2,
        default=None,
        metavar=("E1", "E2"),
        help="epochs of the two high-t experts (time mixtures)",
    )
    p.add_argument("--low-epochs", type=int, default=None, help="epochs of the small-t expert")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    ref = load_frames(args.data)
    pos = ref["positions"][: args.max_frames]
    atoms, system_name = ATOM_SETS[args.atoms]
    cg = coarse_grain(pos, atoms)
    nf = 1.0 / cg.std()
    data = torch.tensor(cg * nf, dtype=torch.float32)
    print(f"{len(data)} frames from {ref['source']}; scale nf = {nf:.4f} /nm", flush=True)
    model = build_model(args.variant, len(atoms))
    history_before = {}
    if args.init:
        from sci_moe.sampling.diffusion import load_diffusion_model

        init, _, init_cfg = load_diffusion_model(args.init)
        if abs(init_cfg["scale"] - nf) > 1e-6 * nf:
            raise SystemExit(f"--init model has scale {init_cfg['scale']}, data give {nf}")
        model.load_state_dict(init.state_dict())
        history_before = init_cfg.get("extra", {})
    sched = stages(args.variant, args.epochs, args.lr, args.high_epochs, args.low_epochs)
    cfg = TrainConfig(
        stages=sched,
        batch_size=args.batch,
        max_batches_per_epoch=args.batches_per_epoch,
        seed=args.seed,
        ema_reset=False,
        progress=True,
    )
    t0 = time.perf_counter()
    out = train(model, data, VPSDE(), cfg, out_dir=args.work_dir, resume=args.work_dir is not None)
    seconds = time.perf_counter() - t0
    kT = KB * ref["temperature_k"]
    masses = ref["masses"][list(atoms)]
    names = [ATOM_NAMES[i] for i in atoms]
    save_energy_model(
        model,
        args.out,
        sde=VPSDE(),
        kT=kT,
        scale=nf,
        t_eval=1e-5,
        masses=masses,
        atom_names=names,
        pdb=None,
        atom_indices=atoms,
        extra={
            "system": system_name,
            "data": ref["source"],
            "frames": len(data),
            "variant": args.variant,
            "epochs": [st.epochs for st in sched],
            "previous": history_before,
            "batches_per_epoch": args.batches_per_epoch,
            "batch": args.batch,
            "lr": args.lr,
            "seed": args.seed,
            "train_seconds": seconds + float(history_before.get("train_seconds", 0.0)),
            "final_dsm": out["history"][-1]["dsm"],
            "script": "scripts/train_alanine_energy_model.py",
        },
    )
    print(f"wrote {args.out} after {seconds:.0f} s", flush=True)


if __name__ == "__main__":
    main()
