"""The process pool of the conformer builders: :func:`sci_moe._util.parallel_map` with
workers whose RDKit logger is silenced (RDKit is imported in the workers only)."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Sequence

from .._util import parallel_map as _parallel_map

__all__ = ["parallel_map", "silence_rdkit_worker"]


def silence_rdkit_worker() -> None:
    """Worker initializer: one OpenMP thread and no RDKit log messages.

    Does nothing in the calling process itself (``n_jobs=1``), whose logger stays as the
    user set it.
    """
    if mp.parent_process() is None:
        return
    os.environ["OMP_NUM_THREADS"] = "1"
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")


def parallel_map(fn, jobs: Sequence[tuple], **options) -> list:
    """``[fn(*job) for job in jobs]`` over ``n_jobs`` one-thread worker processes.

    :func:`sci_moe._util.parallel_map` with the same keyword ``options`` (``n_jobs``,
    ``progress``, ``desc``, ``on_result``, ``mp_context``, ``initializer``; see there for
    the contract of ``fn`` and the start methods), but :func:`silence_rdkit_worker` as the
    default worker initializer and the progress bar counted in molecules.
    """
    options.setdefault("initializer", silence_rdkit_worker)
    return _parallel_map(fn, jobs, unit="mol", **options)
