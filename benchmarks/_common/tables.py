"""Plain-text tables on stdout: :func:`format_table` and :func:`print_table`."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["format_table", "print_table"]


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0 or 1e-2 <= abs(v) < 1e6:
            return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        return f"{v:.3g}"
    return str(v)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned.

    Floats get three significant digits (no decimals from 100 up); ``None`` is ``-``.
    """
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in r] for r in rows]
    if any(len(r) != len(headers) for r in cells):
        raise ValueError("every row needs one value per header")
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(r: list[str]) -> str:
        rest = zip(r[1:], widths[1:], strict=True)
        parts = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in rest]
        return "  ".join(parts).rstrip()

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> None:
    """Print :func:`format_table` (with an optional title line) and flush."""
    if title:
        print(title)
    print(format_table(headers, rows))
    sys.stdout.flush()
