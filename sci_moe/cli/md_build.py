"""Building the simulation of ``sci-moe md run``: its reporters, engine and debugging dump.

Split from :mod:`sci_moe.cli.md` (argument handling, resume checks and the run loop).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

__all__ = ["build_simulation", "dump_failure_state", "write_topology"]


def write_topology(system, path: Path) -> None:
    """Write the run's ``topology.pdb`` (a copy of the input PDB, or one built from the system)."""
    import numpy as np
    from openmm.app import PDBFile

    if system.pdb_path is not None:
        shutil.copyfile(system.pdb_path, path)
        return
    from openmm import unit

    pos = np.zeros((len(system.positions), 3))
    pos[:, : system.positions.shape[1]] = system.positions
    with open(path, "w", encoding="utf-8") as fh:
        PDBFile.writeFile(system.topology, pos * unit.nanometer, fh)


def build_simulation(cfg, system, engine, out: Path, total_steps: int, progress: bool):
    """The OpenMM or torch simulation of ``system`` with the run's reporters in ``out``."""
    import torch

    from ..sampling.md import (
        CheckpointReporter,
        LogReporter,
        OpenMMSimulation,
        ProgressReporter,
        Simulation,
        TrajectoryReporter,
    )

    reporters = [
        TrajectoryReporter(
            out / f"trajectory.{cfg.trajectory_format}", cfg.report_interval, system.topology
        ),
        LogReporter(out / "log.csv", cfg.report_interval, reduced=cfg.is_toy),
        CheckpointReporter(out / "checkpoint.pt", cfg.checkpoint_interval),
    ]
    if progress:
        speed_unit = "time/day" if cfg.is_toy else "ns/day"
        reporters.append(
            ProgressReporter(total_steps, desc="md", file=sys.stderr, speed_unit=speed_unit)
        )
    meta = {"config": cfg.to_dict(), "engine": engine, "system": system.name}
    if engine == "openmm":
        return OpenMMSimulation(
            system.system,
            system.positions,
            reporters,
            topology=system.topology,
            timestep_ps=cfg.timestep_ps,
            temperature_k=cfg.temperature_k,
            friction_per_ps=cfg.friction_per_ps,
            seed=cfg.seed,
            platform=cfg.platform,
            deterministic=cfg.deterministic,
            minimize=cfg.minimize,
            energy_jump_kj_mol=cfg.energy_jump_kj_mol,
            metadata=meta,
        )
    from ..sampling.md import LangevinBAOAB, OverdampedEulerMaruyama

    cls = LangevinBAOAB if cfg.integrator == "langevin" else OverdampedEulerMaruyama
    integrator = cls(cfg.timestep_ps, cfg.temperature_k, cfg.friction_per_ps, kT=system.kT)
    dtype = torch.float64
    device = torch.device(cfg.device)
    model = getattr(system.provider, "model", None)
    if isinstance(model, torch.nn.Module):
        model.to(device)
        params = list(model.parameters())
        dtype = params[0].dtype if params else torch.float64
    x0 = torch.as_tensor(system.positions, dtype=dtype, device=device)
    x0 = x0[None].repeat(cfg.walkers, 1, 1)
    sim = Simulation(
        system.provider,
        integrator,
        x0,
        reporters,
        seed=cfg.seed,
        topology=system.topology,
        energy_jump_kj_mol=cfg.energy_jump_kj_mol,
        metadata=meta,
    )
    return sim


def dump_failure_state(sim, path: Path) -> None:
    """The state at the failing step, for debugging (like OpenMM's DebuggingReporter):
    ``torch.load(path, weights_only=True)`` gives step, positions, velocities, energies."""
    import torch

    try:
        snap = sim.snapshot()
    except Exception:  # the engine itself may be unusable now
        return
    dump = {"step": snap.step}
    for key in ("positions", "velocities", "potential_energy"):
        value = getattr(snap, key)
        if value is not None:
            dump[key] = torch.as_tensor(value)
    torch.save(dump, path)
