"""Render every benchmark JSON into reStructuredText pages at docs build time.

The JSON files of a paper live in ``benchmarks/<paper>/results/`` (older runs in its
``results/history/``; issue 41 item 5); files not moved yet in ``benchmarks/results/``.
Each is written by a script of ``benchmarks/`` with ``--json``; the page names the script,
the command, the seed and the machine of that run.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
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


def sources() -> list[Path]:
    """Every results JSON: ``benchmarks/<paper>/results/[history/]*.json``, then the files
    still in ``benchmarks/results/`` (resume state files ``*.state.json`` excluded)."""
    found = [
        *sorted(BENCH.glob("*/results/*.json")),
        *sorted(BENCH.glob("*/results/history/*.json")),
        *sorted(BENCH.glob("results/*.json")),
    ]
    return [p for p in found if not p.name.endswith(".state.json")]


def page_name(path: Path) -> str:
    """``benchmarks/md/results/md_quick.json`` -> ``md_quick``; a file whose name does not
    start with its paper's folder gets the folder first (``fame/results/quick.json`` ->
    ``fame_quick``)."""
    parts = path.relative_to(BENCH).parts
    paper = parts[0] if len(parts) > 2 and parts[0] != "results" else None
    if paper is None or path.stem.startswith(paper):
        return path.stem
    return f"{paper}_{path.stem}"


def script_of(path: Path, name: str) -> str:
    """The script that writes ``path``, whose JSON says ``"benchmark": name``: in the
    paper's folder, ``run.py`` or the companion named after the rest of ``name``
    (``energy_diffusion_speed`` -> ``energy_diffusion/speed.py``)."""
    parts = path.relative_to(BENCH).parts if path.is_relative_to(BENCH) else ()
    if len(parts) > 2 and parts[0] != "results":
        paper = parts[0]
        rest = name[len(paper) :].lstrip("_") if name.startswith(paper) else name
        if rest and (BENCH / paper / f"{rest}.py").is_file():
            return f"benchmarks/{paper}/{rest}.py"
        return f"benchmarks/{paper}/run.py"
    return f"benchmarks/{name}.py"


def render(path: Path) -> str:
    data = json.loads(path.read_text())
    m = data.get("machine", {})
    name = data["benchmark"]
    quick = " --quick" if m.get("quick") else ""
    title = f"{name} ({'quick run' if quick else 'full run'})"
    out = [title, "=" * len(title), ""]
    where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    out.append(
        f"Generated from ``{where}``, written by "
        f"``python {script_of(path, name)}{quick} --seed {m.get('seed', 0)} --json PATH``."
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
            "quoted" if r.get("quoted") else r.get("vs") or "-",
            _fmt(r.get("ratio")),
        ]
        for r in data["rows"]
    ]
    out.append(_table(["case", "metric", "value", "unit", "vs (same run)", "ratio"], rows))
    out.append("")
    out.append("A ratio above 1 means sci-moe is better than the baseline named in *vs*.")
    sources = {}
    for r in data["rows"]:
        if r.get("quoted"):
            q = r["quoted"]
            sources.setdefault((q.get("source"), q.get("machine")), []).append(r["case"])
    for (source, machine), cases in sources.items():
        out.append("")
        out.append(
            _escape(
                f"Quoted, not measured in this run (no ratio): {', '.join(sorted(set(cases)))} "
                f"-- from {source}; machine: {machine}."
            )
        )
    return "\n".join(out) + "\n"


def generate() -> list[str]:
    """Write one page per JSON file; return their names (for the toctree)."""
    TARGET.mkdir(parents=True, exist_ok=True)
    names = []
    for path in sources():
        name = page_name(path)
        if name in names:  # the same name in two folders: the later one by its path
            name = "-".join(path.relative_to(BENCH).with_suffix("").parts)
        (TARGET / f"{name}.rst").write_text(render(path))
        names.append(name)
    return names
