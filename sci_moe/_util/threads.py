"""How many CPU threads torch uses: one rule for every command that runs torch.

Small batched workloads (MD of a few dozen walkers, the demos' and tests' tiny models)
run fastest on **one thread**, and on a shared machine torch's default (one thread per
core) makes two such runs slow each other down by an order of magnitude (measured: an MD
run fell from 4,090 to 230 ns/day beside a second busy process). So every command takes
``--threads`` (and the config key ``threads``) with a default chosen for its work, and
``0`` means "every core this process may use".
"""

from __future__ import annotations

import os

__all__ = ["available_cores", "resolve_threads", "set_threads"]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def resolve_threads(threads: int | None, *, default: int = 1) -> int:
    """The thread count a setting means.

    Parameters
    ----------
    threads : int or None
        ``None``: ``default``; ``0``: :func:`available_cores`; ``n >= 1``: ``n``.
    default : int
        The command's default for its workload (``0`` for every core).

    Raises
    ------
    ValueError
        ``threads`` (or ``default``) is negative or not an integer.
    """
    value = default if threads is None else threads
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"threads must be an integer >= 0 (0 = every core), got {value!r}; "
            "e.g. --threads 1 on a shared machine"
        )
    return available_cores() if value == 0 else value


def set_threads(threads: int | None, *, default: int = 1) -> int:
    """Set torch's intra-op thread count from a setting (see :func:`resolve_threads`).

    Returns
    -------
    int
        The number of threads now in use.
    """
    import torch

    n = resolve_threads(threads, default=default)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
