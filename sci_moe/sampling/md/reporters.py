"""Reporters for :class:`~sci_moe.sampling.md.Simulation`, following OpenMM's app layer.

Every reporter answers :meth:`Reporter.describe_next_report` with a :class:`ReportRequest`
(steps until it next wants data, and which fields); the simulation steps exactly to the
nearest due report, builds **one** :class:`Snapshot` with the union of the requested fields
and hands it to every reporter that is due (OpenMM's ``describeNextReport``/``report``).

Reporters that write files expose :meth:`Reporter.state_dict` (bytes and frames written)
which checkpoints store, and :meth:`Reporter.restore` which truncates the file back to that
point on ``--resume``, so that the resumed trajectory equals an uninterrupted run frame for
frame, with no frame lost or duplicated.

The reporters:

:class:`TrajectoryReporter`
    DCD or XTC (OpenMM's writers, readable by mdtraj/VMD/PyMOL), HDF5 via mdtraj when
    PyTables is installed; one file per walker.
:class:`LogReporter`
    CSV: step, time (ps), potential energy (kJ/mol), temperature (K), speed (ns/day),
    flushed every row.
:class:`CheckpointReporter`
    Atomic checkpoints every ``interval`` steps.
:class:`ProgressReporter`
    A tqdm bar with ETA and ns/day.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FIELDS",
    "CheckpointReporter",
    "LogReporter",
    "ProgressReporter",
    "ReportRequest",
    "Reporter",
    "Snapshot",
    "TrajectoryReporter",
    "dummy_topology",
    "walker_paths",
]

#: Fields a reporter may request.
FIELDS = frozenset({"positions", "velocities", "energy", "temperature"})


@dataclass(frozen=True)
class ReportRequest:
    """What a reporter wants next (OpenMM's ``describeNextReport`` dictionary).

    Attributes
    ----------
    steps : int
        Steps from the current step until the next report (>= 1).
    include : frozenset of str
        Subset of :data:`FIELDS`.
    """

    steps: int
    include: frozenset = frozenset()

    def __post_init__(self):
        if int(self.steps) < 1:
            raise ValueError(f"a report must be at least one step ahead, got {self.steps}")
        unknown = set(self.include) - FIELDS
        if unknown:
            raise ValueError(f"unknown report fields {sorted(unknown)}; use {sorted(FIELDS)}")


@dataclass
class Snapshot:
    """The data handed to reporters at one step, as NumPy arrays in OpenMM units.

    Attributes
    ----------
    step : int
        Integration step (0 = the initial state).
    time_ps : float
        Simulated time, ps.
    positions : ndarray, shape (W, N, D), or None
        nm (reduced units for toy potentials).
    velocities : ndarray, shape (W, N, D), or None
        nm/ps; ``None`` for overdamped dynamics.
    potential_energy : ndarray, shape (W,), or None
        kJ/mol.
    kinetic_energy : ndarray, shape (W,), or None
        kJ/mol.
    temperature : ndarray, shape (W,), or None
        Instantaneous kinetic temperature :math:`2 K / (n_\\mathrm{dof} k_B)`, K.
    """

    step: int
    time_ps: float
    positions: np.ndarray | None = None
    velocities: np.ndarray | None = None
    potential_energy: np.ndarray | None = None
    kinetic_energy: np.ndarray | None = None
    temperature: np.ndarray | None = None


class Reporter:
    """Base class: report every ``interval`` steps (counted from step 0, as OpenMM does).

    Subclasses set :attr:`include` and implement :meth:`report`; file writers also
    implement :meth:`state_dict` / :meth:`restore`.
    """

    #: Fields this reporter needs.
    include: frozenset = frozenset()
    #: Checkpoint reporters run after all others at the same step (so that the
    #: checkpoint records the frames written at that step).
    is_checkpoint: bool = False

    def __init__(self, interval: int):
        if int(interval) != interval or interval < 1:
            raise ValueError(f"report interval must be a positive integer, got {interval!r}")
        self.interval = int(interval)

    @property
    def key(self) -> str:
        """Name under which checkpoints store this reporter's state."""
        return type(self).__name__

    def describe_next_report(self, simulation) -> ReportRequest:
        """Steps until the next report and the fields it needs."""
        steps = self.interval - simulation.current_step % self.interval
        return ReportRequest(steps, self.include)

    def report(self, simulation, snapshot: Snapshot) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """File position to store in a checkpoint (empty for reporters without files)."""
        return {}

    def restore(self, state: dict[str, Any] | None) -> None:
        """Truncate this reporter's output back to ``state`` (from a checkpoint) and append."""

    def flush(self) -> None:
        """Make everything written so far durable (called before each checkpoint)."""

    def close(self) -> None:
        """Release files (called when a run ends, normally or not)."""


# ---------------------------------------------------------------------- trajectories


def dummy_topology(n_particles: int):
    """An OpenMM topology of ``n_particles`` unnamed particles (for toy potentials)."""
    from openmm import app

    top = app.Topology()
    chain = top.addChain()
    for i in range(n_particles):
        res = top.addResidue("UNK", chain)
        top.addAtom(f"X{i}", None, res)
    return top


def walker_paths(path: str | Path, n_walkers: int) -> list[Path]:
    """Files of a trajectory with ``n_walkers`` walkers: ``path`` itself for one walker,
    else ``<stem>_w000<suffix>``, ``<stem>_w001<suffix>``, ..."""
    path = Path(path)
    if n_walkers == 1:
        return [path]
    return [path.with_name(f"{path.stem}_w{i:03d}{path.suffix}") for i in range(n_walkers)]


def _as_xyz(positions: np.ndarray) -> np.ndarray:
    """(N, D) with D <= 3 -> (N, 3), zero-padded (toy potentials live in 1-D or 2-D)."""
    n, d = positions.shape
    if d == 3:
        return positions
    if d > 3:
        raise ValueError(f"trajectory files hold 3-D coordinates, got D={d}")
    out = np.zeros((n, 3), dtype=positions.dtype)
    out[:, :d] = positions
    return out


class _DCDWriter:
    """OpenMM's DCDFile with exact truncation (frames are fixed size after the header)."""

    def __init__(self, path: Path, topology, dt_ps: float, first_step: int, interval: int):
        from openmm.app import DCDFile

        self.path, self.first_step, self.interval = path, first_step, interval
        append = path.exists() and path.stat().st_size > 0
        self._fh = open(path, "r+b" if append else "wb")
        self._dcd = DCDFile(self._fh, topology, dt_ps, first_step, interval, append=append)

    def write(self, xyz: np.ndarray) -> None:
        self._dcd.writeModel(xyz)
        self._fh.flush()

    @staticmethod
    def truncate(path: Path, nbytes: int, frames: int, first_step: int, interval: int) -> None:
        with open(path, "r+b") as fh:
            fh.truncate(nbytes)
            fh.seek(8)
            fh.write(struct.pack("<i", frames))
            fh.seek(20)
            fh.write(struct.pack("<i", first_step + (frames - 1) * interval))

    def close(self) -> None:
        self._fh.close()


class _XTCWriter:
    """OpenMM's XTCFile (each frame is appended and the file closed: always durable)."""

    def __init__(self, path: Path, topology, dt_ps: float, first_step: int, interval: int):
        from openmm.app import XTCFile

        append = path.exists() and path.stat().st_size > 0
        self._xtc = XTCFile(str(path), topology, dt_ps, first_step, interval, append=append)

    def write(self, xyz: np.ndarray) -> None:
        self._xtc.writeModel(xyz)

    @staticmethod
    def truncate(path: Path, nbytes: int, frames: int, first_step: int, interval: int) -> None:
        with open(path, "r+b") as fh:
            fh.truncate(nbytes)

    def close(self) -> None:
        pass


class _HDF5Writer:
    """mdtraj's HDF5 format (needs PyTables); truncation shrinks the frame arrays."""

    def __init__(self, path: Path, topology, dt_ps: float, first_step: int, interval: int):
        import mdtraj

        self._time = first_step * dt_ps
        self._step = dt_ps * interval
        append = path.exists() and path.stat().st_size > 0
        self._f = mdtraj.formats.HDF5TrajectoryFile(str(path), "a" if append else "w")
        if append:
            self._time = float(self._f.root.time[-1]) + self._step
        else:
            self._f.topology = mdtraj.Topology.from_openmm(topology)

    def write(self, xyz: np.ndarray) -> None:
        self._f.write(xyz[None].astype(np.float32), time=np.array([self._time], np.float32))
        self._time += self._step
        self._f.flush()

    @staticmethod
    def truncate(path: Path, nbytes: int, frames: int, first_step: int, interval: int) -> None:
        import tables

        with tables.open_file(str(path), "a") as h:
            for name in ("coordinates", "time", "cell_lengths", "cell_angles", "velocities"):
                if name in h.root:
                    getattr(h.root, name).truncate(frames)

    def close(self) -> None:
        self._f.close()


_WRITERS = {".dcd": _DCDWriter, ".xtc": _XTCWriter, ".h5": _HDF5Writer}


class TrajectoryReporter(Reporter):
    """Write positions every ``interval`` steps; the format follows the extension.

    Parameters
    ----------
    path : str or Path
        ``.dcd`` (default, float32), ``.xtc`` (compressed to 1e-3 nm) or ``.h5`` (mdtraj
        HDF5, needs PyTables). With several walkers, one file per walker
        (:func:`walker_paths`).
    interval : int
        Steps between frames.
    topology : openmm.app.Topology, optional
        For the file headers; toy systems get :func:`dummy_topology`. 1-D and 2-D
        coordinates are written with zero padding in the unused dimensions.
    walkers : sequence of int, optional
        Which walkers to write (default all).
    """

    include = frozenset({"positions"})

    def __init__(self, path, interval: int, topology=None, walkers=None):
        super().__init__(interval)
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in _WRITERS:
            raise ValueError(
                f"unknown trajectory format {self.path.suffix!r}; use .dcd, .xtc or .h5"
            )
        if suffix == ".h5":
            try:
                import tables  # noqa: F401
            except ImportError:
                raise ValueError(
                    "HDF5 trajectories need PyTables (pip install tables); use .dcd or .xtc"
                ) from None
        self._writer_cls = _WRITERS[suffix]
        self.topology = topology
        self.walkers = None if walkers is None else [int(w) for w in walkers]
        self._writers: list | None = None
        self.frames = 0
        self.first_step: int | None = None

    @property
    def key(self) -> str:
        return f"trajectory:{self.path.name}"

    def files(self, n_walkers: int) -> list[Path]:
        """The files this reporter writes for ``n_walkers`` walkers."""
        n = n_walkers if self.walkers is None else len(self.walkers)
        return walker_paths(self.path, n)

    def _open(self, simulation, first_step: int) -> None:
        n_walkers, n_particles = simulation.n_walkers, simulation.n_particles
        if self.walkers is None:
            self.walkers = list(range(n_walkers))
        bad = [w for w in self.walkers if not 0 <= w < n_walkers]
        if bad:
            raise ValueError(f"walkers {bad} do not exist (the run has {n_walkers})")
        top = self.topology if self.topology is not None else dummy_topology(n_particles)
        if top.getNumAtoms() != n_particles:
            raise ValueError(
                f"the topology has {top.getNumAtoms()} atoms but the system {n_particles}"
            )
        if self.first_step is None:
            self.first_step = first_step
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writers = [
            self._writer_cls(p, top, simulation.timestep_ps, self.first_step, self.interval)
            for p in walker_paths(self.path, len(self.walkers))
        ]

    def report(self, simulation, snapshot: Snapshot) -> None:
        if self._writers is None:
            self._open(simulation, snapshot.step)
        for writer, w in zip(self._writers, self.walkers, strict=True):
            writer.write(_as_xyz(np.asarray(snapshot.positions[w], dtype=np.float64)))
        self.frames += 1

    def state_dict(self) -> dict[str, Any]:
        n = 0 if self.walkers is None else len(self.walkers)
        paths = walker_paths(self.path, n) if n else []
        return {
            "frames": self.frames,
            "first_step": -1 if self.first_step is None else self.first_step,
            "walkers": list(self.walkers or []),
            "bytes": [p.stat().st_size if p.exists() else 0 for p in paths],
        }

    def restore(self, state: dict[str, Any] | None) -> None:
        self.close()
        if not state or state["frames"] == 0:
            # No frame at the checkpoint: remove whatever a crashed run wrote after it.
            stale = [self.path, *self.path.parent.glob(f"{self.path.stem}_w[0-9][0-9][0-9]*")]
            for p in stale:
                if p.suffix == self.path.suffix:
                    p.unlink(missing_ok=True)
            self.frames, self.first_step = 0, None
            return
        self.walkers = list(state["walkers"])
        self.frames, self.first_step = int(state["frames"]), int(state["first_step"])
        paths = walker_paths(self.path, len(self.walkers))
        for p, nbytes in zip(paths, state["bytes"], strict=True):
            if not p.exists() or p.stat().st_size < nbytes:
                raise ValueError(
                    f"{p} is shorter than at the checkpoint ({nbytes} bytes): cannot resume"
                )
            self._writer_cls.truncate(p, nbytes, self.frames, self.first_step, self.interval)

    def close(self) -> None:
        for w in self._writers or []:
            w.close()
        self._writers = None


# ---------------------------------------------------------------------- CSV log


class LogReporter(Reporter):
    """CSV log (OpenMM ``StateDataReporter`` columns), one row every ``interval`` steps.

    Columns: ``step``, ``time_ps``, ``potential_energy_kj_mol``, ``temperature_k``,
    ``speed_ns_per_day``. With several walkers, energy and temperature are walker means.
    Temperature is empty for overdamped dynamics (no velocities); for toy potentials in
    reduced units it is :math:`2K/(n_\\mathrm{dof} k_B)` with the energy unit read as
    kJ/mol. Speed is simulated time (per walker) per wall-clock day since the start of the
    current ``run`` call.
    Every row is flushed.
    """

    include = frozenset({"energy", "temperature"})
    COLUMNS = ("step", "time_ps", "potential_energy_kj_mol", "temperature_k", "speed_ns_per_day")

    def __init__(self, path, interval: int):
        super().__init__(interval)
        self.path = Path(path)
        self._fh = None
        self.rows = 0

    @property
    def key(self) -> str:
        return f"log:{self.path.name}"

    def report(self, simulation, snapshot: Snapshot) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append = self.path.exists() and self.path.stat().st_size > 0
            self._fh = open(self.path, "a" if append else "w", encoding="utf-8")
            if not append:
                self._fh.write(",".join(self.COLUMNS) + "\n")
        energy = float(np.mean(snapshot.potential_energy))
        temp = "" if snapshot.temperature is None else f"{float(np.mean(snapshot.temperature)):.4f}"
        speed = simulation.speed_ns_per_day()
        speed_text = "" if speed is None else f"{speed:.4g}"
        row = f"{snapshot.step},{snapshot.time_ps:.6f},{energy:.6f},{temp},{speed_text}\n"
        self._fh.write(row)
        self._fh.flush()
        self.rows += 1

    def state_dict(self) -> dict[str, Any]:
        self.flush()
        size = self.path.stat().st_size if self.path.exists() else 0
        return {"rows": self.rows, "bytes": size}

    def restore(self, state: dict[str, Any] | None) -> None:
        self.close()
        if not state or state["bytes"] == 0:
            self.path.unlink(missing_ok=True)
            self.rows = 0
            return
        if not self.path.exists() or self.path.stat().st_size < state["bytes"]:
            raise ValueError(f"{self.path} is shorter than at the checkpoint: cannot resume")
        with open(self.path, "r+b") as fh:
            fh.truncate(int(state["bytes"]))
        self.rows = int(state["rows"])

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# ---------------------------------------------------------------------- checkpoints, progress


class CheckpointReporter(Reporter):
    """Write an atomic checkpoint every ``interval`` steps (after the other reporters)."""

    is_checkpoint = True

    def __init__(self, path, interval: int):
        super().__init__(interval)
        self.path = Path(path)

    @property
    def key(self) -> str:
        return f"checkpoint:{self.path.name}"

    def report(self, simulation, snapshot: Snapshot) -> None:
        simulation.save_checkpoint(self.path)


class ProgressReporter(Reporter):
    """A tqdm progress bar over ``total_steps`` with ETA and ns/day.

    Parameters
    ----------
    total_steps : int
        The step at which the run ends (the bar starts at the current step).
    interval : int, optional
        Steps between updates (default: ``total_steps / 200``, at least 1).
    disable : bool
        Passed to tqdm (no output).
    """

    def __init__(self, total_steps: int, interval: int | None = None, *, disable=False, **tqdm_kw):
        super().__init__(interval or max(1, int(total_steps) // 200))
        self.total_steps = int(total_steps)
        self.disable = disable
        self._tqdm_kw = tqdm_kw
        self._bar = None

    def report(self, simulation, snapshot: Snapshot) -> None:
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=self.total_steps,
                initial=simulation.run_start_step,
                unit="step",
                disable=self.disable,
                dynamic_ncols=True,
                **self._tqdm_kw,
            )
            self._shown = simulation.run_start_step
        self._bar.update(snapshot.step - self._shown)
        self._shown = snapshot.step
        speed = simulation.speed_ns_per_day()
        if speed is not None:
            self._bar.set_postfix_str(f"{speed:.3g} ns/day", refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
