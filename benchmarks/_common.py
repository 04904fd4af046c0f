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

Measuring on a CPU, two things move timings by 10-100 % and are handled here:

* **Other processes.** Oversubscribed cores make OpenMP kernels wait for descheduled
  threads. :func:`busy_warning` samples the machine before a run and
  :class:`OtherLoad` reports the CPU time others used during it.
* **Allocator state.** glibc maps large blocks afresh (page faults on every step) and
  moves that threshold with the history of frees, so one contestant's timing depends
  on what ran before it in the same process. :func:`run_isolated` runs each measurement
  in a fresh process; :func:`set_malloc_policy` can switch to a caching policy.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

__all__ = [
    "OtherLoad",
    "Row",
    "Timing",
    "base_parser",
    "busy_warning",
    "child_result",
    "cpu_model",
    "format_table",
    "git_revision",
    "interleaved",
    "machine_info",
    "print_rows",
    "print_table",
    "run_isolated",
    "set_malloc_policy",
    "setup",
    "time_fn",
    "warn_if_busy",
    "write_json",
]

_RESULT_MARK = "@@benchmark-result "


# --------------------------------------------------------------------------- CLI


def base_parser(description: str) -> argparse.ArgumentParser:
    """Argument parser with the flags every benchmark accepts.

    ``--quick`` (reduced run for CI and checks), ``--json PATH``, ``--seed`` (default 0),
    ``--threads`` (default: torch's current intra-op thread count) and ``--malloc``
    (see :func:`set_malloc_policy`).
    """
    p = argparse.ArgumentParser(description=description)
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
    return p


def setup(args: argparse.Namespace) -> str:
    """Apply ``--threads``, ``--seed`` and ``--malloc``; call before building anything.

    Returns the allocator policy applied (see :func:`set_malloc_policy`).
    """
    if args.threads is not None:
        if args.threads < 1:
            raise SystemExit(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return set_malloc_policy(getattr(args, "malloc", "default"))


# ---------------------------------------------------------------------- allocator

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc mallopt parameters (malloc.h)


def set_malloc_policy(mode: str = "default") -> str:
    """Choose how glibc serves PyTorch's CPU tensors (which come from ``malloc``).

    Parameters
    ----------
    mode : {"default", "cached"}
        ``"default"`` changes nothing: blocks above glibc's mmap threshold (dynamic,
        128 KiB to 32 MiB) are mapped on allocation and unmapped on free, so a training
        step page-faults its large activations afresh every time. ``"cached"`` never
        maps nor trims, so freed memory is reused like a caching allocator
        (jemalloc/tcmalloc, or CUDA's): steady-state steps pay no page faults.

    Returns
    -------
    str
        The policy in force, for the machine info.
    """
    if mode not in ("default", "cached"):
        raise ValueError(f"mode must be 'default' or 'cached', got {mode!r}")
    if mode == "default":
        return "default"
    name = ctypes.util.find_library("c")
    if not name or platform.libc_ver()[0] != "glibc":
        return "default (not glibc; cached policy unavailable)"
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return "default (no mallopt; cached policy unavailable)"
    if mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, 2**62):
        return "cached (glibc: no mmap, no trim)"
    return "default (mallopt failed)"


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


