"""The commands the README and the getting-started page show exist and say what they do."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "getting_started.rst"]


def _targets() -> dict[str, str]:
    """Makefile targets -> their recipe text."""
    text = (ROOT / "Makefile").read_text()
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^([a-z][\w-]*):", line)
        if m:
            current = m.group(1)
            out[current] = ""
        elif current and line.startswith("\t"):
            out[current] += line + "\n"
    return out


def test_every_make_target_shown_exists():
    targets = _targets()
    for page in PAGES:
        shown = set(re.findall(r"make ([a-z][\w-]*)", page.read_text()))
        missing = sorted(shown - set(targets))
        assert not missing, f"{page.name} shows make targets the Makefile lacks: {missing}"


def test_make_demo_is_described_as_what_it_runs():
    recipe = _targets()["demo"]
    assert "sci-moe md run" in recipe and "sci-moe md analyse" in recipe
    for page in PAGES:
        text = page.read_text()
        line = next(ln for ln in text.splitlines() if re.search(r"make demo\s+#", ln))
        assert re.search(r"\bMD\b|molecular dynamics", line), f"{page.name}: {line.strip()}"
        assert "digits" not in line, f"{page.name} describes make demo as the digits demo"
