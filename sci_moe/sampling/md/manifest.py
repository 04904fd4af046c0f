"""The manifest of a ``sci-moe md run`` folder: the files the run (and ``md analyse``) wrote.

``sci-moe md run --overwrite`` deletes exactly the files listed here and nothing else in
the folder: a file of the user's (``trajectory_notes.dcd``, ``notes.txt``) stays. A name is
added to ``manifest.json`` *before* the file is first written, so a run killed at any
point has listed every file it left (the temporaries ``.<name>.*.tmp`` of an interrupted
atomic write of a listed file are removed with it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..._util import atomic_save_json, remove_stale_temps

__all__ = ["MANIFEST_FORMAT", "MANIFEST_NAME", "read_manifest", "record_outputs", "remove_outputs"]

#: File name of the manifest in a run folder.
MANIFEST_NAME = "manifest.json"
#: Value of its ``"format"`` key.
MANIFEST_FORMAT = "sci-moe-md-outputs/1"


def _plain(name) -> bool:
    """A bare file name of this folder (no folder part, not ``.``, ``..`` or the lock)."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", ".lock", MANIFEST_NAME)
        and Path(name).name == name
        and "\\" not in name
    )


def read_manifest(folder: str | os.PathLike) -> list[str] | None:
    """The file names listed in ``folder``'s manifest, or ``None`` when it has none.

    Raises
    ------
    ValueError
        If ``manifest.json`` exists but is not a manifest of this format (then nobody can
        tell which files a run wrote; nothing should be deleted).
    """
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not readable ({err})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("format") != MANIFEST_FORMAT
        or not isinstance(files, list)
        or not all(_plain(f) for f in files)
    ):
        raise ValueError(
            f"{path} is not a manifest of `sci-moe md run` (format {MANIFEST_FORMAT!r} with a "
            "list of file names of the folder)"
        )
    return list(files)


def record_outputs(folder: str | os.PathLike, names: Iterable[str]) -> Path:
    """Add ``names`` (bare file names in ``folder``) to its manifest, atomically.

    Call it before the files are first written. The manifest is created when missing; an
    unreadable one is replaced (its run could not have been overwritten safely anyway).

    Returns
    -------
    Path
        The manifest.
    """
    folder = Path(folder)
    names = list(names)
    bad = [n for n in names if not _plain(n)]
    if bad:
        raise ValueError(f"manifest entries must be bare file names, got {bad}")
    try:
        listed = read_manifest(folder) or []
    except ValueError:
        listed = []
    files = sorted(set(listed) | set(names))
    path = folder / MANIFEST_NAME
    if files != listed or not path.is_file():
        atomic_save_json(path, {"format": MANIFEST_FORMAT, "files": files})
    return path


def remove_outputs(folder: str | os.PathLike, fallback: Iterable[str] = ()) -> list[Path]:
    """Delete the files ``folder``'s manifest lists (and their stale temporaries), then
    the manifest; other files of the folder are not touched.

    Parameters
    ----------
    folder : path-like
    fallback : iterable of str
        The names to delete when the folder has no manifest (a run of an older version).

    Returns
    -------
    list of Path
        The files deleted.

    Raises
    ------
    ValueError
        The manifest exists but is not readable (nothing is deleted).
    """
    folder = Path(folder)
    listed = read_manifest(folder)
    names = [n for n in (fallback if listed is None else listed) if _plain(n)]
    removed = []
    for name in names:
        path = folder / name
        removed += remove_stale_temps(path)
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(path)
    manifest = folder / MANIFEST_NAME
    if listed is not None:
        removed += remove_stale_temps(manifest)
        manifest.unlink(missing_ok=True)
        removed.append(manifest)
    return removed
