"""Issue 40, threads and start-up of ``sci-moe md run``: no compiler stack nor scipy.stats
imported by a plain run, the learned model builds no force field."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = """
import json, sys
from sci_moe.cli.main import main
rc = main(sys.argv[1:])
heavy = ("torch._dynamo", "torch._inductor", "scipy.stats")
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
