"""Import weight: the diffusion models and the MD analysis load no heavy optional dependency.

OpenMM, mdtraj and RDKit are imported where they are used (inside functions), so that
``import sci_moe.sampling.diffusion`` and ``import sci_moe.sampling.md.analysis`` stay light
(and work where they are not installed).
"""

import subprocess
import sys

import pytest

HEAVY = ("openmm", "mdtraj", "rdkit")


@pytest.mark.parametrize("module", ["sci_moe.sampling.diffusion", "sci_moe.sampling.md.analysis"])
def test_import_loads_no_heavy_dependency(module):
    code = (
        f"import sys, {module}\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"
