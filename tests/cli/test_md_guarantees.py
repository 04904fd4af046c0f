"""Issue 27 ("nothing lost, nothing silent") for ``sci-moe md run``, through the real
``sci-moe`` entry point: refused resumes change nothing, corruption and concurrent writers
are caught, a full disk exits 3 with the checkpoint intact, no silent defaults."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from sci_moe._util import lock_directory
from sci_moe.cli.main import main

TOY = ["md", "run", "--system", "double-well", "--no-progress", "--report-interval", "10"]
_EXE = Path(sys.executable).with_name("sci-moe")


def sci_moe(*argv, limit_bytes=None, timeout=120):
    """Run the installed ``sci-moe`` command; ``limit_bytes`` sets ``ulimit -f``."""
    cmd = [str(_EXE)] if _EXE.exists() else [sys.executable, "-m", "sci_moe.cli.main"]

    def preexec():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [*cmd, *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=preexec,
    )


def _files(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _finished(tmp_path, steps=100, *extra) -> Path:
    out = tmp_path / "run"
    argv = [*TOY, "--steps", str(steps), "--checkpoint-interval", "50", *extra, "--out", str(out)]
    assert main(argv) == 0
    return out


def test_refused_resume_changes_nothing(tmp_path):
    out = _finished(tmp_path)
    with open(out / "trajectory.dcd", "ab") as fh:  # a frame written after the checkpoint
        fh.write(b"\0" * 24)
    log = (out / "log.csv").read_bytes()
    (out / "log.csv").write_bytes(log[:-5])  # truncated log
    before = _files(out)
    proc = sci_moe("md", "run", "--out", out, "--resume", "--steps", 200, "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert "log.csv" in proc.stderr and "nothing was changed" in proc.stderr
    assert _files(out) == before


def test_corrupted_trajectory_is_refused_on_resume(tmp_path):
    out = _finished(tmp_path)
    dcd = out / "trajectory.dcd"
    data = bytearray(dcd.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 50] = os.urandom(50)  # same size, garbage in the middle
    dcd.write_bytes(bytes(data))
    before = _files(out)
    proc = sci_moe("md", "run", "--out", out, "--resume", "--steps", 200, "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert "trajectory.dcd" in proc.stderr and "corrupted" in proc.stderr
    assert "--overwrite" in proc.stderr
    assert _files(out) == before


def test_second_writer_on_the_same_out_is_refused(tmp_path):
    out = _finished(tmp_path)
    before = _files(out)
    with lock_directory(out, command="first run"):  # a run in progress holds --out
        proc = sci_moe("md", "run", "--out", out, "--resume", "--steps", 200, "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert f"in use by process {os.getpid()}" in proc.stderr and "first run" in proc.stderr
    assert _files(out) == before


def test_full_disk_exits_3_and_keeps_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    argv = [*TOY[1:], "--steps", 4000, "--report-interval", 1, "--checkpoint-interval", 200]
    proc = sci_moe(*TOY[:1], *argv, "--out", out, limit_bytes=30_000)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "file-size limit" in proc.stderr
    assert "--resume" in proc.stderr
    from sci_moe.sampling.md import load_checkpoint

    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert 0 < ckpt["step"] < 4000
    assert main(["md", "run", "--out", str(out), "--resume", "--no-progress"]) == 0
    assert len((out / "log.csv").read_text().splitlines()) == 4001  # header + every step


def test_forcefield_without_system_uses_the_force_field(tmp_path):
    out = tmp_path / "ff"
    proc = sci_moe(
        "md", "run", "--forcefield", "amber14", "--steps", 4, "--report-interval", 2,
        "--no-minimize", "--no-progress", "--out", out,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["model"] is None and cfg["forcefield"] == "amber14"
    assert cfg["extra"]["engine"] == "openmm" and "amber14" in cfg["extra"]["system_description"]


def test_wrong_config_types_are_errors(tmp_path):
    conf = tmp_path / "md.toml"
    conf.write_text('system = "double-well"\ndeterministic = "false"\n')
    out = tmp_path / "run"
    proc = sci_moe("md", "run", "--config", conf, "--steps", 10, "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert "'deterministic'" in proc.stderr and "--deterministic" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_steps_below_report_interval_says_nothing_was_written(tmp_path):
    out = tmp_path / "run"
    proc = sci_moe(*TOY, "--steps", 5, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "trajectory, log.csv" not in proc.stdout
    assert "no trajectory frame or log row" in proc.stdout
    assert not (out / "log.csv").exists()


def test_resume_after_early_failure_suggests_what_works(tmp_path):
    out = tmp_path / "run"
    bad = ["--steps", "500", "--timestep-fs", "900", "--energy-jump-kj-mol", "50"]
    assert main([*TOY, *bad, "--out", str(out)]) == 1  # fails before any checkpoint
    proc = sci_moe("md", "run", "--out", out, "--resume", "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert "without --resume" not in proc.stderr and "--overwrite" in proc.stderr
    assert main([*TOY, "--steps", "20", "--out", str(out), "--overwrite"]) == 0  # that works


def test_resume_with_a_smaller_timestep_needs_the_flag_and_is_recorded(tmp_path):
    out = _finished(tmp_path, 100)
    before = _files(out)
    assert main(["md", "run", "--out", str(out), "--resume", "--timestep-fs", "5"]) == 2
    assert _files(out) == before
    proc = sci_moe(
        "md", "run", "--out", out, "--resume", "--change-timestep", "--timestep-fs", 5,
        "--steps", 120, "--no-progress",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["timestep_fs"] == 5.0
    assert cfg["extra"]["history"] == [
        {"change": "timestep_fs", "from": 10.0, "to": 5.0, "step": 100}
    ]
    rows = [r.split(",") for r in (out / "log.csv").read_text().splitlines()[1:]]
    times = {int(r[0]): float(r[1]) for r in rows}
    assert times[100] == 1.0 and times[120] == 1.0 + 20 * 0.005  # time continues


def test_empty_pdb_is_a_clear_error(tmp_path):
    pdb = tmp_path / "empty.pdb"
    pdb.write_text("")
    proc = sci_moe("md", "run", "--system", pdb, "--steps", 10, "--out", tmp_path / "o")
    assert proc.returncode == 2, proc.stderr
    assert "no ATOM/HETATM records" in proc.stderr and "IndexError" not in proc.stderr


def test_train_spice_refuses_a_finished_out(tmp_path):
    out = tmp_path / "spice"
    out.mkdir()
    for name in ("config.yaml", "checkpoint.pt", "results.json"):
        (out / name).write_text("previous run")
    before = _files(out)
    proc = sci_moe("train", "spice", "--data", tmp_path / "nodata", "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert "already holds a run" in proc.stderr and "--overwrite" in proc.stderr
    assert _files(out) == before
    proc = sci_moe("train", "spice", "--data", tmp_path / "nodata", "--out", out, "--overwrite")
    assert proc.returncode == 2 and "already holds" not in proc.stderr  # bad data, not refused
    assert _files(out) == before  # bad input is found before anything is replaced


def test_data_molecules_refuses_a_locked_out(tmp_path):
    out = tmp_path / "mols"
    with lock_directory(out, command="first build"):
        proc = sci_moe("data", "molecules", "--out", out, "--n", 1, "--jobs", 1, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "in use by process" in proc.stderr and "first build" in proc.stderr
    shutil.rmtree(out)
