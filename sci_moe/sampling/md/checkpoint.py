"""Atomic MD checkpoints: one ``torch.save`` of plain containers, loaded ``weights_only``.

A checkpoint holds everything needed to continue a run bit for bit: the engine state
(positions, velocities, forces, energies and the random generator state of the torch
integrators, or OpenMM's own binary context checkpoint), the step, and each reporter's
file position (bytes and frames written) so that ``--resume`` truncates trajectories and
logs back to the checkpointed step before appending.

Writes are atomic, as in OpenMM's ``safesave`` and GROMACS' ``-cpi``: the new file is
written to a temporary name in the same folder, flushed to disk and moved over the old one
with :func:`os.replace`; the previous checkpoint is kept as ``<name>_prev<suffix>``.
Each file carries a SHA-256 of its bytes (:func:`sci_moe._util.save_verified`), checked on
every read: a checkpoint with damaged bytes is refused, and :func:`load_latest_checkpoint`
then falls back to the previous one (torch's zip reader does not check its CRCs, so a
damaged plain ``torch.save`` file can load and continue from wrong numbers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..._util import CheckpointError, load_latest, load_verified, previous_path, save_verified

__all__ = [
    "CHECKPOINT_FORMAT",
    "load_checkpoint",
    "load_latest_checkpoint",
    "previous_checkpoint_path",
    "save_checkpoint",
]

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
    """Write ``state`` to ``path`` atomically with a checksum (``sci_moe._util.save_verified``).

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
    return save_verified(path, state, keep_previous=keep_previous)


def _check_format(state: Any, path: Path, format: str, what: str) -> dict[str, Any]:
    if not isinstance(state, dict) or state.get("format") != format:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{path} is not an {what} of format {format!r} (found {found!r})")
    return state


def load_checkpoint(
    path: str | Path, *, format: str = CHECKPOINT_FORMAT, what: str = "MD checkpoint"
) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`: checksum checked, then
    ``weights_only=True``.

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
        If the file does not exist, is damaged (its checksum does not match) or is not a
        checkpoint of this format. See :func:`load_latest_checkpoint` for the fallback to
        the previous checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist; start a new run without --resume")
    try:
        state = load_verified(path, what=what)
    except CheckpointError as err:
        prev = previous_checkpoint_path(path)
        hint = f"try {prev.name} or start a new run" if prev.is_file() else "start a new run"
        raise ValueError(f"{err}; {hint}") from None
    return _check_format(state, path, format, what)


def load_latest_checkpoint(
    path: str | Path, *, format: str = CHECKPOINT_FORMAT, what: str = "MD checkpoint"
) -> tuple[dict[str, Any], Path, str]:
    """Read ``path``, or the previous checkpoint when ``path`` is missing or damaged.

    Parameters
    ----------
    path : str or Path
        The newest checkpoint (``checkpoint.pt``); the fallback is
        :func:`previous_checkpoint_path` (``checkpoint_prev.pt``).
    format, what : str
        As :func:`load_checkpoint`.

    Returns
    -------
    state : dict
        The checkpoint.
    used : Path
        The file it came from.
    note : str
        Empty when ``path`` was used, else why the previous checkpoint was used (print it:
        the run continues from an earlier step).

    Raises
    ------
    ValueError
        Neither file is an intact checkpoint of this format (the message gives both
        reasons), or the file used is of another format.
    """
    state, used, note = load_latest(path, what=what)
    return _check_format(state, used, format, what), used, note
