"""Issue 40, item 2: faults of ``sci-moe md run`` / ``md analyse`` found by a hostile run.

Damaged checkpoints, ``--overwrite`` and user files, temporaries of a killed write, a resume
that would go back, absurd walker counts, non-ASCII paths and short analyses. Tiny toy runs
(double well, 1-2 walkers, <= 150 steps) through the real entry point.
"""

from __future__ import annotations

import json
import re

import pytest

from sci_moe.cli.main import main

TOY = ["md", "run", "--system", "double-well", "--no-progress", "--report-interval", "10"]


def _files(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _run(out, *extra, steps=100):
    return main(
        [*TOY, "--steps", str(steps), "--checkpoint-interval", "50", *extra, "--out", str(out)]
    )


def _resume(out, *extra):
    return main(["md", "run", "--out", str(out), "--resume", "--no-progress", *extra])


def _damage_middle(path):
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 8] = bytes(b ^ 0xFF for b in data[mid : mid + 8])  # same size
    path.write_bytes(bytes(data))


def _dcd(path):
    """A DCD file's bytes without its header's creation time (OpenMM writes the wall clock,
    to the second, into the second title record: two equal runs differ there)."""
    stamp = rb"Created [A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"
    return re.sub(stamp, lambda m: b"\0" * len(m.group()), path.read_bytes(), count=1)


def _log(out):  # step, time, energies: the columns that do not depend on the wall clock
    return [",".join(r.split(",")[:4]) for r in (out / "log.csv").read_text().splitlines()]


def test_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path, capsys):
    full, run = tmp_path / "full", tmp_path / "run"
    assert _run(full, steps=150) == 0
    assert _run(run) == 0  # checkpoint.pt at step 100, checkpoint_prev.pt at 50
    _damage_middle(run / "checkpoint.pt")
    capsys.readouterr()
    assert _resume(run, "--steps", "150") == 0
    cap = capsys.readouterr()
    assert "checkpoint.pt" in cap.err and "damaged" in cap.err and "checkpoint_prev.pt" in cap.err
    assert "from step 50 of 150 (checkpoint_prev.pt)" in cap.out
    assert _log(run) == _log(full)  # continued bit for bit from step 50
    assert _dcd(run / "trajectory.dcd") == _dcd(full / "trajectory.dcd")


def test_both_checkpoints_damaged_is_refused_and_nothing_changes(tmp_path, capsys):
    run = tmp_path / "run"
    assert _run(run) == 0
    _damage_middle(run / "checkpoint.pt")
    _damage_middle(run / "checkpoint_prev.pt")
    before = _files(run)
    capsys.readouterr()
    assert _resume(run, "--steps", "150") == 2
    err = capsys.readouterr().err
    assert "no usable MD checkpoint" in err and "checkpoint_prev.pt" in err
    assert _files(run) == before


def test_only_the_previous_checkpoint_left_resumes_from_it(tmp_path, capsys):
    full, run = tmp_path / "full", tmp_path / "run"
    assert _run(full, steps=150) == 0
    assert _run(run) == 0
    (run / "checkpoint.pt").unlink()
    capsys.readouterr()
    assert _resume(run, "--steps", "150") == 0
    cap = capsys.readouterr()
    assert "--overwrite" not in cap.err + cap.out
    assert "checkpoint_prev.pt" in cap.err and "from step 50 of 150" in cap.out
    assert _log(run) == _log(full)


def test_resume_removes_temporaries_of_a_killed_write(tmp_path):
    run = tmp_path / "run"
    assert _run(run) == 0
    stale = [run / ".checkpoint.pt.k2j4x9.tmp", run / ".checkpoint_prev.pt.a1b2c3.tmp"]
    for p in stale:
        p.write_bytes(b"half a checkpoint")
    assert _resume(run, "--steps", "150") == 0
    assert not any(p.exists() for p in stale)
    assert not list(run.glob(".*.tmp"))


@pytest.mark.parametrize("shorter", [["--steps", "50"], ["--time-ns", "0.0005"]])
def test_resume_that_would_go_back_is_refused(tmp_path, capsys, shorter):
    # --time-ns 0.0005 is 50 steps of the toy's 10 (reduced) timestep.
    run = tmp_path / "run"
    assert _run(run) == 0
    before = _files(run)
    capsys.readouterr()
    assert _resume(run, *shorter) == 2
    err = capsys.readouterr().err
    assert "step 100" in err and "step 50" in err and "--steps 100 or more" in err
    assert _files(run) == before  # config.yaml untouched


