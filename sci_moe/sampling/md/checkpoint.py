"""Atomic MD checkpoints: one ``torch.save`` of plain containers, loaded ``weights_only``.

A checkpoint holds everything needed to continue a run bit for bit: the engine state
(positions, velocities, forces, energies and the random generator state of the torch
integrators, or OpenMM's own binary context checkpoint), the step, and each reporter's
file position (bytes and frames written) so that ``--resume`` truncates trajectories and
logs back to the checkpointed step before appending.

Writes are atomic, as in OpenMM's ``safesave`` and GROMACS' ``-cpi``: the new file is
written to a temporary name in the same folder, flushed to disk and moved over the old one
with :func:`os.replace`; the previous checkpoint is kept as ``<name>_prev<suffix>``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

__all__ = ["CHECKPOINT_FORMAT", "load_checkpoint", "previous_checkpoint_path", "save_checkpoint"]

#: Value of the ``"format"`` key of every MD checkpoint (bumped on incompatible changes).
CHECKPOINT_FORMAT = "sci-moe-md-checkpoint/1"


def previous_checkpoint_path(path: str | Path) -> Path:
    """Where the checkpoint replaced by ``path`` is kept (``checkpoint_prev.pt``)."""
    path = Path(path)
    return path.with_name(f"{path.stem}_prev{path.suffix}")


def _fsync_dir(folder: Path) -> None:
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


def save_checkpoint(path: str | Path, state: dict[str, Any], *, keep_previous: bool = True) -> Path:
    """Write ``state`` to ``path`` atomically.

    Parameters
    ----------
    path : str or Path
        Destination (conventionally ``checkpoint.pt``).
    state : dict
        Plain containers only (tensors, numbers, strings, bytes, lists, dicts) so that
        :func:`load_checkpoint` can read it with ``weights_only=True``. The key
        ``"format"`` is set to :data:`CHECKPOINT_FORMAT`.
    keep_previous : bool
        Keep the replaced checkpoint as :func:`previous_checkpoint_path` (hard link, or copy
        where links are not supported), so that ``path`` itself always exists.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = dict(state)
    state["format"] = CHECKPOINT_FORMAT
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    if keep_previous and path.exists():
        prev = previous_checkpoint_path(path)
        prev_tmp = prev.with_name(f".{prev.name}.{os.getpid()}.tmp")
        try:
            os.link(path, prev_tmp)
        except OSError:  # pragma: no cover - file systems without hard links
            shutil.copy2(path, prev_tmp)
        os.replace(prev_tmp, prev)
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``).

    Raises
    ------
    ValueError
        If the file does not exist or is not an MD checkpoint of this format.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist; start a new run without --resume")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(
            f"{path} is not a readable MD checkpoint ({type(err).__name__}: {err}); "
            f"try {previous_checkpoint_path(path).name} or start a new run"
        ) from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(
            f"{path} is not an MD checkpoint of format {CHECKPOINT_FORMAT!r} (found {found!r})"
        )
    return state
