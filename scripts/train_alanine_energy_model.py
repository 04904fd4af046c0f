"""Train the shipped alanine-dipeptide energy diffusion model (5-bead coarse-grained).

ScoreMD's alanine-dipeptide setup (Plainer et al., NeurIPS 2025) at CPU scale: the five
backbone beads C(ACE), N, CA, C, N(NME) (all-atom indices 4, 6, 8, 14, 16) of an OpenMM
reference trajectory (amber99sbildn + OBC, 300 K; written by
:func:`sci_moe.data.alanine_reference.generate_reference`), centred and scaled by
``nf = 1/std``; VP SDE; a time mixture of three SE(3)-invariant MLP energies
(:class:`~sci_moe.sampling.diffusion.InvariantMLPEnergy`: pairwise distances + signed
volumes, so chirality is seen) on t in [0.6, 1], [0.099, 0.6], [1e-5, 0.099], trained high t
first (10/20/70 % of the epochs, mids 0.8/0.35/0.03) with the Fokker-Planck regulariser
(weight 1e-3, ScoreMD's "Both" for ALDP) on the small-t expert, which is the force field.

``--init FILE`` continues a model file (warm start, keeping its scale ``nf``);
``--fp-epochs E`` trains the small-t expert with DSM only for ``--low-epochs`` and then
``E`` epochs with the FP term (an FP step costs several DSM steps on CPU);
``--high-epochs 0 0 --low-epochs 0 --fp-epochs E`` with ``--init`` is an FP fine-tune of
the small-t expert alone;
``--compile`` (default; ``--no-compile`` for the eager steps) trains through the
``torch.compile``-d functional steps of :mod:`sci_moe.sampling.diffusion.compiled`
(``TrainConfig.compile``); they apply to the :class:`InvariantMLPEnergy` experts as to any
energy network.
``--eval-every N`` (with ``--work-dir``) records learning-curve points every ``N`` epochs
(i.i.d. and MD phi/psi JS against the shipped reference, scored as
``benchmarks/alanine_energy_model/run.py`` does, by its helper
``benchmarks/alanine_energy_model/_alanine_energy_model.py``) in ``<work-dir>/curves.json``.

``--atoms heavy`` trains the same recipe on the 10 heavy atoms (:data:`HEAVY_ATOMS`, which
contain the phi/psi atoms) instead of the 5 beads.

Writes a model file (:func:`~sci_moe.sampling.diffusion.save_energy_model`) usable by
``sci-moe md run --model FILE``; energies in kJ/mol for bead positions in nm at t = 1e-5.

Example (the shipped model of issue 28 continued the previous one with
``--init``, ``--high-epochs 30 40 --low-epochs 70`` on the first 32,000 frames of the
seed-0 reference; see ``docs/results/alanine_energy_model.rst``)::

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
    TrainConfig,
    load_diffusion_model,
    save_energy_model,
    train,
)
from sci_moe.sampling.diffusion.alanine_recipe import (
    ALANINE_VARIANTS,
    alanine_model,
    alanine_stages,
)
from sci_moe.sampling.md import ATOM_NAMES, BACKBONE_ATOMS, HEAVY_ATOMS

KB = BOLTZMANN_KJ_PER_MOL_K  # kJ/mol/K
VARIANTS = ALANINE_VARIANTS
ATOM_SETS = {
    "backbone": (BACKBONE_ATOMS, "alanine dipeptide, 5 backbone beads (C, N, CA, C, N)"),
    "heavy": (HEAVY_ATOMS, "alanine dipeptide, 10 heavy atoms"),
}


def load_frames(path: str | Path) -> dict:
    """Positions (F, 22, 3) nm, masses (22,) and temperature from a reference ``.npz``.

    Falls back to the generator's checkpoint ``<path>.ckpt.pt`` (frames done so far) while
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
    ck = path.with_name(path.name + ".ckpt.pt")  # generate_reference's run checkpoint
    if not ck.exists():
        raise SystemExit(f"no reference data at {path} (nor {ck}); run generate_reference first")
    state = torch.load(ck, weights_only=True)
    rec = state["reporters"]["_FrameRecorder"]
    n = int(rec["frames"])
    pos = rec["positions"][:n].numpy()
    cfg = state["metadata"]["generate_reference"]
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


def _final_per_stage(history: list[dict]) -> dict:
    """Last epoch's DSM loss of every stage (stage index -> loss)."""
    return {str(r["stage"]): r["dsm"] for r in history}


def _row(case, metric, value, unit) -> dict:
    return {"case": case, "metric": metric, "value": value, "unit": unit, "vs": None, "ratio": None}


