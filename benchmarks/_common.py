"""Helpers shared by the scripts in ``benchmarks/``.

Every benchmark script runs standalone (``python benchmarks/<name>.py``), accepts
``--quick``, ``--json PATH``, ``--seed`` and ``--threads``, prints a table and, with
``--json``, writes::

    {"benchmark": str, "machine": {...},
     "rows": [{"case": str, "metric": str, "value": float, "unit": str,
               "vs": str | None, "ratio": float | None}]}

one row per measured figure; ``vs`` names a baseline measured in the same run and
``ratio`` is ``value / baseline`` oriented so that > 1 means sci-moe is better
(see ``DESIGN.md``). Scripts import this module as ``_common``: Python puts the
script's own folder first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

__all__ = [
    "Row",
    "Timing",
    "base_parser",
    "cpu_model",
    "format_table",
    "machine_info",
    "print_table",
    "setup",
    "time_fn",
    "write_json",
]


# --------------------------------------------------------------------------- CLI


def base_parser(description: str) -> argparse.ArgumentParser:
    """Argument parser with the flags every benchmark accepts.

    ``--quick`` (reduced run for CI and checks), ``--json PATH``, ``--seed`` (default 0)
    and ``--threads`` (default: torch's current intra-op thread count).
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="reduced sizes and repeats (CI)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write results here")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help=f"torch intra-op threads (default {torch.get_num_threads()}, torch's choice)",
    )
    return p


def setup(args: argparse.Namespace) -> None:
    """Apply ``--threads`` and ``--seed`` (call once, before building anything)."""
    if args.threads is not None:
        if args.threads < 1:
            raise SystemExit(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)


# ----------------------------------------------------------------------- machine


def cpu_model() -> str:
    """CPU model name from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(seed: int | None = None, **extra) -> dict:
    """What the numbers depend on: versions, CPU, threads, accelerator; plus ``extra``."""
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    if seed is not None:
        info["seed"] = seed
    info.update(extra)
    return info


# ------------------------------------------------------------------------ timing


@dataclass
class Timing:
    """Wall-clock seconds of the timed repeats (warm-up calls excluded)."""

    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def spread(self) -> float:
        """``(max - min) / median``: a quick sign of a noisy measurement."""
        return (max(self.times) - min(self.times)) / self.median


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_fn(fn: Callable[[], object], repeats: int = 3, warmup: int = 1) -> Timing:
    """Time ``fn()`` ``repeats`` times after ``warmup`` untimed calls.

    Synchronises CUDA (when present) around each call, so asynchronous kernels are
    counted. Report :attr:`Timing.median`.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    _sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return Timing(times)


# ------------------------------------------------------------------------ output


@dataclass
class Row:
    """One measured figure (see the module docstring for ``vs`` / ``ratio``)."""

    case: str
    metric: str
    value: float
    unit: str
    vs: str | None = None
    ratio: float | None = None


def write_json(path: str | Path, benchmark: str, machine: dict, rows: Sequence[Row]) -> None:
    """Write the ``DESIGN.md`` benchmark JSON to ``path`` (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": benchmark, "machine": machine, "rows": [asdict(r) for r in rows]}
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0 or 1e-2 <= abs(v) < 1e6:
            return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        return f"{v:.3g}"
    return str(v)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned.

    Floats get three significant digits (integers above 100); ``None`` prints as ``-``.
    """
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(r: list[str]) -> str:
        parts = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        return "  ".join(parts).rstrip()

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> None:
    """Print :func:`format_table` (with an optional title line) and flush."""
    if title:
        print(title)
    print(format_table(headers, rows))
    sys.stdout.flush()
