"""Alanine dipeptide reference data: equilibrium OpenMM trajectories and shipped histograms.

A builder (floor ``data``): it runs the sampling field's public run layer
(:class:`~sci_moe.sampling.md.OpenMMSimulation` with reporters and atomic checkpoints) on
:func:`~sci_moe.sampling.md.build_system` and histograms the result with the field's
:func:`~sci_moe.sampling.md.angle_counts` / :func:`~sci_moe.sampling.md.js_divergence`.
The shipped histogram is read back by :func:`sci_moe.sampling.md.reference_histogram`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .._util import atomic_save_npz, previous_path
from ..sampling.md import (
    ALANINE_ATOM_SETS,
    ATOM_NAMES,
    CheckpointReporter,
    OpenMMSimulation,
    ProgressReporter,
    Reporter,
    angle_counts,
    build_system,
    js_divergence,
    load_checkpoint,
    phi_psi,
)

__all__ = ["generate_reference", "load_reference", "make_reference_histogram", "phi_psi_histogram"]


class _FrameRecorder(Reporter):
    """Stores positions, force-field forces and potential energies every ``interval`` steps.

    Its frames travel in the run's checkpoints (:meth:`state_dict` / :meth:`restore`), so a
    resumed run continues them exactly; it reads the OpenMM context itself, since reporters'
    snapshots carry no forces.
    """

    def __init__(self, n_frames: int, interval: int, n_atoms: int):
        super().__init__(interval)
        self.positions = np.zeros((n_frames, n_atoms, 3), np.float32)
        self.forces = np.zeros((n_frames, n_atoms, 3), np.float32)
        self.energies = np.zeros(n_frames, np.float64)
        self.frames = 0

    def report(self, simulation, snapshot) -> None:
        import openmm.unit as u

        if self.frames >= len(self.energies):
            return
        st = simulation.context.getState(getPositions=True, getForces=True, getEnergy=True)
        i = self.frames
        self.positions[i] = st.getPositions(asNumpy=True).value_in_unit(u.nanometer)
        self.forces[i] = st.getForces(asNumpy=True).value_in_unit(
            u.kilojoule_per_mole / u.nanometer
        )
        self.energies[i] = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        self.frames += 1

    def state_dict(self) -> dict:
        import torch

        n = self.frames
        return {
            "frames": n,
            "positions": torch.from_numpy(self.positions[:n].copy()),
            "forces": torch.from_numpy(self.forces[:n].copy()),
            "energies": torch.from_numpy(self.energies[:n].copy()),
        }

    def restore(self, state: dict | None) -> None:
        if not state:
            raise ValueError("the checkpoint holds no reference frames; delete it to start over")
        n = min(int(state["frames"]), len(self.energies))
        self.positions[:n] = state["positions"][:n].numpy()
        self.forces[:n] = state["forces"][:n].numpy()
        self.energies[:n] = state["energies"][:n].numpy()
        self.frames = n


def _checkpoint_path(out_path: Path) -> Path:
    return out_path.with_name(out_path.name + ".ckpt.pt")


def generate_reference(
    out_path: str | Path,
    n_frames: int,
    interval_steps: int,
    temperature_k: float = 300.0,
    friction_per_ps: float = 1.0,
    timestep_fs: float = 2.0,
    seed: int = 0,
    progress: bool = True,
    *,
    forcefield: str = "amber99sbildn",
    implicit_solvent: str | None = "obc",
    constraints: str | None = "hbonds",
    equilibration_steps: int = 5000,
    checkpoint_every: int = 1000,
    platform: str = "Reference",
    threads: int = 1,
    stop_after_frames: int | None = None,
    max_wall_s: float | None = None,
) -> Path | None:
    """Generate an alanine dipeptide equilibrium trajectory with OpenMM, checkpointed and resumable.

    Minimises the shipped structure, draws velocities at ``temperature_k``, equilibrates for
    ``equilibration_steps``, then runs ``LangevinMiddleIntegrator`` and stores one frame
    every ``interval_steps`` steps: positions, force-field forces and potential energies.
    The run is the md run layer's :class:`~sci_moe.sampling.md.OpenMMSimulation` with a
    frame-recording reporter, a :class:`~sci_moe.sampling.md.ProgressReporter` and a
    :class:`~sci_moe.sampling.md.CheckpointReporter`: every ``checkpoint_every`` frames the
    frames so far and the OpenMM checkpoint (positions,
    velocities, RNG state) are written atomically to ``<out_path>.ckpt.pt``; calling again
    with the same arguments resumes from it and gives exactly the frames of an uninterrupted
    run (the default Reference platform is deterministic, and for 22 atoms about four times
    faster than the CPU platform; the CPU platform runs with ``DeterministicForces`` and one
    thread). ``n_frames`` may change between calls (extend or shorten a run from
    its checkpoint). The checkpoint is removed once ``out_path`` is complete.

    The ScoreMD data set (bgmol ``AImplicitUnconstrained``) used no constraints and a 1 fs
    step; the default here constrains X-H bonds (``constraints="hbonds"``) to allow 2 fs.
    The stored forces are the force-field forces (without constraint forces) either way.

    Parameters
    ----------
    out_path : str or Path
        ``.npz`` written at the end with ``positions`` (F, 22, 3) nm float32, ``forces``
        (F, 22, 3) kJ/mol/nm float32, ``energies`` (F,) kJ/mol float64, ``time_ps`` (F,),
        ``masses`` (22,) amu, ``atom_names`` (22,), ``temperature_k``, ``friction_per_ps``,
        ``timestep_fs``, ``interval_steps``, ``seed`` and ``config`` (JSON of all arguments).
    n_frames : int
        Frames to store.
    interval_steps : int
        MD steps between stored frames.
    temperature_k, friction_per_ps, timestep_fs : float
        K, 1/ps, fs.
    seed : int
        Non-negative; OpenMM's integrator seed is ``2*seed + 1`` and the velocity seed
        ``2*seed + 2`` (OpenMM treats 0 as "random").
    progress : bool
        tqdm progress bar (steps) with ETA and ns/day.
    forcefield, implicit_solvent, constraints
        As :func:`build_system`.
    equilibration_steps : int
        Steps discarded before the first frame.
    checkpoint_every : int
        Frames between checkpoints.
    platform : str
        OpenMM platform (``"Reference"`` or ``"CPU"``).
    threads : int
        Ignored (kept for compatibility): bitwise resumes need one CPU thread.
    stop_after_frames, max_wall_s : optional
        Stop early (after writing a checkpoint) once this many frames exist or this many
        seconds have passed in this call; call again to resume.

    Returns
    -------
    Path or None
        ``out_path`` when complete, ``None`` when stopped early.
    """
    import openmm
    import openmm.unit as u

    out_path = Path(out_path)
    for name, v in (("n_frames", n_frames), ("interval_steps", interval_steps)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    for name, v in (("temperature_k", temperature_k), ("friction_per_ps", friction_per_ps)):
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"{name} must be positive, got {v}")
    if not (0 < timestep_fs <= 5):
        raise ValueError(f"timestep_fs must be in (0, 5] fs, got {timestep_fs}")
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    if checkpoint_every < 1 or equilibration_steps < 0:
        raise ValueError("checkpoint_every must be >= 1 and equilibration_steps >= 0")
    config = {
        "n_frames": int(n_frames),
        "interval_steps": int(interval_steps),
        "temperature_k": float(temperature_k),
        "friction_per_ps": float(friction_per_ps),
        "timestep_fs": float(timestep_fs),
        "seed": int(seed),
        "forcefield": forcefield,
        "implicit_solvent": implicit_solvent,
        "constraints": constraints,
        "equilibration_steps": int(equilibration_steps),
        "platform": platform,
        "openmm_version": openmm.__version__,
    }
    if out_path.exists():
        with np.load(out_path) as done:
            if "config" in done and json.loads(str(done["config"])) == config:
                return out_path
        raise ValueError(f"{out_path} exists with other settings; remove it or pick another path")
    out_path.parent.mkdir(parents=True, exist_ok=True)

    _, system, pos0 = build_system(forcefield, implicit_solvent, constraints)
    n_atoms = system.getNumParticles()
    recorder = _FrameRecorder(int(n_frames), int(interval_steps), n_atoms)
    ckpt = _checkpoint_path(out_path)
    reporters = [
        recorder,
        ProgressReporter(n_frames * interval_steps, disable=not progress, desc="alanine reference"),
        CheckpointReporter(ckpt, checkpoint_every * interval_steps),
    ]
    # OpenMMSimulation seeds the integrator with seed + 1: 2 * seed + 1 as before.
    sim = OpenMMSimulation(
        system,
        pos0,
        reporters,
        timestep_ps=timestep_fs * 1e-3,
        temperature_k=temperature_k,
        friction_per_ps=friction_per_ps,
        seed=2 * seed,
        platform=platform,
        deterministic=platform == "CPU",
        minimize=False,
        check_interval=max(1, int(interval_steps)),
        energy_jump_kj_mol=None,
        metadata={"generate_reference": config},
    )
    try:
        if ckpt.exists():
            state = load_checkpoint(ckpt)
            old = (state.get("metadata") or {}).get("generate_reference")
            if not isinstance(old, dict) or {**old, "n_frames": n_frames} != config:
                raise ValueError(
                    f"checkpoint {ckpt} was written with other settings; pass the same "
                    "arguments to resume, or delete it to start over"
                )
            sim.load_checkpoint(state)
        else:
            ctx = sim.context
            ctx.setPositions(pos0)
            ctx.applyConstraints(1e-6)
            openmm.LocalEnergyMinimizer.minimize(ctx, 1.0, 0)
            ctx.setVelocitiesToTemperature(temperature_k * u.kelvin, 2 * seed + 2)
            sim.integrator.step(equilibration_steps)  # step 0 is the end of equilibration
        target = n_frames if stop_after_frames is None else min(n_frames, stop_after_frames)
        steps = max(0, target * interval_steps - sim.current_step)
        max_hours = None if max_wall_s is None else max_wall_s / 3600.0
        result = sim.run(steps, max_hours=max_hours) if steps else None
    finally:
        sim.close()
    if recorder.frames < n_frames:
        if result is None or result.status == "completed":
            if recorder.frames < target or sim.last_checkpoint_step != sim.current_step:
                sim.save_checkpoint(ckpt)
        return None
    masses = np.array([system.getParticleMass(i).value_in_unit(u.dalton) for i in range(n_atoms)])
    names = np.array(list(ATOM_NAMES) if n_atoms == 22 else [""] * n_atoms)
    atomic_save_npz(
        out_path,
        dict(
            positions=recorder.positions,
            forces=recorder.forces,
            energies=recorder.energies,
            time_ps=(np.arange(1, n_frames + 1) * interval_steps * timestep_fs * 1e-3),
            masses=masses,
            atom_names=names,
            temperature_k=np.array(temperature_k),
            friction_per_ps=np.array(friction_per_ps),
            timestep_fs=np.array(timestep_fs),
            interval_steps=np.array(interval_steps),
            seed=np.array(seed),
            config=np.array(json.dumps(config)),
        ),
        fsync=False,
    )
    ckpt.unlink(missing_ok=True)
    previous_path(ckpt).unlink(missing_ok=True)
    return out_path


def load_reference(path: str | Path, atoms: str = "all") -> dict:
    """Load a :func:`generate_reference` file, optionally coarse-grained to a subset of atoms.

    Parameters
    ----------
    path : str or Path
    atoms : {"all", "heavy", "backbone"}
        All 22 atoms, the 10 heavy atoms (:data:`HEAVY_ATOMS`) or the 5 backbone beads of
        ScoreMD (:data:`BACKBONE_ATOMS`); positions, forces, masses and names are sliced
        (beads keep their atom's real mass, as in ScoreMD).

    Returns
    -------
    dict
        ``positions`` (F, n, 3) nm, ``forces`` (F, n, 3) kJ/mol/nm, ``energies`` (F,) kJ/mol
        (of the full system), ``masses`` (n,) amu, ``atom_names`` (n,), ``atom_indices`` (n,),
        ``phi_psi`` (F, 2) rad (from the full structure when available), and the scalars
        and ``config`` (a dict) of the file.
    """
    if atoms not in ALANINE_ATOM_SETS:
        raise ValueError(f"atoms must be one of {sorted(ALANINE_ATOM_SETS)}, got {atoms!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; create it with generate_reference(...)")
    idx = np.array(ALANINE_ATOM_SETS[atoms])
    with np.load(path) as f:
        d = {k: f[k] for k in f.files}
    out = {k: (v.item() if v.ndim == 0 and k != "config" else v) for k, v in d.items()}
    out["config"] = json.loads(str(d["config"]))
    out["phi_psi"] = phi_psi(d["positions"]) if d["positions"].shape[1] == 22 else None
    for key in ("positions", "forces"):
        out[key] = d[key][:, idx]
    out["masses"], out["atom_names"] = d["masses"][idx], d["atom_names"][idx]
    out["atom_indices"] = idx
    return out


def phi_psi_histogram(angles: np.ndarray, bins: int = 64) -> np.ndarray:
    """2-D histogram counts of (phi, psi) on ``bins x bins`` equal bins over [-pi, pi]^2.

    Parameters
    ----------
    angles : array-like, shape (F, 2)
        Radians.
    bins : int

    Returns
    -------
    numpy.ndarray, shape (bins, bins), int64
        ``counts[i, j]``: phi in bin i, psi in bin j.
    """
    a = np.asarray(angles, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"angles must have shape (F, 2), got {a.shape}")
    if bins < 2:
        raise ValueError(f"bins must be >= 2, got {bins}")
    return angle_counts(a, bins)[0].astype(np.int64)


def make_reference_histogram(
    reference_path: str | Path, out_path: str | Path, bins: int = 64
) -> dict:
    """Histogram a :func:`generate_reference` run's (phi, psi) for shipping, with convergence data.

    Writes ``out_path`` (``.npz``, atomically) with ``counts`` (bins, bins) int64, ``edges``
    (bins + 1,) rad, ``counts_first_half`` / ``counts_second_half``, and ``metadata`` (JSON:
    the run's config, frames, simulated ns, the JS divergence between the first and second
    half of the run, between even and odd frames (the finite-sample floor), the fraction of
    frames with phi > 0 overall and per half, and the number of phi sign changes).

    Returns
    -------
    dict
        The metadata.
    """
    ref = load_reference(reference_path)
    ang = ref["phi_psi"]
    n = len(ang)
    if n < 2:
        raise ValueError("the reference needs at least 2 frames")
    first, second = ang[: n // 2], ang[n // 2 :]
    h1, h2 = phi_psi_histogram(first, bins), phi_psi_histogram(second, bins)
    meta = {
        "source": "sci_moe.data.alanine_reference.generate_reference",
        "config": ref["config"],
        "n_frames": int(n),
        "simulated_ns": float(ref["time_ps"][-1] * 1e-3),
        "frame_interval_ps": float(ref["interval_steps"] * ref["timestep_fs"] * 1e-3),
        "bins": int(bins),
        "js_first_vs_second_half": js_divergence(h1, h2),
        # finite-sample floor: two interleaved halves see the same basins
        "js_even_vs_odd_frames": js_divergence(
            phi_psi_histogram(ang[0::2], bins), phi_psi_histogram(ang[1::2], bins)
        ),
        "phi_positive_transitions": int(np.abs(np.diff((ang[:, 0] > 0).astype(int))).sum()),
        "phi_positive_fraction": float((ang[:, 0] > 0).mean()),
        "phi_positive_fraction_halves": [
            float((first[:, 0] > 0).mean()),
            float((second[:, 0] > 0).mean()),
        ],
    }
    atomic_save_npz(
        out_path,
        dict(
            counts=h1 + h2,
            counts_first_half=h1,
            counts_second_half=h2,
            edges=np.linspace(-np.pi, np.pi, bins + 1),
            metadata=np.array(json.dumps(meta)),
        ),
        fsync=False,
    )
    return meta
