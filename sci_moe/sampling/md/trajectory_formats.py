"""Trajectory file writers, chosen by file extension from a registry.

A writer class is registered for an extension with :func:`register_trajectory_writer`
(``.dcd``, ``.xtc`` and ``.h5`` are built in) and found with :func:`trajectory_writer`,
which raises a ``ValueError`` listing the known extensions for any other. A writer
follows :class:`TrajectoryWriter`: it appends frames ``(N, 3)`` in nm and can truncate a
file back to a checkpointed size (exact resume). A writer whose file only grows at the
end sets :attr:`TrajectoryWriter.checksum_masked` (the header bytes it rewrites) so that
checkpoints record a CRC-32 of the file, verified on resume.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "TrajectoryWriter",
    "dummy_topology",
    "read_trajectory",
    "register_trajectory_writer",
    "trajectory_writer",
    "trajectory_writers",
    "walker_paths",
]


class TrajectoryWriter:
    """Interface of a trajectory writer (subclassing is optional; the methods are what count).

    Parameters
    ----------
    path : Path
        File to write; appended to when it exists and is not empty.
    topology : openmm.app.Topology
    dt_ps : float
        Timestep, ps.
    first_step : int
        Step of the file's first frame.
    interval : int
        Steps between frames.
    """

    #: Byte ranges ``[a, b)`` the writer rewrites as it appends (counted as zeros in the
    #: checksum), or ``None``: the file is not append-only and is not checksummed.
    checksum_masked: tuple[tuple[int, int], ...] | None = None

    def __init__(self, path: Path, topology, dt_ps: float, first_step: int, interval: int):
        raise NotImplementedError  # pragma: no cover - interface

    @classmethod
    def check_available(cls) -> None:
        """Raise ``ValueError`` (saying what to install) if a dependency is missing."""

    def write(self, xyz: np.ndarray) -> None:  # pragma: no cover - interface
        """Append one frame, shape (N, 3), nm."""
        raise NotImplementedError

    @staticmethod
    def truncate(path: Path, nbytes: int, frames: int, first_step: int, interval: int) -> None:
        """Cut ``path`` back to ``frames`` frames (``nbytes`` bytes) written at a checkpoint."""
        raise NotImplementedError  # pragma: no cover - interface

    def close(self) -> None:
        """Release the file."""


def dummy_topology(n_particles: int):
    """An OpenMM topology of ``n_particles`` unnamed particles (for toy potentials)."""
    from openmm import app

    top = app.Topology()
    chain = top.addChain()
    for i in range(n_particles):
        res = top.addResidue("UNK", chain)
        top.addAtom(f"X{i}", None, res)
    return top


def read_trajectory(path: str | Path, topology: str | Path):
    """Read a trajectory file with mdtraj, from any path.

    mdtraj's DCD and XTC readers encode the file name as ASCII and fail on any other
    character ("'ascii' codec can't encode"), although the writers here handle any path.
    A non-ASCII path is read through symbolic links (copies where links are not supported)
    in an ASCII temporary folder.

    Parameters
    ----------
    path : str or Path
        The trajectory (``.dcd``, ``.xtc``, ``.h5``, ... anything ``mdtraj.load`` reads).
    topology : str or Path
        Its topology (PDB).

    Returns
    -------
    mdtraj.Trajectory

    Raises
    ------
    ValueError
        If a non-ASCII path does not exist, or the temporary folder is not ASCII either
        (set ``TMPDIR``).
    """
    import mdtraj

    paths = [Path(path), Path(topology)]
    if all(str(p).isascii() for p in paths):
        return mdtraj.load(str(paths[0]), top=str(paths[1]))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"no file {missing[0]}")
    with tempfile.TemporaryDirectory(prefix="sci-moe-read-") as tmp:
        if not tmp.isascii():
            raise ValueError(
                f"cannot read {path}: mdtraj reads ASCII paths only, and the temporary folder "
                f"{tmp} is not ASCII either; set TMPDIR to an ASCII folder"
            )
        links = []
        for i, p in enumerate(paths):
            link = Path(tmp) / f"file{i}{p.suffix if p.suffix.isascii() else ''}"
            try:
                link.symlink_to(p.resolve())
            except OSError:  # pragma: no cover - file systems without symbolic links
                shutil.copyfile(p, link)
            links.append(link)
        return mdtraj.load(str(links[0]), top=str(links[1]))


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


class _DCDWriter(TrajectoryWriter):
    """OpenMM's DCDFile with exact truncation (frames are fixed size after the header)."""

    # frame count, first/last step, interval (bytes 8-24) and dt (44-48) are rewritten
    checksum_masked = ((8, 24), (44, 48))

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


