"""The command line every benchmark script shares: :func:`base_parser` and :func:`setup`.

``--quick``, ``--json PATH``, ``--seed``, ``--threads`` and ``--malloc`` for every script;
``--verdicts-only JSON`` for a script with a verdict rule (answered by
:func:`~_common.results.verdicts_only`); ``--device`` for a script that trains on the
engine (``base_parser(device=True)``). :func:`setup` applies the threads, the seed and the
allocator policy and checks the device before anything is built.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from .allocator import set_malloc_policy

__all__ = ["base_parser", "setup"]


def base_parser(
    description: str,
    verdicts: Callable[[dict], Sequence[dict]] | None = None,
    *,
    device: bool = False,
) -> argparse.ArgumentParser:
    """Argument parser with the flags every benchmark accepts.

    ``--quick`` (reduced run for CI and checks), ``--json PATH``, ``--seed`` (default 0),
    ``--threads`` (default: torch's current intra-op thread count) and ``--malloc``
    (see :func:`set_malloc_policy`). Given the script's verdict rule ``verdicts(doc)``
    (see :func:`rederive_verdicts`), also ``--verdicts-only JSON``, which the script
    answers first thing after parsing with :func:`verdicts_only`. With ``device=True``,
    also ``--device`` (``cpu``, the default and the reference of every stored result;
    ``cuda``, ``cuda:N``), which :func:`setup` checks and the script passes to its
    configs (``TrainConfig.device``).
    """
    p = argparse.ArgumentParser(description=description)
    if verdicts is not None:
        p.add_argument(
            "--verdicts-only",
            type=Path,
            default=None,
            metavar="JSON",
            help="recompute the verdicts of a stored results JSON from its rows (nothing is rerun)",
        )
        p.set_defaults(verdict_rule=verdicts)
    p.add_argument("--quick", action="store_true", help="reduced run for CI and checks")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write results here")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help=f"torch intra-op threads (default {torch.get_num_threads()}, torch's choice)",
    )
    p.add_argument(
        "--malloc",
        choices=("default", "cached"),
        default="default",
        help="glibc allocator policy: as users get it (default) or caching, no page faults",
    )
    if device:
        p.add_argument(
            "--device",
            default="cpu",
            help="torch device of the training: cpu (default; the reference), cuda or cuda:N",
        )
    return p


def setup(args: argparse.Namespace) -> str:
    """Apply ``--threads``, ``--seed`` and ``--malloc``; call before building anything.

    A ``--device`` naming no device of this machine (``cuda`` without a GPU) stops the
    script with exit status 2 and what to use instead.

    Returns the allocator policy applied (see :func:`set_malloc_policy`).
    """
    if getattr(args, "device", None) is not None:
        from sci_moe._util import resolve_device

        try:
            resolve_device(args.device, what="--device")
        except ValueError as err:
            print(err, file=sys.stderr, flush=True)
            raise SystemExit(2) from None
    if args.threads is not None:
        if args.threads < 1:
            raise SystemExit(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return set_malloc_policy(getattr(args, "malloc", "default"))