def training_rows(
    points: list[dict], history: list[dict], wall_s: float, cpu_s: float, steps: list[int]
) -> list[dict]:
    """Benchmark rows of a training run: per epoch, per curve point and the budget.

    Parameters
    ----------
    points : list of dict
        Learning-curve points (:class:`Curves`, ``curves.json``).
    history : list of dict
        Per-epoch records of :func:`~sci_moe.sampling.diffusion.train` (stage, dsm, fp,
        seconds).
    wall_s, cpu_s : float
        Training time without the curve evaluations, seconds.
    steps : list of int
        Optimiser steps per stage.

    Returns
    -------
    list of dict
        Rows ``epoch N`` (stage, dsm, fp, seconds: wall seconds of the epoch), ``step N``
        (stage, dsm, fp, iid_js, md_js, train_cpu_s) and ``budget``.
    """
    rows = []
    for i, r in enumerate(history, 1):
        for k, unit in (("stage", "index"), ("dsm", "1"), ("fp", "1"), ("seconds", "s")):
            rows.append(_row(f"epoch {i}", k, round(float(r[k]), 5), unit))
    for r in points:
        for k in ("stage", "dsm", "fp", "iid_js", "md_js", "train_cpu_s"):
            unit = {"stage": "index", "train_cpu_s": "s"}.get(k, "nats" if "js" in k else "1")
            rows.append(_row(f"step {r['steps']}", k, round(r[k], 5), unit))
    budget = {"train_wall_s": round(wall_s, 1), "train_cpu_s": round(cpu_s, 1)}
    budget.update({f"steps_stage_{i}": n for i, n in enumerate(steps)})
    budget["steps_total"] = sum(steps)
    for k, v in budget.items():
        rows.append(_row("budget", k, v, "s" if k.endswith("_s") else "steps"))
    return rows


