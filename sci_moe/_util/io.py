"""Atomic file writes: a temporary file in the same folder, flushed, ``os.replace``-d.

A reader (or a resumed run) sees either the old file or the new one, never a partial
write, even if the process is killed mid-write: the pattern of OpenMM's ``safesave`` and
GROMACS' ``-cpi``. ``fsync=True`` also makes the data and the rename durable across a
power loss; ``keep_previous=True`` keeps the replaced file as ``<stem>_prev<suffix>``
(hard link, or copy where links are not supported), so that ``path`` itself always exists.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_open",
    "atomic_save_json",
    "atomic_save_npz",
    "atomic_torch_save",
    "atomic_write_bytes",
    "atomic_write_text",
    "fsync_dir",
    "previous_path",
    "read_json_file",
    "sha256_file",
]


def previous_path(path: str | os.PathLike) -> Path:
    """Where the file replaced by an atomic write to ``path`` is kept (``<stem>_prev<suffix>``)."""
    path = Path(path)
    return path.with_name(f"{path.stem}_prev{path.suffix}")


def fsync_dir(folder: str | os.PathLike) -> None:
    """Flush a folder's entries (makes a rename durable); a no-op where unsupported."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _keep_previous(path: Path) -> None:
    prev = previous_path(path)
    if prev.exists() and os.path.samefile(path, prev):
        # a write killed between keeping the previous file and replacing ``path`` leaves
        # both names on one file: it is already kept (and rename() between two links of
        # one file does nothing, which would strand the temporary link)
        return
    fd, prev_tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{prev.name}.", suffix=".tmp")
    os.close(fd)
    os.unlink(prev_tmp)
    try:
        try:
            os.link(path, prev_tmp)
        except OSError:  # pragma: no cover - file systems without hard links
            shutil.copy2(path, prev_tmp)
        os.replace(prev_tmp, prev)
    except BaseException:
        Path(prev_tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike,
    mode: str = "wb",
    *,
    fsync: bool = True,
    keep_previous: bool = False,
    encoding: str | None = None,
) -> Iterator[IO[Any]]:
    """Open a temporary file that replaces ``path`` when the ``with`` block ends cleanly.

    Parameters
    ----------
    path : path-like
        Destination; its folder is created if needed.
    mode : {"wb", "w"}
        Binary or text.
    fsync : bool
        Flush the file and the folder to disk (durable across a power loss).
    keep_previous : bool
        Keep the replaced file as :func:`previous_path` (``path`` always exists).
    encoding : str, optional
        Text encoding for ``mode="w"`` (UTF-8 by default).

    Yields
    ------
    file object
        Write to it; on an exception the temporary file is removed and ``path`` is untouched.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open writes whole files: mode must be 'wb' or 'w', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        kw = {"encoding": encoding or "utf-8"} if mode == "w" else {}
        with os.fdopen(fd, mode, **kw) as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; use normal file permissions
        if keep_previous and path.exists():
            _keep_previous(path)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, **kw) -> Path:
    """Write ``data`` to ``path`` atomically (keywords as :func:`atomic_open`)."""
    with atomic_open(path, "wb", **kw) as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, **kw) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (keywords as :func:`atomic_open`)."""
    with atomic_open(path, "w", **kw) as fh:
        fh.write(text)
    return Path(path)


def atomic_save_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2, **kw) -> Path:
    """``json.dump(obj)`` to ``path`` atomically, with a trailing newline."""
    default = kw.pop("default", None)
    text = json.dumps(obj, indent=indent, default=default) + "\n"
    return atomic_write_text(path, text, **kw)


def atomic_save_npz(
    path: str | os.PathLike, arrays: dict, *, compressed: bool = False, **kw
) -> Path:
    """``np.savez(**arrays)`` (or ``savez_compressed``) to ``path`` atomically.

    The file is written exactly at ``path`` (numpy's habit of appending ``.npz`` does not
    apply, since numpy is given an open file).
    """
    import numpy as np

    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return atomic_write_bytes(path, buf.getvalue(), **kw)


def atomic_torch_save(path: str | os.PathLike, obj: Any, **kw) -> Path:
    """``torch.save(obj)`` to ``path`` atomically (keywords as :func:`atomic_open`).

    Save plain containers (tensors, numbers, strings, lists, dicts) so that the file loads
    with ``torch.load(path, weights_only=True)``.
    """
    import torch

    with atomic_open(path, "wb", **kw) as fh:
        torch.save(obj, fh)
    return Path(path)


def sha256_file(path: str | os.PathLike, block_size: int = 1 << 22) -> str:
    """SHA-256 (hex digest) of a file's bytes, read in blocks (constant memory).

    Parameters
    ----------
    path : path-like
        The file.
    block_size : int, optional
        Bytes read at a time (default 4 MiB).

    Returns
    -------
    str
        64 hexadecimal characters.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(block_size), b""):
            h.update(block)
    return h.hexdigest()


def read_json_file(path: str | os.PathLike, what: str, missing: str = "does not exist") -> Any:
    """The JSON value stored in the file ``path``.

    Raises
    ------
    ValueError
        ``"{what} '{path}' {missing}"`` if there is no such file, ``"{what} {path} is not
        valid JSON: ..."`` if its text does not parse.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} {str(path)!r} {missing}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} {path} is not valid JSON: {err}") from None
