"""Building the simulation of ``sci-moe md run``: its reporters, engine and debugging dump.

Split from :mod:`sci_moe.cli.md` (argument handling, resume checks and the run loop).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = [
    "available_memory",
    "build_simulation",
    "check_memory",
    "dump_failure_state",
    "walker_memory",
    "write_topology",
]

# Copies of the (W, N, D) coordinates the torch engine holds at once: starting positions,
# positions, velocities, forces, the Langevin noise and the integrator's temporaries.
_COORDINATE_COPIES = 8


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


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def _cgroup_available() -> int | None:
    """Room left under the cgroup's memory limit (containers), if there is one."""
    for limit, usage in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),  # cgroup v2
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        try:
            with open(limit, encoding="ascii") as fh:
                cap = fh.read().strip()
            with open(usage, encoding="ascii") as fh:
                used = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if cap.isdigit() and int(cap) < 1 << 60:  # "max" or a huge number: no limit
            return max(0, int(cap) - used)
    return None


def available_memory(device: str = "cpu") -> int | None:
    """Bytes that can still be allocated on ``device`` (``None`` when unknown).

    CPU: the kernel's ``MemAvailable``, capped by the room under a cgroup (container)
    memory limit. CUDA: the free memory ``torch.cuda.mem_get_info`` reports.
    """
    if device.startswith("cuda"):
        import torch

        try:
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (RuntimeError, AssertionError):  # pragma: no cover - no such device
            return None
    known = [m for m in (_meminfo_available(), _cgroup_available()) if m is not None]
    return min(known) if known else None


def walker_memory(system, walkers: int, itemsize: int = 8) -> int:
    """A lower bound of the bytes the torch engine allocates for ``walkers`` walkers:
    :data:`_COORDINATE_COPIES` arrays of shape ``(walkers, N, D)`` (a learned model's
    activations come on top)."""
    n, d = system.positions.shape
    return _COORDINATE_COPIES * int(walkers) * int(n) * int(d) * int(itemsize)


def _size(nbytes: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if nbytes < 1000 or unit == "PB":
            return f"{nbytes:.3g} {unit}" if unit != "bytes" else f"{int(nbytes)} bytes"
        nbytes /= 1000
    return ""  # pragma: no cover - unreachable


def check_memory(cfg, system, engine: str, available: int | None = None) -> None:
    """Refuse (``ValueError``, exit code 2) a walker count whose coordinates alone need
    more memory than ``available`` (default: :func:`available_memory` of ``cfg.device``),
    before anything is allocated or written."""
    if engine != "torch":
        return
    model = getattr(system.provider, "model", None)
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    itemsize = params[0].element_size() if params else 8  # the dtype build_simulation uses
    need = walker_memory(system, cfg.walkers, itemsize)
    if available is None:
        available = available_memory(cfg.device)
    if available is None or need <= available:
        return
    n, d = system.positions.shape
    most = available // max(1, walker_memory(system, 1, itemsize))
    raise ValueError(
        f"--walkers {cfg.walkers} needs at least {_size(need)} of memory ({_COORDINATE_COPIES} "
        f"arrays of {n} x {d} coordinates of {itemsize} bytes per walker) but "
        f"{_size(available)} is "
        f"available on {cfg.device}: use fewer walkers (the coordinates alone of more than "
        f"{most} walkers do not fit)"
    )


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
