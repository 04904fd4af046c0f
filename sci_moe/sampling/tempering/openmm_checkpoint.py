"""Checkpoint files of OpenMM simulated tempering, through the md run layer's checkpoint code.

A checkpoint is one :func:`sci_moe.sampling.md.checkpoint.save_checkpoint` file (atomic,
``fsync``-ed, loaded with ``torch.load(weights_only=True)``, so nothing is unpickled)
holding ``{"meta": JSON-ready dict, "arrays": {name: tensor}}``: the OpenMM context
checkpoint, positions, velocities, box, weights, online-weight and trace arrays in
``arrays``; levels, counters, generator states and fingerprints of the config, system,
integrator and platform in ``meta``. :func:`check_fingerprints` refuses a checkpoint of
another run with a ``ValueError`` that says what differs. Files of the first format (one
``.npz`` with a JSON ``meta`` entry) are still read.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import torch

from .. import md
from .openmm_config import json_default

__all__ = [
    "CHECKPOINT_FORMAT",
    "LEGACY_CHECKPOINT_FORMAT",
    "check_fingerprints",
    "read_checkpoint",
    "write_checkpoint",
]

#: Format tag of OpenMM simulated-tempering checkpoints.
CHECKPOINT_FORMAT = "sci-moe/openmm-tempering-checkpoint/2"
#: The first format: an ``.npz`` of arrays and a JSON ``meta`` string (still read).
LEGACY_CHECKPOINT_FORMAT = "sci-moe/openmm-tempering-checkpoint/1"
_WHAT = "OpenMMSimulatedTempering checkpoint"


def write_checkpoint(path: str | Path, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``meta`` (JSON-ready) and ``arrays`` (NumPy) to ``path`` atomically.

    The previous file is replaced, not kept (a crash leaves the old or the new one).
    """
    meta = json.loads(json.dumps(meta, default=json_default))
    tensors = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in arrays.items()}
    state = {"meta": meta, "arrays": tensors}
    return md.checkpoint.save_checkpoint(path, state, keep_previous=False, format=CHECKPOINT_FORMAT)


def _read_legacy(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(str(data.pop("meta")))
    except (ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not a readable tempering checkpoint") from exc
    if not isinstance(meta, dict) or meta.get("format") != LEGACY_CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a checkpoint of OpenMMSimulatedTempering")
    return meta, data


def read_checkpoint(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """``(meta, arrays)`` of a checkpoint written by :func:`write_checkpoint` (or the `.npz`
    format before it).

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ValueError
        If the file is not a readable tempering checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            legacy = "meta.npy" in z.namelist()
        if legacy:
            return _read_legacy(path)
    state = md.checkpoint.load_checkpoint(path, format=CHECKPOINT_FORMAT, what=_WHAT)
    try:
        meta, arrays = state["meta"], {k: v.numpy() for k, v in state["arrays"].items()}
    except (KeyError, AttributeError, TypeError) as exc:
        raise ValueError(f"{path} is not a readable tempering checkpoint") from exc
    return meta, arrays


def check_fingerprints(path: Path, meta: dict, mine: dict, *, exact: bool) -> None:
    """Refuse a checkpoint written with another config, system, integrator (or platform).

    Parameters
    ----------
    path : Path
        For messages.
    meta : dict
        The checkpoint's ``meta``.
    mine : dict
        The fingerprints of the sampler that loads it.
    exact : bool
        Also require the same OpenMM platform (for the binary context checkpoint).
    """
    theirs, ours = meta["config"], mine["config"]
    diff = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    if diff:
        raise ValueError(
            f"checkpoint {path} was written with a different config (differs in: "
            f"{', '.join(diff)}); build the sampler with the checkpoint's config or use "
            "another checkpoint path"
        )
    for key, what in (
        ("n_particles", "system (number of particles)"),
        ("system_sha256", "system (serialised System XML)"),
        ("integrator", "integrator (class, step size or friction)"),
    ):
        if meta[key] != mine[key]:
            raise ValueError(
                f"checkpoint {path} was written for a different {what}: {meta[key]!r} vs "
                f"{mine[key]!r}; resume with the same system and integrator settings"
            )
    if exact and meta["platform"] != mine["platform"]:
        raise ValueError(
            f"checkpoint {path} holds a {meta['platform']} context checkpoint but this "
            f"simulation runs on {mine['platform']}; use that platform, or pass "
            "exact=False to restore positions, velocities and box only"
        )
