"""``--threads`` of the ``sci-moe`` commands that run torch: one flag, one rule.

The rule is :func:`sci_moe._util.set_threads`'s: no flag means the command's default
for its work (one thread for small batched models: MD, the demos, VRP, the provenance
classifiers; every core for ``cap --hardware cpu``, which measures the machine's peak),
``0`` means every core this process may use, ``N`` means ``N``.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

__all__ = ["add_threads_argument", "torch_threads"]


def add_threads_argument(parser: argparse.ArgumentParser, default: int, why: str) -> None:
    """Add ``--threads N`` (``None`` unless given) to ``parser``.

    Parameters
    ----------
    default : int
        The command's default (``0``: every core), named in the help.
    why : str
        Why that default, for the help ("tiny models run fastest on one").
    """
    what = "every core" if default == 0 else f"{default}"
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help=f"CPU threads of torch (default {what}: {why}; 0 = every core)",
    )


@contextlib.contextmanager
def torch_threads(threads: int | None, default: int) -> Iterator[int]:
    """Run a block on ``threads`` torch threads (see :func:`sci_moe._util.set_threads`),
    then restore the previous count (for callers of ``main`` in one process).

    Yields
    ------
    int
        The number of threads in use.

    Raises
    ------
    ValueError
        ``threads`` is negative (exit code 2 through ``sci-moe``).
    """
    import torch

    from .._util import set_threads

    before = torch.get_num_threads()
    try:
        yield set_threads(threads, default=default)
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
