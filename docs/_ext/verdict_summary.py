"""The ``verdict-summary`` directive: where every paper stands, counted from its JSON files.

::

    .. verdict-summary::

       Routing Mamba = routing_mamba | routing_mamba/results/routing_mamba_flat
       Self-distillation = self_distillation | self_distillation/results/self_distillation;
           self_distillation/results/self_distillation_heuristics

One line per paper (a line that starts with a space continues the one before):
``TITLE = PAGE | FILE; FILE ...``, the page (a results page's name, linked) and the JSON
files of its main runs (named as the ``verdicts`` directive names them). The table counts
the verdicts of those files' top-level ``verdicts`` lists (the checks of
:mod:`results_role`'s ``verdicts`` directive apply): claims, reproduced, contradicted and
not decided, each with how many are decisive. Nothing is typed: a changed JSON changes
the table.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from results_role import (
    VERDICT_VALUES,
    ResultError,
    _dirs,
    _note,
    _split,
    _table,
    load,
    verdict_entries,
)

__all__ = ["VerdictSummary", "counts", "parse_lines", "register", "setup"]


def parse_lines(content) -> list[tuple[str, str, list[str]]]:
    """``(title, page, files)`` per paper from the directive's lines (see the module)."""
    joined: list[str] = []
    for line in content:
        if not line.strip():
            continue
        if line[:1].isspace() and joined:
            joined[-1] += " " + line.strip()
        else:
            joined.append(line.strip())
    out = []
    for line in joined:
        title, sep, rest = line.partition("=")
        page, bar, files = rest.partition("|")
        if not (sep and bar and title.strip() and page.strip() and _split(files)):
            raise ResultError(f"{line!r} is not 'TITLE = PAGE | FILE; FILE ...'")
        out.append((title.strip(), page.strip(), _split(files)))
    return out


def counts(entries: list[dict]) -> dict[str, tuple[int, int]]:
    """``{verdict: (count, decisive count)}`` over ``entries`` (checked by
    :func:`results_role.verdict_entries`)."""
    out = {v: [0, 0] for v in VERDICT_VALUES}
    for entry in entries:
        out[entry["verdict"]][0] += 1
        out[entry["verdict"]][1] += bool(entry["decisive"])
    return {k: (a, b) for k, (a, b) in out.items()}


def _cell(count: int, decisive: int) -> str:
    return f"{count} ({decisive} decisive)" if decisive else str(count)


class VerdictSummary(Directive):
    """``.. verdict-summary::``: the verdict counts of every paper's main runs."""

    has_content = True

    def run(self):
        document = self.state.document
        try:
            papers = parse_lines(self.content)
            if not papers:
                raise ResultError("no papers listed")
            body, links = [], []
            for title, page, files in papers:
                entries = []
                for name in files:
                    doc, path = load(name, _dirs(document))
                    try:
                        entries += verdict_entries(doc)
                    except ResultError as err:
                        raise ResultError(f"{name}: {err}") from None
                    _note(document, path)
                c = counts(entries)
                body.append(
                    [
                        title,
                        str(len(entries)),
                        *(_cell(*c[v]) for v in VERDICT_VALUES),
                        ", ".join(f.rsplit("/", 1)[-1] for f in files),
                    ]
                )
                links.append(page)
        except ResultError as err:
            return [document.reporter.error(f"verdict-summary: {err}", line=self.lineno)]
        table = _table(["paper", "claims", *VERDICT_VALUES, "runs (JSON)"], body, stub=True)
        tbody = table[0][-1]
        for row, page in zip(tbody, links, strict=True):
            para = row[0][0]
            text = para.astext()
            para.clear()
            para += nodes.reference(text, text, refuri=f"{page}.html", internal=True)
        return [table]


def register() -> None:
    """Register the directive with plain docutils (for tests and scripts)."""
    directives.register_directive("verdict-summary", VerdictSummary)


def setup(app):
    """Sphinx entry point."""
    app.add_directive("verdict-summary", VerdictSummary)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
