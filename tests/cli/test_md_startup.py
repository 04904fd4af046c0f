"""Issue 40, threads and start-up of ``sci-moe md run``: ``--threads`` (and the config key)
applied with default 1, no compiler stack, scipy.stats nor mdtraj imported by a plain run, the
learned model builds no force field, the speed summed over the walkers in the summary."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch
import yaml

from sci_moe.cli.main import main

TOY = ["md", "run", "--system", "double-well", "--steps", "20", "--report-interval", "10"]
TOY += ["--no-progress", "--walkers", "3"]

_PROBE = """
import json, sys
from sci_moe.cli.main import main
rc = main(sys.argv[1:])
heavy = ("torch._dynamo", "torch._inductor", "scipy.stats", "mdtraj")
print(json.dumps({"rc": rc, "loaded": sorted(m for m in sys.modules if m.startswith(heavy))}))
"""


def _probe(*argv) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_md_run_imports_no_compiler(tmp_path):
    # the default run: the shipped learned model on alanine dipeptide (torch engine)
    argv = ["md", "run", "--out", tmp_path / "o", "--walkers", "2", "--steps", "4"]
    res = _probe(*argv, "--report-interval", "2", "--no-progress")
    assert res == {"rc": 0, "loaded": []}


def test_learned_model_builds_no_force_field(monkeypatch):
    from sci_moe.sampling.md import MDConfig, default_model_path, systems

    model = default_model_path()
    if model is None:  # pragma: no cover - the model ships with the package
        return

    def no_force_field(*args, **kwargs):
        raise AssertionError("a learned-model run built an OpenMM force field")

    monkeypatch.setattr(systems, "build_system", no_force_field)
    system, engine = systems.build_md_system(MDConfig(model=str(model), walkers=2))
    assert engine == "torch" and system.system is None
    assert system.positions.shape == (len(system.masses), 3)
    assert system.provider is not None and system.topology.getNumAtoms() == len(system.masses)


def _threads_used(printed: str) -> int:
    return int(re.search(r"(\d+) torch thread\(s\)", printed).group(1))


def test_threads_default_flag_and_config_key(tmp_path, capsys):
    before = torch.get_num_threads()
    assert main([*TOY, "--out", str(tmp_path / "a")]) == 0
    assert _threads_used(capsys.readouterr().out) == 1  # MD's default
    assert yaml.safe_load((tmp_path / "a" / "config.yaml").read_text())["threads"] == 1
    assert main([*TOY, "--out", str(tmp_path / "b"), "--threads", "2"]) == 0
    assert _threads_used(capsys.readouterr().out) == 2
    assert yaml.safe_load((tmp_path / "b" / "config.yaml").read_text())["threads"] == 2
    (tmp_path / "md.toml").write_text("threads = 2\n")
    assert main([*TOY, "--out", str(tmp_path / "c"), "--config", str(tmp_path / "md.toml")]) == 0
    assert _threads_used(capsys.readouterr().out) == 2
    assert torch.get_num_threads() == before  # restored for an in-process caller
    # a resumed run may change it
    argv = ["md", "run", "--out", str(tmp_path / "b"), "--resume", "--steps", "30"]
    assert main([*argv, "--threads", "1", "--no-progress"]) == 0
    assert _threads_used(capsys.readouterr().out) == 1


def test_threads_refuses_negative(tmp_path, capsys):
    assert main([*TOY, "--out", str(tmp_path / "a"), "--threads", "-1"]) == 2
    err = capsys.readouterr().err
    assert "threads must be an integer >= 0" in err and "Traceback" not in err
    assert not (tmp_path / "a").exists()


def test_summary_sums_the_speed_over_walkers(tmp_path, capsys):
    assert main([*TOY, "--out", str(tmp_path / "a")]) == 0
    done = [line for line in capsys.readouterr().out.splitlines() if line.startswith("done:")]
    m = re.search(
        r"\(([\d.e+]+) time units/day per walker, ([\d.e+]+) time units/day summed", done[0]
    )
    assert m and "summed over the 3 walkers" in done[0]
    assert float(m.group(2)) == pytest.approx(3 * float(m.group(1)), rel=0.01)
