"""Runs written in pieces: ``--max-hours`` and ``--resume``.

A run longer than one sitting is written in pieces: ``--max-hours H`` starts no new unit
(a seed, a fit) after H hours and ``--resume`` continues the run stored at ``--json``
(:func:`piece_arguments`, :func:`piece_deadline`). The convention for a script: the
results JSON itself holds every finished unit, under ``runs`` keyed by seed (a string),
and ``complete``; it is rewritten after every unit, so a killed piece loses one unit at
most, and ``--resume`` keeps the units in it and runs the rest (:func:`previous_run`;
graph_merging, mvcge, cogamid/long.py). FAME and MoRE-Brain, older, keep their units in
``PATH.state.json`` beside the JSON instead (:func:`state_path`, :func:`resume_state`):
their stored results and pages are built from those files, so they stay as they are.
A resumed run checks its settings with :func:`~_common.refusals.check_resume_settings`.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

__all__ = ["piece_arguments", "piece_deadline", "previous_run", "resume_state", "state_path"]


def piece_arguments(p: argparse.ArgumentParser, unit: str = "seed") -> None:
    """Add ``--max-hours H`` and ``--resume`` of a run written in pieces (see above)."""
    p.add_argument(
        "--max-hours",
        type=float,
        default=None,
        metavar="H",
        help=f"start no new {unit} after H hours (continue with --resume)",
    )
    p.add_argument("--resume", action="store_true", help="continue the stored run of --json")


def piece_deadline(args: argparse.Namespace) -> float:
    """The ``time.perf_counter()`` after which this piece starts no new unit: ``--max-hours``
    from now, or infinity without it."""
    if args.max_hours is None:
        return math.inf
    return time.perf_counter() + 3600 * args.max_hours


def previous_run(args: argparse.Namespace) -> dict | None:
    """The stored results JSON that ``--resume`` continues; None without ``--resume``,
    without ``--json`` or while that file does not exist yet (the run then starts afresh)."""
    if not args.resume or args.json is None or not Path(args.json).is_file():
        return None
    return json.loads(Path(args.json).read_text())


def state_path(path: str | Path) -> Path:
    """The state file of a run written in pieces: ``PATH.state.json`` beside its JSON."""
    return Path(path).with_suffix(".state.json")


def resume_state(args: argparse.Namespace) -> dict:
    """The state of the earlier pieces for ``--resume`` (an empty dict without it).

    Exits with a message when ``--resume`` has no ``--json`` or no state file beside it.
    """
    if not args.resume:
        return {}
    if args.json is None or not state_path(args.json).is_file():
        raise SystemExit("--resume needs --json PATH with a PATH.state.json from an earlier piece")
    return json.loads(state_path(args.json).read_text())
