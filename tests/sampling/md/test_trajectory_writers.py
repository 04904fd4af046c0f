"""The trajectory-writer registry: extension -> writer class, user-registered formats."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.sampling.md import (
    DoubleWell,
    LangevinBAOAB,
    PotentialForces,
    Simulation,
    TrajectoryReporter,
    TrajectoryWriter,
    register_trajectory_writer,
    trajectory_writers,
)
from sci_moe.sampling.md.trajectory_formats import trajectory_writer


class NpyLines(TrajectoryWriter):
    """A toy text format: one line of 3N numbers per frame (exact truncation by bytes)."""

    def __init__(self, path, topology, dt_ps, first_step, interval):
        self._fh = open(path, "a")

    def write(self, xyz):
        self._fh.write(" ".join(f"{v:.6f}" for v in np.ravel(xyz)) + "\n")
        self._fh.flush()

    @staticmethod
    def truncate(path, nbytes, frames, first_step, interval):
        with open(path, "r+b") as fh:
            fh.truncate(nbytes)

    def close(self):
        self._fh.close()


def test_builtin_extensions_are_registered():
    assert {".dcd", ".xtc", ".h5"} <= set(trajectory_writers())
    assert trajectory_writer("a/b/traj.DCD") is trajectory_writers()[".dcd"]


def test_unknown_extension_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown trajectory format.*\.dcd.*\.xtc"):
        TrajectoryReporter("traj.pdbx", 10)
    with pytest.raises(ValueError, match="known extensions"):
        trajectory_writer("traj")


def test_registered_writer_is_used_and_resumes(tmp_path, monkeypatch):
    import sci_moe.sampling.md.trajectory_formats as tw

    monkeypatch.setattr(tw, "_REGISTRY", dict(tw._REGISTRY))
    register_trajectory_writer("txyz", NpyLines)
    with pytest.raises(ValueError, match="already written"):
        register_trajectory_writer(".TXYZ", type("Other", (NpyLines,), {}))
    with pytest.raises(ValueError, match="write, truncate and close"):
        register_trajectory_writer(".bad", object)
    prov = PotentialForces(DoubleWell())
    x0 = torch.zeros(1, 1, 1, dtype=torch.float64)
    path = tmp_path / "t.txyz"
    sim = Simulation(prov, LangevinBAOAB(0.01, kT=1.0), x0, [TrajectoryReporter(path, 5)])
    sim.run(20)
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and all(len(line.split()) == 3 for line in lines)
    state = sim.reporters[0].state_dict()
    with open(path, "a") as fh:
        fh.write("stale frame written after the checkpoint\n")
    sim.reporters[0].restore(state)
    assert path.read_text().splitlines() == lines
