"""Importing the md and tempering packages must not import OpenMM or mdtraj (lazy imports)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("openmm", "mdtraj")
LIGHT_IMPORTS = (
    "import sci_moe.sampling.md",
    "import sci_moe.sampling.tempering",
    "from sci_moe.sampling.tempering import OpenMMTemperingConfig, OpenMMTemperingResult, BAOAB",
    "from sci_moe.sampling.md import Simulation, TrajectoryReporter, checkpoint, reporters",
)


def _loaded_after(statements) -> list[list[str]]:
    """Heavy modules in ``sys.modules`` after each statement, in one fresh interpreter."""
    lines = ["import json, sys", "out = []"]
    for st in statements:
        lines += [st, f"out.append([m for m in {HEAVY!r} if m in sys.modules])"]
    lines.append("print(json.dumps(out))")
    run = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_imports_do_not_load_openmm_or_mdtraj():
    loaded = _loaded_after(LIGHT_IMPORTS)
    assert loaded == [[]] * len(LIGHT_IMPORTS), dict(zip(LIGHT_IMPORTS, loaded, strict=True))


def test_openmm_driver_is_loaded_on_first_use():
    loaded = _loaded_after(
        [
            "import sci_moe.sampling.tempering as t",
            "t.OpenMMSimulatedTempering",
            "assert 'OpenMMSimulatedTempering' in dir(t) and 'OpenMMSimulatedTempering' in vars(t)",
        ]
    )
    assert loaded[0] == [] and "openmm" in loaded[1]
