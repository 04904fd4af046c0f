"""Issue 40: ``md analyse`` prints no mdtraj DCD-plugin lines, also when Python's stdout is
captured (as in the docs build, where a reader took them for errors)."""

from __future__ import annotations

import os
import subprocess
import sys

from sci_moe.cli.main import main

_CAPTURED = """
import io, sys
from sci_moe.cli.main import main
buf, real = io.StringIO(), sys.stdout
sys.stdout = buf  # like sphinx-gallery: no file descriptor behind sys.stdout
code = main(["md", "analyse", sys.argv[1]])
sys.stdout = real
print("CODE", code, "CAPTURED", "frames analysed" in buf.getvalue())
"""


def test_analyse_prints_no_dcd_plugin_lines(tmp_path):
    out = tmp_path / "dw"
    argv = ["md", "run", "--system", "double-well", "--steps", "200", "--report-interval", "10"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _CAPTURED, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert "CODE 0 CAPTURED True" in proc.stdout, proc.stderr
    assert "dcdplugin" not in proc.stdout + proc.stderr
