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

from pathlib import Path
from typing import Any

import torch

from ..._util import atomic_torch_save, previous_path

__all__ = ["CHECKPOINT_FORMAT", "load_checkpoint", "previous_checkpoint_path", "save_checkpoint"]

#: Value of the ``"format"`` key of every MD checkpoint (bumped on incompatible changes).
CHECKPOINT_FORMAT = "sci-moe-md-checkpoint/1"


def previous_checkpoint_path(path: str | Path) -> Path:
    """Where the checkpoint replaced by ``path`` is kept (``checkpoint_prev.pt``)."""
    return previous_path(path)


def save_checkpoint(
    path: str | Path,
    state: dict[str, Any],
    *,
    keep_previous: bool = True,
    format: str = CHECKPOINT_FORMAT,
) -> Path:
    """Write ``state`` to ``path`` atomically (``sci_moe._util.atomic_torch_save``, fsync-ed).

    Parameters
    ----------
    path : str or Path
        Destination (conventionally ``checkpoint.pt``); its folder is created if needed.
    state : dict
        Plain containers only (tensors, numbers, strings, bytes, lists, dicts) so that
        :func:`load_checkpoint` can read it with ``weights_only=True``. The key
        ``"format"`` is set to ``format``.
    keep_previous : bool
        Keep the replaced checkpoint as :func:`previous_checkpoint_path` (hard link, or copy
        where links are not supported), so that ``path`` itself always exists.
    format : str
        Format tag (default :data:`CHECKPOINT_FORMAT`); other run loops built on this
        module (e.g. OpenMM simulated tempering) use their own.

    Returns
    -------
    Path
        ``path``.
    """
    state = dict(state)
    state["format"] = format
    return atomic_torch_save(path, state, keep_previous=keep_previous)


def load_checkpoint(
    path: str | Path, *, format: str = CHECKPOINT_FORMAT, what: str = "MD checkpoint"
) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``).

    Parameters
    ----------
    path : str or Path
    format : str
        The format tag the file must carry.
    what : str
        What the file should be, for error messages.

    Raises
    ------
    ValueError
        If the file does not exist or is not a checkpoint of this format.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist; start a new run without --resume")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(
            f"{path} is not a readable {what} ({type(err).__name__}: {err}); "
            f"try {previous_checkpoint_path(path).name} or start a new run"
        ) from None
    if not isinstance(state, dict) or state.get("format") != format:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{path} is not an {what} of format {format!r} (found {found!r})")
    return state
