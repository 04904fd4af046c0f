"""``import sci_moe.theory`` stays light: numpy/scipy only, no text or embedding stacks."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("sentence_transformers", "gensim", "transformers", "sklearn", "sci_moe.data")


def test_import_theory_pulls_in_no_data_or_text_stack():
    code = (
        "import sys, sci_moe.theory, sci_moe.theory.self_distillation.empirical\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
