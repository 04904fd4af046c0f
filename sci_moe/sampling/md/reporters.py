"""Reporters for :class:`~sci_moe.sampling.md.Simulation`, following OpenMM's app layer.

This module is the public face of the reporters; each concept lives in its own module:

:mod:`~sci_moe.sampling.md.report_protocol`
    :class:`Reporter`, :class:`ReportRequest`, :class:`Snapshot`, :data:`FIELDS`: the
    ``describe_next_report`` / ``report`` protocol (OpenMM's ``describeNextReport``) and the
    ``state_dict`` / ``restore`` pair that makes resumed files equal uninterrupted ones.
:mod:`~sci_moe.sampling.md.trajectory_formats`
    DCD, XTC (OpenMM's writers) and HDF5 (mdtraj, needs PyTables) writers in a registry by
    extension; :func:`register_trajectory_writer` adds formats.
:class:`TrajectoryReporter` (:mod:`~sci_moe.sampling.md.trajectory_reporter`)
    Positions every ``interval`` steps; one file per walker.
:class:`LogReporter` (:mod:`~sci_moe.sampling.md.log_reporter`)
    CSV: step, time (ps), potential energy (kJ/mol), temperature (K), speed (ns/day),
    flushed every row.
:class:`CheckpointReporter`, :class:`ProgressReporter` (:mod:`~sci_moe.sampling.md.run_reporters`)
    Atomic checkpoints every ``interval`` steps; a tqdm bar with ETA and ns/day.
"""

from __future__ import annotations

from .log_reporter import LogReporter
from .report_protocol import FIELDS, Reporter, ReportRequest, Snapshot
from .run_reporters import CheckpointReporter, ProgressReporter
from .trajectory_formats import (
    TrajectoryWriter,
    dummy_topology,
    register_trajectory_writer,
    trajectory_writer,
    trajectory_writers,
    walker_paths,
)
from .trajectory_reporter import TrajectoryReporter

__all__ = [
    "FIELDS",
    "CheckpointReporter",
    "LogReporter",
    "ProgressReporter",
    "ReportRequest",
    "Reporter",
    "Snapshot",
    "TrajectoryReporter",
    "TrajectoryWriter",
    "dummy_topology",
    "register_trajectory_writer",
    "trajectory_writer",
    "trajectory_writers",
    "walker_paths",
]
