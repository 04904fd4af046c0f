"""The results JSON file: writing a run's, and rewriting a stored one from itself.

:func:`write_json` writes ``{"benchmark", "machine", "rows", "verdicts"}`` (atomically,
:func:`write_json_doc`); :func:`finish` is the common end of a script's ``main``.
:func:`rederive_rows` and :func:`rederive_verdicts` (``--verdicts-only``, answered by
:func:`verdicts_only`) rewrite a stored JSON's rows or verdicts by the script's rule
without rerunning anything.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .machine import OtherLoad
from .rows import QuotedRow, Row, row_dict
from .verdicts import verdict_entry

__all__ = [
    "finish",
    "rederive_rows",
    "rederive_verdicts",
    "verdicts_only",
    "write_json",
    "write_json_doc",
]


def write_json_doc(path: str | Path, doc: dict, indent: int = 2) -> None:
    """Write any JSON document to ``path`` atomically (a killed run leaves the old file)."""
    from sci_moe._util import atomic_write_text

    atomic_write_text(Path(path), json.dumps(doc, indent=indent) + "\n", fsync=False)


def write_json(
    path: str | Path,
    benchmark: str,
    machine: dict,
    rows: Sequence[Row | QuotedRow],
    verdicts: Sequence[dict] | None = None,
) -> None:
    """Write the ``DESIGN.md`` benchmark JSON to ``path`` (parent folders created).

    ``verdicts`` (entries made by :func:`verdict_entry` or :func:`decide_verdict`) becomes
    the top-level ``verdicts`` list; each is checked again before anything is written.
    """
    doc = {"benchmark": benchmark, "machine": machine, "rows": [row_dict(r) for r in rows]}
    if verdicts is not None:
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts]
    write_json_doc(path, doc)


def finish(
    args: argparse.Namespace,
    benchmark: str,
    machine: dict,
    rows: Sequence[Row | QuotedRow],
    other: OtherLoad,
    t0: float,
) -> int:
    """The common end of a benchmark's ``main``: record the contention, say the total time,
    write the JSON when ``--json`` was given; returns the exit code 0.

    ``machine["contention"]`` gets :meth:`OtherLoad.report` (wall time and the CPU seconds
    other processes used meanwhile), so a page quoting the JSON can state the load.
    """
    load = other.report()
    machine["contention"] = load
    print(
        f"total {time.perf_counter() - t0:.0f} s; other processes used {load['other_cpu_s']} CPU s"
    )
    if getattr(args, "json", None) is not None:
        write_json(args.json, benchmark, machine, rows)
        print(f"wrote {args.json}")
    return 0


def rederive_rows(path: str | Path, rule: Callable[[dict], Sequence[Row | QuotedRow]]) -> int:
    """Rewrite a results JSON's ``rows`` by a script's ``rule(doc)`` (e.g. ``--quoted-only``).

    For a change of a stored run's *form* that needs no rerun, such as marking figures
    from elsewhere as quoted: ``rule`` gets the parsed JSON and returns the new rows
    (:class:`Row` / :class:`QuotedRow`, so they are validated; :func:`row_from_dict` reads
    a stored entry); the rest of the document is written back as ``rule`` leaves it (it
    may correct a ``machine`` entry that describes those rows), in the file's own indent.
    Prints what changed; returns 0.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    old = [json.dumps(r, sort_keys=True) for r in doc["rows"]]
    doc["rows"] = [row_dict(r) for r in rule(doc)]
    new = [json.dumps(r, sort_keys=True) for r in doc["rows"]]
    second = text.split("\n", 2)[1] if text.startswith("{\n") else ""
    indent = len(second) - len(second.lstrip(" ")) or 2  # keep the file's own indent
    write_json_doc(path, doc, indent=indent)
    print(
        f"{path}: {len(set(old) - set(new))} rows replaced or dropped, "
        f"{len(set(new) - set(old))} written anew, {len(new)} rows"
    )
    return 0


def rederive_verdicts(path: str | Path, rule: Callable[[dict], Sequence[dict]]) -> int:
    """``--verdicts-only PATH``: rewrite a results JSON's ``verdicts`` from its own rows.

    ``rule(doc)`` is the script's verdict rule applied to the parsed JSON; it returns the
    entries (made by :func:`verdict_entry`, :func:`decide_verdict` or
    :func:`interval_verdict`). Nothing is retrained and nothing but ``verdicts`` changes: the
    rows and the machine record are written back as they were. Prints each verdict; returns 0.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    doc["verdicts"] = [verdict_entry(**v) for v in rule(doc)]
    second = text.split("\n", 2)[1] if text.startswith("{\n") else ""
    indent = len(second) - len(second.lstrip(" ")) or 2  # keep the file's own indent
    write_json_doc(path, doc, indent=indent)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  {v['claim']}")
    print(f"wrote the verdicts of {path}")
    return 0


def verdicts_only(args: argparse.Namespace) -> int | None:
    """Answer ``--verdicts-only JSON`` of a :func:`base_parser` given the verdict rule.

    Rewrites the file's verdicts by that rule (:func:`rederive_verdicts`) and returns its
    exit code 0; returns None when the flag was not given, and the script goes on.
    """
    path = getattr(args, "verdicts_only", None)
    if path is None:
        return None
    return rederive_verdicts(path, args.verdict_rule)
