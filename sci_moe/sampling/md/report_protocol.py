"""The reporter protocol of the MD run layer, following OpenMM's app layer.

Every reporter answers :meth:`Reporter.describe_next_report` with a :class:`ReportRequest`
(steps until it next wants data, and which fields); the run loop steps exactly to the
nearest due report, builds **one** :class:`Snapshot` with the union of the requested fields
and hands it to every reporter that is due (OpenMM's ``describeNextReport``/``report``).

Reporters that write files expose :meth:`Reporter.state_dict` (bytes and frames written,
and a CRC-32 of the file up to there) which checkpoints store, :meth:`Reporter.verify`
which checks a file against that record without changing it, and :meth:`Reporter.restore`
which truncates the file back to that point on ``--resume``, so that the resumed output
equals an uninterrupted run's, with nothing lost or duplicated. A run loop verifies every
reporter before it restores any, so a refused resume leaves every file as it was. Other
run loops (e.g. OpenMM simulated tempering, :mod:`sci_moe.sampling.tempering`) drive the
same protocol with their own snapshots.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FIELDS", "ReportRequest", "Reporter", "Snapshot", "file_crc32"]


def file_crc32(
    path: str | Path,
    start: int,
    stop: int,
    crc: int = 0,
    masked: tuple[tuple[int, int], ...] = (),
) -> int:
    """CRC-32 of bytes ``[start, stop)`` of ``path``, continuing ``crc`` (``zlib.crc32``).

    Continuing lets a writer checksum only what was appended since the last checkpoint.
    ``masked`` byte ranges ``[a, b)`` count as zeros (header fields a writer rewrites as
    it appends, e.g. a DCD's frame count).
    """
    start, stop = int(start), int(stop)
    with open(path, "rb") as fh:
        fh.seek(start)
        pos = start
        while pos < stop:
            data = bytearray(fh.read(min(1 << 20, stop - pos)))
            if not data:
                raise ValueError(f"{path} ends at byte {pos}, before {stop}")
            for a, b in masked:
                lo, hi = max(a, pos), min(b, pos + len(data))
                if lo < hi:
                    data[lo - pos : hi - pos] = bytes(hi - lo)
            crc = zlib.crc32(data, crc)
            pos += len(data)
    return crc


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

    def verify(self, state: dict[str, Any] | None) -> None:
        """Raise ``ValueError`` (naming the file and what to do) if this reporter's output
        cannot continue from ``state``: missing, shorter than at the checkpoint, or changed
        before the checkpointed size. Changes nothing."""

    def restore(self, state: dict[str, Any] | None) -> None:
        """Truncate this reporter's output back to ``state`` (from a checkpoint) and append."""

    def flush(self) -> None:
        """Make everything written so far durable (called before each checkpoint)."""

    def close(self) -> None:
        """Release files (called when a run ends, normally or not)."""
