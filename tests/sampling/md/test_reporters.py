"""Reporter protocol (intervals, requested fields), trajectory/log files and truncation."""

from __future__ import annotations

import mdtraj
import numpy as np
import pytest
import torch

from sci_moe.sampling.md import DoubleWell, LangevinBAOAB, MuellerBrown, PotentialForces
from sci_moe.sampling.md.reporters import (
    LogReporter,
    ProgressReporter,
    Reporter,
    ReportRequest,
    TrajectoryReporter,
    dummy_topology,
    walker_paths,
)
from sci_moe.sampling.md.simulation import Simulation


class Recorder(Reporter):
    def __init__(self, interval, include):
        super().__init__(interval)
        self.include = frozenset(include)
        self.seen = []

    def report(self, simulation, snapshot):
        assert snapshot.step == simulation.current_step
        self.seen.append(
            (snapshot.step, snapshot.positions is not None, snapshot.potential_energy is not None)
        )


def _sim(reporters, walkers=2, dim=2, seed=0):
    pot = MuellerBrown() if dim == 2 else DoubleWell(dim=1)
    provider = PotentialForces(pot, torch.full((1,), 0.5))
    start = [-0.558, 1.442] if dim == 2 else [-1.0]
    x0 = torch.tensor(start, dtype=torch.float64).view(1, 1, dim).repeat(walkers, 1, 1)
    return Simulation(provider, LangevinBAOAB(0.005, kT=23.0), x0, reporters, seed=seed)


def test_intervals_and_union_of_fields():
    a, b = Recorder(3, {"positions"}), Recorder(5, {"energy"})
    sim = _sim([a, b])
    sim.run(16)
    assert [s for s, *_ in a.seen] == [3, 6, 9, 12, 15]
    assert [s for s, *_ in b.seen] == [5, 10, 15]
    # At step 15 both are due: one snapshot carries both fields.
    assert a.seen[-1] == (15, True, True) and b.seen[-1] == (15, True, True)
    assert a.seen[0] == (3, True, False)
    sim.run(4)  # intervals count from step 0, across run() calls
    assert [s for s, *_ in a.seen][-2:] == [15, 18] and b.seen[-1][0] == 20


def test_request_validation():
    with pytest.raises(ValueError, match="at least one step"):
        ReportRequest(0)
    with pytest.raises(ValueError, match="unknown report fields"):
        ReportRequest(1, frozenset({"forces2"}))
    with pytest.raises(ValueError, match="positive integer"):
        LogReporter("x.csv", 0)
    with pytest.raises(ValueError, match="unknown trajectory format"):
        TrajectoryReporter("x.pdb", 1)


@pytest.mark.parametrize("suffix, atol", [(".dcd", 1e-6), (".xtc", 1.1e-3)])
def test_trajectory_frames_equal_positions(tmp_path, suffix, atol):
    frames = []

    class Keep(Reporter):
        include = frozenset({"positions"})

        def report(self, simulation, snapshot):
            frames.append(snapshot.positions.copy())

    traj = TrajectoryReporter(tmp_path / f"t{suffix}", 4)
    sim = _sim([traj, Keep(4)], walkers=2)
    sim.run(20)
    sim.close()
    top = tmp_path / "top.pdb"
    from openmm.app import PDBFile

    with open(top, "w") as fh:
        PDBFile.writeFile(dummy_topology(1), np.zeros((1, 3)), fh)
    paths = walker_paths(tmp_path / f"t{suffix}", 2)
    assert [p.name for p in paths] == [f"t_w000{suffix}", f"t_w001{suffix}"]
    for w, p in enumerate(paths):
        xyz = mdtraj.load(str(p), top=str(top)).xyz
        expect = np.stack([f[w] for f in frames])
        assert xyz.shape == (5, 1, 3)
        np.testing.assert_allclose(xyz[:, :, :2], expect, atol=atol)
        assert np.all(xyz[:, :, 2] == 0)  # 2-D toy coordinates padded with zeros


