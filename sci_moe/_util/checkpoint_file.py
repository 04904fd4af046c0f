"""Verified checkpoint files: a checksum inside the file, checked on every read.

PyTorch's zip reader does not check the CRCs of the records it loads, so a checkpoint with
bytes damaged in the middle (a bad disk block, a truncated copy) can load and silently
continue a run from wrong numbers. A file written by :func:`save_verified` is::

    b"SCIMOECK" (8 bytes) | SHA-256 of the payload (32 bytes) | payload (torch.save bytes)

written atomically (:func:`~sci_moe._util.io.atomic_open`), and :func:`load_verified`
recomputes the digest before it unpickles anything (``weights_only=True``). A damaged file
raises :class:`CheckpointError`; :func:`load_latest` then falls back to the previous
checkpoint (``<stem>_prev<suffix>``, kept by every save) and says which file it used.
Files written by plain ``torch.save`` (older sci-moe checkpoints) still load, unverified.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any

from .io import atomic_write_bytes, previous_path

__all__ = [
    "CHECKPOINT_MAGIC",
    "CheckpointError",
    "load_latest",
    "load_verified",
    "remove_stale_temps",
    "save_verified",
]

#: First bytes of every verified checkpoint file.
CHECKPOINT_MAGIC = b"SCIMOECK"
_DIGEST = 32


class CheckpointError(ValueError):
    """A checkpoint file is missing, damaged (checksum mismatch) or not a checkpoint."""


def save_verified(path: str | os.PathLike, obj: Any, *, keep_previous: bool = True) -> Path:
    """Write ``obj`` with ``torch.save`` and a SHA-256 of its bytes, atomically.

    Parameters
    ----------
    path : path-like
        Destination, conventionally ``checkpoint.pt``; its folder is created if needed.
    obj : object
        Plain containers (tensors, numbers, strings, bytes, lists, dicts), so that
        :func:`load_verified` can read them with ``weights_only=True``.
    keep_previous : bool
        Keep the replaced file as ``<stem>_prev<suffix>`` (the fallback of
        :func:`load_latest`).

    Returns
    -------
    Path
        ``path``.
    """
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    payload = buf.getvalue()
    digest = hashlib.sha256(payload).digest()
    data = CHECKPOINT_MAGIC + digest + payload
    return atomic_write_bytes(path, data, keep_previous=keep_previous)


def load_verified(path: str | os.PathLike, *, what: str = "checkpoint") -> Any:
    """Read a file of :func:`save_verified` after checking its SHA-256 (CPU tensors).

    Parameters
    ----------
    path : path-like
    what : str
        What the file should be, for the messages.

    Raises
    ------
    CheckpointError
        The file does not exist, its checksum does not match its bytes, or it does not
        unpickle as plain data.
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{what} {path} does not exist")
    data = path.read_bytes()
    if data.startswith(CHECKPOINT_MAGIC):
        head = len(CHECKPOINT_MAGIC)
        digest, payload = data[head : head + _DIGEST], data[head + _DIGEST :]
        if len(digest) < _DIGEST or hashlib.sha256(payload).digest() != digest:
            raise CheckpointError(
                f"{what} {path} is damaged: its SHA-256 does not match the one stored in it "
                f"({len(data)} bytes on disk)"
            )
    else:
        payload = data  # a plain torch.save file of an older version: unverified
    try:
        return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as err:
        raise CheckpointError(
            f"{what} {path} is not readable ({type(err).__name__}: {err})"
        ) from None


def load_latest(path: str | os.PathLike, *, what: str = "checkpoint") -> tuple[Any, Path, str]:
    """Load ``path``, or its previous copy when ``path`` is missing or damaged.

    Parameters
    ----------
    path : path-like
        The newest checkpoint (``checkpoint.pt``); the fallback is ``checkpoint_prev.pt``.
    what : str
        What the file is, for the messages.

    Returns
    -------
    state : object
        The loaded checkpoint.
    used : Path
        The file it came from.
    note : str
        Empty when ``path`` itself was used, else a sentence saying why the previous
        checkpoint was used (print it: the run restarts from an earlier step).

    Raises
    ------
    CheckpointError
        Neither file is a readable, intact checkpoint; the message lists both reasons.
    """
    path = Path(path)
    prev = previous_path(path)
    try:
        return load_verified(path, what=what), path, ""
    except CheckpointError as err:
        first = str(err)
    try:
        state = load_verified(prev, what=what)
    except CheckpointError as err:
        raise CheckpointError(
            f"no usable {what}: {first}; and {err}. Start a new run (without --resume), "
            "or restore the files from a backup"
        ) from None
    return state, prev, f"{first}; resuming from the previous {what} {prev.name} instead"


def remove_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Delete the temporary files an interrupted atomic write of ``path`` left behind.

    An atomic write goes through ``.<name>.<random>.tmp`` in the same folder; a process
    killed mid-write (SIGKILL, power loss) leaves that file. Call this when a run resumes
    (it owns the folder then). The previous-copy's temporaries are removed too.

    Returns
    -------
    list of Path
        The files removed.
    """
    path = Path(path)
    removed = []
    for name in (path.name, previous_path(path).name):
        for tmp in path.parent.glob(f".{name}.*.tmp"):
            try:
                tmp.unlink()
                removed.append(tmp)
            except FileNotFoundError:  # pragma: no cover - removed concurrently
                pass
    return removed
