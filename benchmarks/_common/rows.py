"""The rows of a results JSON: measured figures and quoted ones.

One :class:`Row` per measured figure, ``{"case", "metric", "value", "unit", "vs",
"ratio"}``: ``vs`` names a baseline measured in the same run and ``ratio`` is
``value / baseline`` oriented so that > 1 means sci-moe is better (see ``DESIGN.md``). A
figure from elsewhere (a paper, an issue, another machine's run) is a :class:`QuotedRow`,
``{"case", "metric", "value", "unit", "quoted": {"source", "machine"}}``, without ``vs``
and ``ratio``: only a baseline measured in the same run gets a ratio (issue 41).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .tables import print_table

__all__ = ["QuotedRow", "Row", "print_rows", "quote", "row_dict", "row_from_dict"]


@dataclass
class Row:
    """One measured figure (see the module docstring for ``vs`` / ``ratio``)."""

    case: str
    metric: str
    value: float
    unit: str
    vs: str | None = None
    ratio: float | None = None


@dataclass
class QuotedRow:
    """A figure not measured in this run (a paper's, an issue's, another machine's).

    It has no ``vs`` and no ``ratio`` (only a baseline measured in the same run gets a
    ratio) and no row may name it as its ``vs``; ``quoted`` is made by :func:`quote`.
    """

    case: str
    metric: str
    value: float
    unit: str
    quoted: dict

    def __post_init__(self) -> None:
        quote(**self.quoted)  # validates


def quote(source: str, machine: str) -> dict:
    """The ``quoted`` record of a figure not measured in this run.

    Parameters
    ----------
    source : str
        Where the figure comes from (a paper's table, an issue, another run's JSON).
    machine : str
        The machine it was measured on, as far as the source says.

    Raises
    ------
    ValueError
        When either is empty.
    """
    if not (isinstance(source, str) and source.strip()):
        raise ValueError("a quoted figure needs its source")
    if not (isinstance(machine, str) and machine.strip()):
        raise ValueError("a quoted figure needs the machine it was measured on")
    return {"source": source, "machine": machine}


def row_dict(row: Row | QuotedRow) -> dict:
    """``row`` as written to the JSON (a quoted row has no ``vs`` / ``ratio`` keys)."""
    return asdict(row)


def row_from_dict(d: dict) -> Row | QuotedRow:
    """The row of a stored JSON's ``rows`` entry: :class:`QuotedRow` when it has ``quoted``.

    Raises
    ------
    TypeError
        For a quoted entry with ``vs`` or ``ratio`` keys (or any other unknown key).
    """
    return QuotedRow(**d) if "quoted" in d else Row(**d)


def print_rows(rows: Sequence[Row | QuotedRow], title: str = "") -> None:
    """Print benchmark rows as a case / metric / value / unit / ratio table (a quoted
    row's ratio column says ``quoted``)."""
    print_table(
        ["case", "metric", "value", "unit", "ratio"],
        [
            [r.case, r.metric, r.value, r.unit, "quoted" if isinstance(r, QuotedRow) else r.ratio]
            for r in rows
        ],
        title=title,
    )