def _has_pytables() -> bool:
    try:
        import tables  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(
    "suffix",
    [
        ".dcd",
        ".xtc",
        pytest.param(".h5", marks=pytest.mark.skipif(not _has_pytables(), reason="no PyTables")),
    ],
)
def test_truncate_and_append(tmp_path, suffix):
    top = dummy_topology(1)

    class FakeSim:
        n_walkers, n_particles, timestep_ps, current_step = 1, 1, 0.002, 0

    rep = TrajectoryReporter(tmp_path / f"t{suffix}", 10, top)
    log = LogReporter(tmp_path / "log.csv", 10)
    fake = FakeSim()
    fake.speed_ns_per_day = lambda: 1.0
    from sci_moe.sampling.md.reporters import Snapshot

    def write(step):
        fake.current_step = step
        snap = Snapshot(
            step,
            step * 0.002,
            positions=np.full((1, 1, 3), step / 100.0),
            potential_energy=np.array([float(step)]),
        )
        rep.report(fake, snap)
        log.report(fake, snap)

    for s in (10, 20, 30):
        write(s)
    saved, saved_log = rep.state_dict(), log.state_dict()
    for s in (40, 50):  # written after the checkpoint, lost in the "crash"
        write(s)
    rep.close()
    log.close()
    rep2 = TrajectoryReporter(tmp_path / f"t{suffix}", 10, top)
    log2 = LogReporter(tmp_path / "log.csv", 10)
    rep2.restore(saved)
    log2.restore(saved_log)
    for s in (40, 50, 60):
        fake.current_step = s
        snap = Snapshot(
            s,
            s * 0.002,
            positions=np.full((1, 1, 3), -s / 100.0),
            potential_energy=np.array([float(-s)]),
        )
        rep2.report(fake, snap)
        log2.report(fake, snap)
    rep2.close()
    log2.close()
    from openmm.app import PDBFile

    with open(tmp_path / "top.pdb", "w") as fh:
        PDBFile.writeFile(top, np.zeros((1, 3)), fh)
    top_kw = {} if suffix == ".h5" else {"top": str(tmp_path / "top.pdb")}  # h5 holds its own
    xyz = mdtraj.load(str(tmp_path / f"t{suffix}"), **top_kw).xyz[:, 0, 0]
    np.testing.assert_allclose(xyz, [0.1, 0.2, 0.3, -0.4, -0.5, -0.6], atol=1e-3)
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert rows[0].startswith("step,time_ps,potential_energy_kj_mol,temperature_k,speed")
    assert [int(r.split(",")[0]) for r in rows[1:]] == [10, 20, 30, 40, 50, 60]
    assert [float(r.split(",")[2]) for r in rows[1:]] == [10, 20, 30, -40, -50, -60]
    if suffix == ".dcd":  # the header's frame count follows the truncation
        import struct

        with open(tmp_path / "t.dcd", "rb") as fh:
            fh.seek(8)
            assert struct.unpack("<i", fh.read(4))[0] == 6


def test_log_columns_and_progress(tmp_path):
    log = LogReporter(tmp_path / "log.csv", 5)
    bar = ProgressReporter(20, disable=True)
    sim = _sim([log, bar], walkers=3)
    sim.run(20)
    sim.close()
    lines = (tmp_path / "log.csv").read_text().splitlines()
    assert len(lines) == 5
    assert lines[0].split(",") == list(LogReporter.COLUMNS)
    step, time_ps, energy, temp, speed, speed_all = lines[-1].split(",")
    assert int(step) == 20 and float(time_ps) == pytest.approx(0.1)
    assert float(temp) > 0 and float(speed) > 0
    # issue 40: the sampling rate summed over the 3 walkers next to the per-walker one
    assert float(speed_all) == pytest.approx(3 * float(speed), rel=2e-3)
    e = sim.snapshot().potential_energy.mean()
    assert float(energy) == pytest.approx(e, rel=1e-6)


def test_log_of_an_older_version_keeps_its_columns(tmp_path):
    """Resuming into a five-column log (written before the summed speed existed) appends
    five-column rows, so the file stays one table."""
    old = ",".join(LogReporter.COLUMNS[:5])
    (tmp_path / "log.csv").write_text(old + "\n1,0.002,1.0,300.0,5.0\n")
    log = LogReporter(tmp_path / "log.csv", 5)
    sim = _sim([log], walkers=2)
    sim.run(10)
    sim.close()
    lines = (tmp_path / "log.csv").read_text().splitlines()
    assert lines[0] == old and len(lines) == 4
    assert {len(r.split(",")) for r in lines} == {5}


def test_hdf5_needs_pytables(tmp_path):
    try:
        import tables  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="PyTables"):
            TrajectoryReporter(tmp_path / "t.h5", 1)
        return
    rep = TrajectoryReporter(tmp_path / "t.h5", 2)
    sim = _sim([rep], walkers=1)
    sim.run(6)
    sim.close()
    assert mdtraj.load(str(tmp_path / "t.h5")).n_frames == 3