class Curves:
    """Learning-curve points: training loss, i.i.d. and MD phi/psi JS vs optimiser steps.

    Each point evaluates the current weights, with the running EMA of the stage in
    progress copied in (what the stage would ship if it ended there), written to
    ``<work-dir>/curves.json`` after every point.
    """

    def __init__(self, args, sched, save, steps_per_epoch: int):
        self.args, self.sched, self.save = args, sched, save
        self.steps_per_epoch = steps_per_epoch
        self.eval_wall = self.eval_cpu = 0.0  # this call's evaluation time (not training)
        self.work = Path(args.work_dir)
        self.path = self.work / "curves.json"
        self.points = json.loads(self.path.read_text()) if self.path.exists() else []

    def write_rows(
        self, path, wall_s: float, cpu_s: float, steps: list[int], history: list[dict]
    ) -> None:
        """The curve as benchmark rows (``benchmarks/_common`` format) at ``path``."""
        from sci_moe._util import atomic_save_json

        doc = {
            "benchmark": "alanine_energy_model_training",
            "machine": {
                "command": "scripts/train_alanine_energy_model.py",
                "args": vars(self.args),
            },
            "rows": training_rows(self.points, history, wall_s, cpu_s, steps),
        }
        atomic_save_json(path, doc)

    def point(self, model, out, wall_s, cpu_s) -> None:
        """A curve point of ``train``'s return ``out`` (its history, stage and EMA)."""
        import copy
        import sys

        sys.path.insert(
            0, str(Path(__file__).resolve().parents[1] / "benchmarks/alanine_energy_model")
        )
        from _alanine_energy_model import iid_phi_psi, js_to_reference, md_js, reference

        history = out["history"]
        m = copy.deepcopy(model)
        si = out["stage"]
        if out["ema"] is not None:  # the stage trained last: its EMA weights (a no-op at its end)
            target = m.experts[self.sched[si].expert] if hasattr(m, "experts") else m
            params = [p for p in target.parameters() if p.requires_grad]
            with torch.no_grad():
                for p, e in zip(params, out["ema"], strict=True):
                    p.copy_(e)
        path = self.save(m, self.work / "curve_model.safetensors", {"curve_point": len(history)})
        p_ref = reference()["p"]
        t0, c0 = time.perf_counter(), time.process_time()
        ang = iid_phi_psi(path, self.args.eval_iid, seed=100, n_steps=1000)
        walkers, ns = self.args.eval_md
        md = md_js(path, 100, int(walkers), ns, self.work)
        steps = len(history) * self.steps_per_epoch
        rec = {
            "epochs_done": len(history),
            "steps": steps,
            "stage": history[-1]["stage"],
            "loss": history[-1]["loss"],
            "dsm": history[-1]["dsm"],
            "fp": history[-1]["fp"],
            "iid_js": js_to_reference(ang, p_ref),
            "md_js": md["js"],
            "md_phi_positive_fraction": md["phi_positive_fraction"],
            "train_wall_s": wall_s - self.eval_wall,
            "train_cpu_s": cpu_s - self.eval_cpu,
            "eval_s": time.perf_counter() - t0,
        }
        self.eval_wall += time.perf_counter() - t0
        self.eval_cpu += time.process_time() - c0
        self.points.append(rec)
        self.path.write_text(json.dumps(self.points, indent=1) + "\n")
        print(
            f"curve: epoch {rec['epochs_done']} stage {rec['stage']} dsm {rec['dsm']:.4f} "
            f"iid JS {rec['iid_js']:.4f} MD JS {rec['md_js']:.4f} ({rec['eval_s']:.0f} s)",
            flush=True,
        )


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
    p.add_argument(
        "--fp-epochs",
        type=int,
        default=None,
        help="small-t expert: --low-epochs of DSM only, then this many with FP (variant both)",
    )
    p.add_argument("--ema-decay", type=float, default=0.995, help="EMA factor (0: none)")
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="torch.compile-d functional DSM and DSM + FP steps (TrainConfig.compile; "
        "--no-compile: the eager autograd steps)",
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="epochs between learning-curve points (i.i.d. and MD phi/psi JS; needs --work-dir)",
    )
    p.add_argument(
        "--curves-json",
        default=None,
        help="also write the learning curve as a benchmark JSON (rows 'step N')",
    )
    p.add_argument("--eval-iid", type=int, default=1000, help="i.i.d. samples per curve point")
    p.add_argument(
        "--eval-md",
        type=float,
        nargs=2,
        default=(8, 0.025),
        metavar=("WALKERS", "NS"),
        help="MD run per curve point (default 8 walkers x 25 ps)",
    )
    args = p.parse_args()
    if args.eval_every and args.work_dir is None:
        raise SystemExit("--eval-every needs --work-dir (curve points are evaluated from it)")

    torch.manual_seed(args.seed)
    ref = load_frames(args.data)
    pos = ref["positions"][: args.max_frames]
    atoms, system_name = ATOM_SETS[args.atoms]
    cg = coarse_grain(pos, atoms)
    nf = 1.0 / cg.std()
    model = alanine_model(args.variant, len(atoms))
    history_before = {}
    if args.init:
        init, _, init_cfg = load_diffusion_model(args.init)
        # a warm start keeps the model units of the model it continues
        nf = float(init_cfg["scale"])
        model.load_state_dict(init.state_dict())
        history_before = init_cfg.get("extra", {})
    data = torch.tensor(cg * nf, dtype=torch.float32)
    print(f"{len(data)} frames from {ref['source']}; scale nf = {nf:.4f} /nm", flush=True)
    kT = KB * ref["temperature_k"]
    masses = ref["masses"][list(atoms)]
    names = [ATOM_NAMES[i] for i in atoms]

    def save(m, path, extra):
        return save_energy_model(
            m,
            path,
            sde=VPSDE(),
            kT=kT,
            scale=nf,
            t_eval=1e-5,
            masses=masses,
            atom_names=names,
            pdb=None,
            atom_indices=atoms,
            extra=extra,
        )

    sched = alanine_stages(
        args.variant, args.epochs, args.lr, args.high_epochs, args.low_epochs, args.fp_epochs
    )
    cfg = TrainConfig(
        stages=sched,
        batch_size=args.batch,
        max_batches_per_epoch=args.batches_per_epoch,
        seed=args.seed,
        ema_decay=args.ema_decay,
        ema_reset=False,
        progress=True,
        compile=args.compile,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    steps_per_epoch = min(args.batches_per_epoch, -(-len(data) // args.batch))
    curves = Curves(args, sched, save, steps_per_epoch) if args.eval_every else None
    while True:
        out = train(
            model,
            data,
            VPSDE(),
            cfg,
            out_dir=args.work_dir,
            resume=args.work_dir is not None,
            max_epochs=args.eval_every or None,
        )
        if curves is not None:
            curves.point(model, out, time.perf_counter() - t0, time.process_time() - c0)
        if out["done"]:
            break
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    if curves is not None:  # the training budget without the learning-curve evaluations
        seconds, cpu_seconds = seconds - curves.eval_wall, cpu_seconds - curves.eval_cpu
    steps = [st.epochs * steps_per_epoch for st in sched]
    save(
        model,
        args.out,
        {
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
            "ema_decay": args.ema_decay,
            "compile": args.compile,
            "steps_per_expert": steps,
            "train_seconds": seconds + float(history_before.get("train_seconds", 0.0)),
            "train_cpu_seconds_this_run": cpu_seconds,
            "final_dsm": out["history"][-1]["dsm"],
            "final_dsm_per_stage": _final_per_stage(out["history"]),
            "script": "scripts/train_alanine_energy_model.py",
        },
    )
    print(f"wrote {args.out} after {seconds:.0f} s", flush=True)
    if curves is not None and args.curves_json:
        curves.write_rows(args.curves_json, seconds, cpu_seconds, steps, out["history"])


if __name__ == "__main__":
    main()