class _XTCWriter(TrajectoryWriter):
    """OpenMM's XTCFile (each frame is appended and the file closed: always durable)."""

    checksum_masked = ()

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


class _HDF5Writer(TrajectoryWriter):
    """mdtraj's HDF5 format (needs PyTables); truncation shrinks the frame arrays."""

    @classmethod
    def check_available(cls) -> None:
        _require_tables()

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


def _require_tables() -> None:
    try:
        import tables  # noqa: F401
    except ImportError:
        raise ValueError(
            "HDF5 trajectories need PyTables (pip install tables); use .dcd or .xtc"
        ) from None


_REGISTRY: dict[str, type] = {".dcd": _DCDWriter, ".xtc": _XTCWriter, ".h5": _HDF5Writer}


def _normalise_extension(extension: str) -> str:
    if not isinstance(extension, str) or not extension.strip("."):
        raise ValueError(f"extension must be a string such as '.dcd', got {extension!r}")
    ext = extension.lower()
    return ext if ext.startswith(".") else f".{ext}"


def register_trajectory_writer(extension: str, writer: type, *, replace: bool = False) -> None:
    """Make :class:`~sci_moe.sampling.md.TrajectoryReporter` write ``extension`` with ``writer``.

    Parameters
    ----------
    extension : str
        File extension, with or without the dot (case-insensitive), e.g. ``".nc"``.
    writer : type
        A class following :class:`TrajectoryWriter` (constructor
        ``(path, topology, dt_ps, first_step, interval)``, ``write``, ``truncate``,
        ``close``; ``check_available`` optional).
    replace : bool
        Allow replacing the writer of an extension that is already registered.

    Raises
    ------
    ValueError
        If the extension is taken (and ``replace`` is false) or ``writer`` lacks a method.
    """
    ext = _normalise_extension(extension)
    missing = [m for m in ("write", "truncate", "close") if not callable(getattr(writer, m, None))]
    if not isinstance(writer, type) or missing:
        raise ValueError(
            f"a trajectory writer must be a class with write, truncate and close methods "
            f"(see TrajectoryWriter); {writer!r} lacks {missing or 'a class'}"
        )
    if ext in _REGISTRY and _REGISTRY[ext] is not writer and not replace:
        raise ValueError(
            f"{ext} is already written by {_REGISTRY[ext].__name__}; pass replace=True to "
            "replace it"
        )
    _REGISTRY[ext] = writer


def trajectory_writers() -> dict[str, type]:
    """The registered writers, ``{extension: writer class}`` (a copy)."""
    return dict(_REGISTRY)


def trajectory_writer(path: str | Path) -> type:
    """The writer class for ``path``'s extension, checked to be usable.

    Raises
    ------
    ValueError
        For an unknown extension (the message lists the known ones) or a writer whose
        dependency is missing.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(
            f"unknown trajectory format {Path(path).suffix or '(no extension)'!r} for {path}; "
            f"known extensions: {known} (register_trajectory_writer adds one)"
        )
    cls = _REGISTRY[suffix]
    check = getattr(cls, "check_available", None)
    if check is not None:
        check()
    return cls