def test_overwrite_removes_only_the_files_of_the_run(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    mine = {"trajectory_mine.dcd": b"user", "trajectory.txt": b"notes", "notes.txt": b"x"}
    for name, data in mine.items():
        (out / name).write_bytes(data)
    assert _run(out, "--walkers", "2", "--overwrite") == 0
    assert {n: (out / n).read_bytes() for n in mine} == mine
    listed = json.loads((out / "manifest.json").read_text())["files"]
    assert "trajectory_w001.dcd" in listed and not set(mine) & set(listed)
    assert main(["md", "analyse", str(out), "--bins", "8"]) == 0
    assert "analysis.json" in json.loads((out / "manifest.json").read_text())["files"]
    assert _run(out, "--overwrite", steps=20) == 0  # one walker now
    names = {p.name for p in out.iterdir()}
    assert not {"trajectory_w000.dcd", "trajectory_w001.dcd", "analysis.json"} & names
    assert "trajectory.dcd" in names
    assert {n: (out / n).read_bytes() for n in mine} == mine


def test_overwrite_of_a_run_without_manifest_spares_user_files(tmp_path):
    out = tmp_path / "run"
    assert _run(out, "--walkers", "2") == 0
    (out / "manifest.json").unlink()  # a run of an older version
    (out / "trajectory_mine.dcd").write_bytes(b"user")
    assert _run(out, "--overwrite", steps=20) == 0
    names = {p.name for p in out.iterdir()}
    assert "trajectory_w000.dcd" not in names and "trajectory.dcd" in names
    assert (out / "trajectory_mine.dcd").read_bytes() == b"user"


def test_overwrite_refuses_an_unreadable_manifest(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out) == 0
    (out / "manifest.json").write_text('{"format": "sci-moe-md-outputs/1", "files": ["../x"]}')
    before = _files(out)
    capsys.readouterr()
    assert _run(out, "--overwrite") == 2
    assert "none was removed" in capsys.readouterr().err
    assert _files(out) == before


def test_absurd_walker_count_is_refused_with_the_memory_it_needs(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out, "--walkers", "1000000000000", steps=10) == 2
    err = capsys.readouterr().err
    assert "--walkers 1000000000000 needs at least 64 TB" in err and "available" in err
    assert "Traceback" not in err and not out.exists()


def test_walker_memory_check_against_a_given_budget():
    from sci_moe.cli.md_build import check_memory, walker_memory
    from sci_moe.sampling.md import MDConfig, build_md_system

    cfg = MDConfig(system="muller-brown", walkers=1000)
    system, engine = build_md_system(cfg)
    need = walker_memory(system, 1000)
    assert need == 8 * 1000 * 2 * 8  # 8 arrays of 1 particle x 2 dims in float64
    check_memory(cfg, system, engine, available=need)  # fits exactly
    with pytest.raises(ValueError, match=r"needs at least 128 KB .* more than 999 walkers"):
        check_memory(cfg, system, engine, available=need - 1)


@pytest.mark.parametrize("fmt", ["dcd", "xtc"])
def test_analyse_reads_a_non_ascii_path(tmp_path, capsys, fmt):
    out = tmp_path / "données_ü_α" / "run"
    assert _run(out, "--trajectory-format", fmt, "--walkers", "2") == 0
    capsys.readouterr()
    assert main(["md", "analyse", str(out), "--bins", "8"]) == 0, capsys.readouterr().err
    assert json.loads((out / "analysis.json").read_text())["frames"] == 20


def test_analyse_refuses_negative_burn_in_and_warns_on_few_frames(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out, steps=100) == 0  # 10 frames
    capsys.readouterr()
    assert main(["md", "analyse", str(out), "--burn-in-ps", "-5"]) == 2
    assert "--burn-in-ps" in capsys.readouterr().err and not (out / "analysis.json").exists()
    assert main(["md", "analyse", str(out), "--bins", "8"]) == 0
    err = capsys.readouterr().err
    assert "warning: only 10 frames" in err and "fewer than 100" in err
    res = json.loads((out / "analysis.json").read_text())
    assert res["few_frames"] is True and any("only 10 frames" in w for w in res["warnings"])


def test_analyse_enough_frames_no_warning(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*TOY[:-1], "1", "--steps", "100", "--out", str(out)]) == 0  # 100 frames
    capsys.readouterr()
    assert main(["md", "analyse", str(out), "--bins", "8"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert json.loads((out / "analysis.json").read_text())["few_frames"] is False
