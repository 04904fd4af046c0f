"""The reporter protocol of the MD run layer, following OpenMM's app layer.

Every reporter answers :meth:`Reporter.describe_next_report` with a :class:`ReportRequest`
(steps until it next wants data, and which fields); the run loop steps exactly to the
nearest due report, builds **one** :class:`Snapshot` with the union of the requested fields
and hands it to every reporter that is due (OpenMM's ``describeNextReport``/``report``).

Reporters that write files expose :meth:`Reporter.state_dict` (bytes and frames written)
which checkpoints store, and :meth:`Reporter.restore` which truncates the file back to that
point on ``--resume``, so that the resumed output equals an uninterrupted run's, with
nothing lost or duplicated. Other run loops (e.g. OpenMM simulated tempering,
:mod:`sci_moe.sampling.tempering`) drive the same protocol with their own snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FIELDS", "ReportRequest", "Reporter", "Snapshot"]

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