class OtherLoad:
    """CPU time that *other* processes used while this one ran (Linux ``/proc`` only).

    Use ``load = OtherLoad()`` at the start and :meth:`report` at the end: the busy CPU
    seconds of the whole machine minus those of this process and its finished children.
    """

    def __init__(self) -> None:
        self._t0 = time.perf_counter()
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float] | None:
        try:
            tick = os.sysconf("SC_CLK_TCK")
            with open("/proc/stat") as f:
                v = [int(n) for n in f.readline().split()[1:]]
            busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
            with open("/proc/self/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            own = sum(int(n) for n in fields[11:15])  # utime stime cutime cstime
            return busy / tick, own / tick
        except (OSError, ValueError, IndexError, AttributeError):
            return None

    def report(self) -> dict:
        """``{"wall_s", "other_cpu_s", "other_cpu_fraction"}`` (fraction of all cores)."""
        wall = time.perf_counter() - self._t0
        end = self._read()
        if self._start is None or end is None:
            return {"wall_s": round(wall, 1), "other_cpu_s": None, "other_cpu_fraction": None}
        other = max(0.0, (end[0] - self._start[0]) - (end[1] - self._start[1]))
        cores = os.cpu_count() or 1
        return {
            "wall_s": round(wall, 1),
            "other_cpu_s": round(other, 1),
            "other_cpu_fraction": round(other / (max(wall, 1e-9) * cores), 3),
        }


def busy_warning(sample_s: float = 1.0) -> str | None:
    """A warning line when other processes use the CPUs now (sampled for ``sample_s``)."""
    probe = OtherLoad()
    time.sleep(sample_s)
    frac = probe.report()["other_cpu_fraction"]
    if frac is not None and frac > 0.1:
        return (
            f"warning: other processes use {100 * frac:.0f}% of the CPUs; the timings "
            "will be noisy (oversubscribed OpenMP can be 10-100x slower)"
        )
    return None


def warn_if_busy(file=None) -> str | None:
    """:func:`busy_warning`, printed (to ``file``, default stdout) when there is one.

    Returns the warning (or ``None``) for the machine info.
    """
    warn = busy_warning()
    if warn:
        print(warn, file=file)
    return warn


def git_revision(path: str | Path | None = None) -> str | None:
    """``<commit>`` (``+dirty`` with uncommitted changes to tracked files), or ``None``.

    Of the checkout holding ``path`` (default: this folder).
    """
    where = Path(path) if path is not None else Path(__file__).resolve().parent

    def git(*cmd: str) -> str:
        out = subprocess.run(
            ["git", "-C", str(where), *cmd], capture_output=True, text=True, timeout=10
        )
        if out.returncode:
            raise OSError(out.stderr)
        return out.stdout.strip()

    try:
        rev = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return rev + ("+dirty" if dirty else "")


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
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "git": git_revision(),
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
    def spread(self) -> float:
        """``(max - min) / median``: a quick sign of a noisy measurement."""
        return (max(self.times) - min(self.times)) / self.median


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each closure, interleaved: one warm-up call each, then
    ``repeats`` rounds in which every closure runs once, the order rotated per round (so
    load that changes between rounds reaches every contestant alike)."""
    names = list(fns)
    for n in names:
        fns[n]()
    out = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            fns[n]()
            out[n].append(time.perf_counter() - t0)
    return out


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


# ----------------------------------------------------------------- fresh processes


def run_isolated(
    argv: Sequence[str], timeout: float | None = None, env: dict[str, str] | None = None
) -> dict:
    """Run ``python <argv>`` in a fresh process and return what it passed to :func:`child_result`.

    ``env`` is the child's whole environment (default: this process's), e.g.
    ``dict(os.environ) | {"THP_MEM_ALLOC_ENABLE": "1"}`` for settings read when torch
    starts. The child's other output is echoed. Raises ``SystemExit`` with the child's
    stderr when it fails or reports nothing.
    """
    cmd = [sys.executable, *map(str, argv)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(_RESULT_MARK):
            result = json.loads(line[len(_RESULT_MARK) :])
        elif line.strip():
            print(line)
    sys.stdout.flush()
    if proc.returncode or result is None:
        raise SystemExit(
            f"benchmark child {' '.join(cmd[1:])} failed (exit {proc.returncode}):\n"
            + proc.stderr[-4000:]
        )
    return result


def child_result(obj: dict) -> None:
    """Hand ``obj`` (JSON-serialisable) back to the :func:`run_isolated` caller."""
    print(_RESULT_MARK + json.dumps(obj), flush=True)


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
    doc = {"benchmark": benchmark, "machine": machine, "rows": [asdict(r) for r in rows]}
    write_json_doc(path, doc)


def finish(
    args: argparse.Namespace,
    benchmark: str,
    machine: dict,
    rows: Sequence[Row],
    other: OtherLoad,
    t0: float,
) -> int:
    """The common end of a benchmark's ``main``: record the contention, say the total time,
    write the JSON when ``--json`` was given; returns the exit code 0.

    ``machine["contention"]`` gets :meth:`OtherLoad.report` (wall time and the CPU seconds
    other processes used meanwhile), so a page quoting the JSON can state the load.
    """
    load = other.report()
    machine["contention"] = load
    print(
        f"total {time.perf_counter() - t0:.0f} s; other processes used {load['other_cpu_s']} CPU s"
    )
    if getattr(args, "json", None) is not None:
        write_json(args.json, benchmark, machine, rows)
        print(f"wrote {args.json}")
    return 0


def write_json_doc(path: str | Path, doc: dict, indent: int = 2) -> None:
    """Write any JSON document to ``path`` atomically (a killed run leaves the old file)."""
    from sci_moe._util import atomic_write_text

    atomic_write_text(Path(path), json.dumps(doc, indent=indent) + "\n", fsync=False)


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

    Floats get three significant digits (no decimals from 100 up); ``None`` is ``-``.
    """
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in r] for r in rows]
    if any(len(r) != len(headers) for r in cells):
        raise ValueError("every row needs one value per header")
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(r: list[str]) -> str:
        rest = zip(r[1:], widths[1:], strict=True)
        parts = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in rest]
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


def print_rows(rows: Sequence[Row], title: str = "") -> None:
    """Print benchmark rows as a case / metric / value / unit / ratio table."""
    print_table(
        ["case", "metric", "value", "unit", "ratio"],
        [[r.case, r.metric, r.value, r.unit, r.ratio] for r in rows],
        title=title,
    )
