"""``sci-moe --help`` (and the subcommands' help) print before torch is imported (issue 27)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import sys
from sci_moe.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code
print("TORCH-LOADED", "torch" in sys.modules, "CODE", code, file=sys.stderr)
"""

HELPS = [
    ["--help"],
    ["--version"],
    ["md", "--help"],
    ["md", "run", "--help"],
    ["md", "analyse", "--help"],
    ["train", "spice", "--help"],
    ["data", "--help"],
]


@pytest.mark.parametrize("argv", HELPS, ids=" ".join)
def test_help_does_not_import_torch(argv):
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "TORCH-LOADED False CODE 0" in proc.stderr, proc.stderr
    assert "usage: sci-moe" in proc.stdout or proc.stdout.startswith("sci-moe ")


def test_entry_point_help_exits_zero():
    exe = Path(sys.executable).with_name("sci-moe")
    exe = str(exe) if exe.exists() else shutil.which("sci-moe")
    if exe is None:
        pytest.skip("the sci-moe entry point is not installed")
    proc = subprocess.run([exe, "md", "run", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "usage: sci-moe md run" in proc.stdout


def test_import_sci_moe_is_light():
    code = (
        "import sys, sci_moe\n"
        "print('torch' in sys.modules, sorted(m for m in sys.modules if m.startswith('sci_moe')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False ['sci_moe']"
    import sci_moe

    assert sci_moe.__all__ == ["__version__"]  # one import path: the core is sci_moe.moe
    with pytest.raises(AttributeError, match="no attribute 'MoE'"):
        _ = sci_moe.MoE
