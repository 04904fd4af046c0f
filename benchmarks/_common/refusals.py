"""Refused command lines: :func:`refuse` (message, exit status 2) and
:func:`check_resume_settings` (a ``--resume`` of a stored run of other settings)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

__all__ = ["check_resume_settings", "refuse"]


_UNSET = object()


def _shown(value: object) -> str:
    return "unset" if value is _UNSET else repr(value)


def _differences(stored: dict, now: dict, defaults: dict, prefix: str = "") -> list[str]:
    """``"key: stored -> now"`` for every differing key of two settings dicts; nested dicts
    are compared key by key (``"outer.inner"``); a key missing on one side is its
    ``defaults`` value when there is one (top level only), else ``unset``."""
    out = []
    for k in sorted(set(stored) | set(now), key=str):
        a, b = stored.get(k, _UNSET), now.get(k, _UNSET)
        if k in defaults:
            a = defaults[k] if a is _UNSET else a
            b = defaults[k] if b is _UNSET else b
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, {}, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {_shown(a)} -> {_shown(b)}")
    return out


def check_resume_settings(
    stored: dict | None,
    now: dict,
    path: str | Path,
    *,
    what: str = "settings",
    defaults: dict | None = None,
    before: str | None = None,
    fix: str | None = None,
    flag: str | None = "--resume",
) -> None:
    """Refuse to continue a stored run (``--resume``) whose settings are not this command's.

    Both sides are compared as JSON stores them (``now`` and ``defaults`` go through a
    JSON round trip, so tuples equal lists).

    Parameters
    ----------
    stored : dict or None
        The settings the stored state or JSON recorded; ``None`` for an old state written
        before it recorded them (refused: its runs cannot be matched to this command).
    now : dict
        This command's settings.
    path : str or Path
        The stored file, named in the message.
    what : str
        What the dicts are, for the message: ``"settings"``, ``"plan"``, ...
    defaults : dict or None
        Values of keys added since older states: a key missing on one side counts as its
        value here (so an old state matches a command that keeps the default). A missing
        key without a default is a difference.
    before : str or None
        What wrote a state without the record (``stored`` None), e.g. ``"a fixed-step
        run"``; a generic note without it.
    fix : str or None
        What to do instead, ending the message (default: resume with the same settings or
        write to another ``--json``).
    flag : str or None
        The option the message starts with (``None``: no prefix, for checks of stored files
        outside ``--resume``).

    Raises
    ------
    ValueError
        ``stored`` differs from ``now``: the message names every differing key with its
        stored and current value (``"--resume: PATH was written with other settings
        (seeds: 5 -> 10; lr: 0.001 -> 0.01); resume with the same settings or write to
        another --json"``), or says that ``stored`` is None and what wrote such a state.
    """
    head = f"{flag}: {path}" if flag else str(path)
    if stored is None:
        note = before or "an old state, written before they were recorded"
        raise ValueError(
            f"{head} was written without its {what} record (none stored: {note}); "
            + (fix or "write to another --json")
        )
    stored, now = json.loads(json.dumps(stored)), json.loads(json.dumps(now))
    if stored == now:
        return
    if isinstance(stored, dict) and isinstance(now, dict):
        diff = _differences(stored, now, json.loads(json.dumps(defaults or {})))
    else:
        diff = [f"{stored!r} -> {now!r}"]
    if not diff:  # equal once the defaults fill the keys new since the stored state
        return
    other = "other" if what.endswith("s") else "another"
    raise ValueError(
        f"{head} was written with {other} {what} ({'; '.join(diff)}); "
        + (fix or "resume with the same settings or write to another --json")
    )


def refuse(msg: str) -> NoReturn:
    """Stop on bad command-line input: ``msg`` on stderr and exit status 2.

    Status 2 is argparse's for a usage error (``ArgumentParser.error``); this is for
    input refused after parsing, such as a ``--resume`` of a stored run of other settings
    (:func:`check_resume_settings`)::

        try:
            check_resume_settings(stored, now, path)
        except ValueError as err:
            refuse(str(err))

    Parameters
    ----------
    msg : str
        What is wrong and what to do instead, printed as it is (one line, no prefix).

    Raises
    ------
    SystemExit
        Always, with code 2.
    """
    print(msg, file=sys.stderr, flush=True)
    raise SystemExit(2)
