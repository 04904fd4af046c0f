"""The ``sci-moe`` command."""

from __future__ import annotations

import argparse
import sys

from . import cap as _cap
from . import data as _data
from . import md as _md
from . import train as _train
from . import vrp as _vrp
from ._threads import add_threads_argument

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from ._threads import torch_threads
    from .demo_moe import DemoConfig, run_demo

    cfg = DemoConfig(num_experts=args.experts, top_k=args.top_k, steps=args.steps, seed=args.seed)
    with torch_threads(args.threads, default=1):
        run_demo(args.out, cfg)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sci-moe", description="Mixture-of-Experts for molecules and samplers."
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="train a small MoE on real data and plot its routing")
    demo.add_argument("--out", default="demo_out", help="output folder (default: demo_out)")
    demo.add_argument("--experts", type=int, default=8, help="number of experts (default 8)")
    demo.add_argument("--top-k", type=int, default=2, help="experts per token (default 2)")
    demo.add_argument("--steps", type=int, default=600, help="training steps (default 600)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_threads_argument(demo, 1, "the tiny models train fastest on one")
    demo.set_defaults(func=_demo)
    _cap.add_parser(sub)
    _md.add_parser(sub)
    _train.add_parser(sub)
    _data.add_parser(sub)
    _vrp.add_parser(sub)
    from . import provenance as _provenance

    _provenance.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from .. import __version__

        print(f"sci-moe {__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return 0
    prog = command_prog(args)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as err:
        print(f"{prog}: error: {_os_message(err)}; check the path you gave", file=sys.stderr)
        return 2
    except OSError as err:
        print(
            f"{prog}: error: cannot read or write {_os_message(err)} (disk full, quota or I/O "
            "error?); files written before this point are kept",
            file=sys.stderr,
        )
        return 3


def command_prog(args: argparse.Namespace) -> str:
    """The prefix of every message a command prints, as argparse writes it: ``sci-moe md run``.

    Sub-subcommands are found by the ``<command>_command`` destination their parser uses.
    """
    words = ["sci-moe"]
    command = getattr(args, "command", None)
    while command:
        words.append(command)
        command = getattr(args, f"{command.replace('-', '_')}_command", None)
    return " ".join(words)


def _os_message(err: OSError) -> str:
    where = f"{err.filename}: " if getattr(err, "filename", None) else ""
    return f"{where}{err.strerror or err}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
