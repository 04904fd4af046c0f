"""Render ``benchmarks/results/*.json`` into reStructuredText pages at docs build time.

Every number on a results page comes from one of these JSON files, written by a script
in ``benchmarks/`` with ``--json``; the page names the script, the command, the seed and
the machine of that run.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "results"
TARGET = Path(__file__).resolve().parent / "results" / "generated"


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _escape(text: str) -> str:
    """Backslash-escape reST inline markup (``|x|`` would be a substitution, ``*x*`` emphasis)."""
    for ch in ("\\", "|", "*", "`", "_"):
        text = text.replace(ch, "\\" + ch)
    return text


def _table(headers, rows) -> str:
    rows = [[_escape(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    sep = "  ".join("=" * w for w in widths)
    lines = [sep, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), sep]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(sep)
    return "\n".join(lines)


def render(path: Path) -> str:
    data = json.loads(path.read_text())
    m = data.get("machine", {})
    name = data["benchmark"]
    quick = " --quick" if m.get("quick") else ""
    title = f"{name} ({'quick run' if quick else 'full run'})"
    out = [title, "=" * len(title), ""]
    out.append(
        f"Generated from ``benchmarks/results/{path.name}``, written by "
        f"``python benchmarks/{name}.py{quick} --seed {m.get('seed', 0)} --json PATH``."
    )
    out.append("")
    keys = ("cpu", "cpu_count", "torch_threads", "cpu_capability", "torch", "cuda", "git")
    out.append("Machine: " + ", ".join(f"{k} = ``{m[k]}``" for k in keys if k in m) + ".")
    out.append("")
    rows = [
        [
            r["case"],
            r["metric"],
            _fmt(r["value"]),
            r["unit"],
            r.get("vs") or "-",
            _fmt(r.get("ratio")),
        ]
        for r in data["rows"]
    ]
    out.append(_table(["case", "metric", "value", "unit", "vs (same run)", "ratio"], rows))
    out.append("")
    out.append("A ratio above 1 means sci-moe is better than the baseline named in *vs*.")
    return "\n".join(out) + "\n"


def generate() -> list[str]:
    """Write one page per JSON file; return their names (for the toctree)."""
    TARGET.mkdir(parents=True, exist_ok=True)
    names = []
    for path in sorted(SOURCE.glob("*.json")):
        (TARGET / f"{path.stem}.rst").write_text(render(path))
        names.append(path.stem)
    return names
