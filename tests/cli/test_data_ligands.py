"""``sci-moe data ligands``: options, clear errors, one tiny build."""

from __future__ import annotations

import json

import pytest

from sci_moe.cli.main import main


def test_data_ligands_errors(tmp_path, capsys):
    for argv, msg in (
        (["--n", "0"], "--n must be >= 1"),
        (["--workers", "0"], "--workers must be >= 1"),
        (["--max-confs", "0"], "--max-confs must be >= 1"),
    ):
        assert main(["data", "ligands", "--out", str(tmp_path / "o"), *argv]) == 2
        assert msg in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --full and --n exclude each other
        main(["data", "ligands", "--out", str(tmp_path / "o"), "--full", "--n", "3"])


def test_data_ligands_tiny_build(tmp_path, capsys, monkeypatch):
    # a tiny ligand instead of the enumeration (the builder itself is tested in tests/data)
    monkeypatch.setattr(
        "sci_moe.data.ligands_build.choose_ligands",
        lambda n, seed, classes: [("PR3-tiny", "CCP(C)C", "phosphine")],
    )
    out = tmp_path / "lig"
    argv = ["data", "ligands", "--out", str(out), "--n", "1", "--max-confs", "1"]
    assert main([*argv, "--workers", "1", "--no-progress"]) in (0, None)
    text = capsys.readouterr().out
    assert "1 ligands" in text and "0 UFF fallbacks" in text
    rep = json.loads((out / "report.json").read_text())
    assert rep["n_ligands"] == 1 and rep["classes"] == {"PR3": 1}
    assert "sterimol_B5_min" in rep["statistics"]
    assert (out / "checksums.sha256").exists()
