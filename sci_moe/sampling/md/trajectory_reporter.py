"""Trajectory reporter: positions every ``interval`` steps, in the format of the extension."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .report_protocol import Reporter, Snapshot, file_crc32
from .trajectory_formats import _as_xyz, dummy_topology, trajectory_writer, walker_paths

__all__ = ["TrajectoryReporter"]


class TrajectoryReporter(Reporter):
    """Write positions every ``interval`` steps; the format follows the extension.

    Parameters
    ----------
    path : str or Path
        ``.dcd`` (default, float32), ``.xtc`` (compressed to 1e-3 nm), ``.h5`` (mdtraj
        HDF5, needs PyTables) or any extension added with
        :func:`~sci_moe.sampling.md.register_trajectory_writer`. With several walkers, one
        file per walker (:func:`walker_paths`).
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
        self._writer_cls = trajectory_writer(self.path)
        self.topology = topology
        self.walkers = None if walkers is None else [int(w) for w in walkers]
        self._writers: list | None = None
        self.frames = 0
        self.first_step: int | None = None
        self._masked = getattr(self._writer_cls, "checksum_masked", None)
        self._crc: dict[Path, tuple[int, int]] = {}  # path -> (bytes covered, CRC-32)

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

    def _checksum(self, path: Path, size: int) -> int:
        done, crc = self._crc.get(path, (0, 0))
        if size < done:  # pragma: no cover - truncated under us
            done, crc = 0, 0
        crc = file_crc32(path, done, size, crc, self._masked)
        self._crc[path] = (size, crc)
        return crc

    def state_dict(self) -> dict[str, Any]:
        n = 0 if self.walkers is None else len(self.walkers)
        paths = walker_paths(self.path, n) if n else []
        sizes = [p.stat().st_size if p.exists() else 0 for p in paths]
        state = {
            "frames": self.frames,
            "first_step": -1 if self.first_step is None else self.first_step,
            "walkers": list(self.walkers or []),
            "bytes": sizes,
        }
        if self._masked is not None:
            state["crc32"] = [self._checksum(p, b) for p, b in zip(paths, sizes, strict=True)]
        return state

    def verify(self, state: dict[str, Any] | None) -> None:
        if not state or state["frames"] == 0:
            return
        paths = walker_paths(self.path, len(state["walkers"]))
        crcs = state.get("crc32") if self._masked is not None else None
        for k, (p, nbytes) in enumerate(zip(paths, state["bytes"], strict=True)):
            size = p.stat().st_size if p.exists() else None
            if size is None or size < nbytes:
                have = "is missing" if size is None else f"has {size} bytes"
                raise ValueError(
                    f"{p} {have}, {nbytes} at the checkpoint: cannot resume (nothing was "
                    "changed); restore the file, or start again with --overwrite"
                )
            if crcs is not None and file_crc32(p, 0, nbytes, 0, self._masked) != crcs[k]:
                raise ValueError(
                    f"{p} was changed or corrupted before the checkpoint (CRC-32 of its first "
                    f"{nbytes} bytes, {state['frames']} frames, differs): cannot resume "
                    "(nothing was changed); restore the file, or start again with --overwrite"
                )

    def restore(self, state: dict[str, Any] | None) -> None:
        self.close()
        self._crc = {}
        if not state or state["frames"] == 0:
            # No frame at the checkpoint: remove whatever a crashed run wrote after it.
            stale = [self.path, *self.path.parent.glob(f"{self.path.stem}_w[0-9][0-9][0-9]*")]
            for p in stale:
                if p.suffix == self.path.suffix:
                    p.unlink(missing_ok=True)
            self.frames, self.first_step = 0, None
            return
        self.verify(state)
        self.walkers = list(state["walkers"])
        self.frames, self.first_step = int(state["frames"]), int(state["first_step"])
        paths = walker_paths(self.path, len(self.walkers))
        crcs = state.get("crc32") if self._masked is not None else None
        for k, (p, nbytes) in enumerate(zip(paths, state["bytes"], strict=True)):
            self._writer_cls.truncate(p, nbytes, self.frames, self.first_step, self.interval)
            if crcs is not None:
                self._crc[p] = (int(nbytes), int(crcs[k]))

    def close(self) -> None:
        for w in self._writers or []:
            w.close()
        self._writers = None
