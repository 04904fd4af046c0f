"""Issue 27: toy systems run in reduced units, so their logs and messages claim no fs, K,
kJ/mol or ns/day; OpenMM systems keep OpenMM's units."""

from __future__ import annotations

import numpy as np

from sci_moe.cli.main import main
from sci_moe.sampling.md import LogReporter
from sci_moe.sampling.md.analysis import read_log


def test_toy_run_logs_reduced_units(tmp_path, capsys):
    out = tmp_path / "dw"
    argv = ["md", "run", "--system", "double-well", "--steps", "3000", "--report-interval"]
    argv += ["50", "--no-progress", "--seed", "0", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert " fs" not in printed and "ns/day" not in printed
    assert "reduced time units" in printed
    header = (out / "log.csv").read_text().splitlines()[0]
    assert header == ",".join(LogReporter.REDUCED_COLUMNS)
    log = read_log(out / "log.csv")
    # 2K/n_dof in energy units: thermalises to kT = 1 (not kelvin-scaled, ~120 "K")
    temp = log["temperature"][len(log["temperature"]) // 2 :]
    assert 0.6 < np.mean(temp) < 1.5
    assert np.array_equal(log["potential_energy_kj_mol"], log["potential_energy"])  # one reader


def test_openmm_units_unchanged(tmp_path):
    rep = LogReporter(tmp_path / "log.csv", 10)
    assert rep.columns == LogReporter.COLUMNS
    assert "temperature_k" in rep.columns and "potential_energy_kj_mol" in rep.columns
