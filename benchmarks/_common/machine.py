"""What the numbers depend on, and the load they were measured under.

:func:`machine_info` records versions, CPU, threads, accelerator and the checkout's
revision (:func:`git_revision`). Other processes move CPU timings by 10-100 %
(oversubscribed cores make OpenMP kernels wait for descheduled threads):
:func:`busy_warning` / :func:`warn_if_busy` sample the machine before a run and
:class:`OtherLoad` reports the CPU time others used during it.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

import torch

__all__ = [
    "OtherLoad",
    "busy_warning",
    "cpu_model",
    "git_revision",
    "machine_info",
    "warn_if_busy",
]


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
