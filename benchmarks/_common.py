"""Helpers shared by the scripts in ``benchmarks/``.

Every benchmark script runs standalone (``python benchmarks/<paper>/run.py``), accepts
``--quick``, ``--json PATH``, ``--seed`` and ``--threads``, prints a table and, with
``--json``, writes::

    {"benchmark": str, "machine": {...},
     "rows": [{"case": str, "metric": str, "value": float, "unit": str,
               "vs": str | None, "ratio": float | None}]}

one row per measured figure; ``vs`` names a baseline measured in the same run and
``ratio`` is ``value / baseline`` oriented so that > 1 means sci-moe is better
(see ``DESIGN.md``). A figure from elsewhere (a paper, an issue, another machine's run)
is a *quoted* row, ``{"case", "metric", "value", "unit", "quoted": {"source",
"machine"}}``, without ``vs`` and ``ratio``: only a baseline measured in the same run
gets a ratio (issue 41). Scripts import this module as ``_common``: Python puts the
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
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

import torch

__all__ = [
    "CYCLE_SEED",
    "VERDICTS",
    "VERDICT_KEYS",
    "OtherLoad",
    "QuotedRow",
    "Row",
    "Timing",
    "base_parser",
    "busy_warning",
    "check_resume_settings",
    "child_result",
    "concat",
    "cpu_model",
    "decide_verdict",
    "format_table",
    "git_revision",
    "interleaved",
    "machine_info",
    "paired_test",
    "piece_arguments",
    "piece_deadline",
    "previous_run",
    "print_rows",
    "print_table",
    "quote",
    "rederive_rows",
    "refuse",
    "row_dict",
    "row_from_dict",
    "run_isolated",
    "set_malloc_policy",
    "setup",
    "time_fn",
    "until_flat",
    "verdict_entry",
    "verdicts_only",
    "warn_if_busy",
    "write_json",
]

_RESULT_MARK = "@@benchmark-result "


# --------------------------------------------------------------------------- CLI


def base_parser(
    description: str, verdicts: Callable[[dict], Sequence[dict]] | None = None
) -> argparse.ArgumentParser:
    """Argument parser with the flags every benchmark accepts.

    ``--quick`` (reduced run for CI and checks), ``--json PATH``, ``--seed`` (default 0),
    ``--threads`` (default: torch's current intra-op thread count) and ``--malloc``
    (see :func:`set_malloc_policy`). Given the script's verdict rule ``verdicts(doc)``
    (see :func:`rederive_verdicts`), also ``--verdicts-only JSON``, which the script
    answers first thing after parsing with :func:`verdicts_only`.
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


# ---------------------------------------------------------------------- verdicts

#: The three verdicts a claim can get (issue 41).
VERDICTS = ("reproduced", "contradicted", "not decided")
#: The keys of one entry of a JSON's top-level ``verdicts`` list, in order.
VERDICT_KEYS = (
    "claim",
    "verdict",
    "decisive",
    "metric",
    "ours",
    "baseline",
    "baseline_value",
    "seeds",
    "p_value",
    "converged",
    "why",
)
_TESTS = ("t", "wilcoxon", "sign")


def _finite(x: object) -> bool:
    return (
        isinstance(x, int | float) and not isinstance(x, bool) and x == x and abs(x) != float("inf")
    )


def paired_test(ours: Sequence[float], baseline: Sequence[float]) -> dict:
    """Paired comparison of per-seed values (seed ``i`` of ``ours`` with that of ``baseline``).

    Returns ``n``, ``mean_diff`` (mean of ``ours - baseline``), ``wins`` / ``losses`` /
    ``ties`` (seeds where ``ours`` is above / below / equal) and the two-sided p-values of
    the paired t-test (``t``), the Wilcoxon signed-rank test (``wilcoxon``, exact for small
    ``n``) and the sign test (``sign``, binomial on wins vs losses, ties left out). With
    three seeds the Wilcoxon and sign tests cannot go below 0.25: only the t-test can
    resolve a difference there. Differences that are all zero give p = 1 everywhere.
    """
    from scipy import stats

    a = [float(x) for x in ours]
    b = [float(x) for x in baseline]
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(
            f"paired_test needs two equally long per-seed lists of at least 2 values "
            f"(got {len(a)} and {len(b)}); pass the same seeds in the same order"
        )
    if not all(_finite(x) for x in a + b):
        raise ValueError("paired_test got a non-finite value: drop or fix the diverged seed")
    diff = [x - y for x, y in zip(a, b, strict=True)]
    wins = sum(d > 0 for d in diff)
    losses = sum(d < 0 for d in diff)
    out = {
        "n": len(diff),
        "mean_diff": sum(diff) / len(diff),
        "wins": wins,
        "losses": losses,
        "ties": len(diff) - wins - losses,
    }
    if wins + losses == 0:
        return {**out, "t": 1.0, "wilcoxon": 1.0, "sign": 1.0}
    if max(diff) == min(diff):
        # Identical non-zero differences: no spread, the t statistic is infinite.
        t_p = 0.0
    else:
        t_p = float(stats.ttest_rel(a, b).pvalue)
    w_p = float(stats.wilcoxon(diff, zero_method="wilcox").pvalue)
    s_p = float(stats.binomtest(wins, wins + losses, 0.5).pvalue)
    return {**out, "t": t_p, "wilcoxon": w_p, "sign": s_p}


def verdict_entry(
    claim: str,
    *,
    verdict: str,
    why: str,
    metric: str,
    ours: float,
    baseline: str,
    baseline_value: float | None,
    seeds: int,
    p_value: float | None,
    converged: bool,
    decisive: bool,
    alpha: float = 0.05,
) -> dict:
    """One entry of a results JSON's ``verdicts`` list, checked against the rules of issue 41.

    ``verdict`` is ``"reproduced"``, ``"contradicted"`` or ``"not decided"``. ``decisive``
    may be true only when the verdict is not ``"not decided"``, ``converged`` is true (our
    models and the baseline trained to a flat validation curve) and the paired test
    resolves the difference (``p_value < alpha``). ``ours`` and ``baseline_value`` are the
    compared figures of ``metric`` (``baseline_value`` may be ``None`` when the claim has
    no baseline); ``seeds`` is the number of paired seeds behind them.

    Raises
    ------
    ValueError
        When a field is missing, of the wrong kind, or ``decisive`` breaks the rule above.
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
    for name, text in (("claim", claim), ("why", why), ("metric", metric), ("baseline", baseline)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"verdict {name} must be a non-empty string, got {text!r}")
    if not _finite(ours):
        raise ValueError(f"verdict 'ours' must be a finite number, got {ours!r}")
    if baseline_value is not None and not _finite(baseline_value):
        raise ValueError(
            f"verdict baseline_value must be a finite number or None, got {baseline_value!r}"
        )
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(
            f"verdict seeds must be a positive int (the number of seeds), got {seeds!r}"
        )
    if p_value is not None and not (_finite(p_value) and 0.0 <= p_value <= 1.0):
        raise ValueError(f"verdict p_value must be in [0, 1] or None, got {p_value!r}")
    for name, flag in (("converged", converged), ("decisive", decisive)):
        if not isinstance(flag, bool):
            raise ValueError(f"verdict {name} must be True or False, got {flag!r}")
    if decisive:
        if verdict == "not decided":
            raise ValueError(f"{claim!r}: a 'not decided' verdict cannot be decisive")
        if not converged:
            raise ValueError(f"{claim!r}: decisive needs converged models; set decisive=False")
        if p_value is None or p_value >= alpha:
            raise ValueError(
                f"{claim!r}: decisive needs the paired test to resolve the difference "
                f"(p_value {p_value!r} is not < {alpha}); set decisive=False"
            )
    return {
        "claim": claim,
        "verdict": verdict,
        "decisive": decisive,
        "metric": metric,
        "ours": float(ours),
        "baseline": baseline,
        "baseline_value": None if baseline_value is None else float(baseline_value),
        "seeds": seeds,
        "p_value": None if p_value is None else float(p_value),
        "converged": converged,
        "why": why,
    }


def decide_verdict(
    claim: str,
    *,
    metric: str,
    ours: Sequence[float],
    baseline: str,
    baseline_values: Sequence[float],
    higher_is_better: bool,
    converged: bool,
    expect: str = "better",
    test: str = "t",
    alpha: float = 0.05,
    note: str = "",
) -> dict:
    """The verdict on a claim "ours is ``expect`` than the baseline", by a fixed rule.

    ``ours`` and ``baseline_values`` are per-seed values of ``metric`` (same seeds, same
    order). The rule: run :func:`paired_test`; if its ``test`` p-value (``"t"``,
    ``"wilcoxon"`` or ``"sign"``) is at least ``alpha`` the claim is ``"not decided"``;
    otherwise it is ``"reproduced"`` when ours is on the side the claim expects
    (``expect="better"`` or ``"worse"``, judged by the mean difference and
    ``higher_is_better``) and ``"contradicted"`` when not. The verdict is decisive when the
    test resolves it and ``converged`` is true. Returns :func:`verdict_entry`'s dict, with a
    ``why`` that states the means, the seed count, the wins and the p-value (plus ``note``).
    """
    if expect not in ("better", "worse"):
        raise ValueError(f"expect must be 'better' or 'worse', got {expect!r}")
    if test not in _TESTS:
        raise ValueError(f"test must be one of {_TESTS}, got {test!r}")
    res = paired_test(ours, baseline_values)
    p = res[test]
    ours_mean = sum(ours) / len(ours)
    base_mean = sum(baseline_values) / len(baseline_values)
    better = res["mean_diff"] > 0 if higher_is_better else res["mean_diff"] < 0
    in_favour = res["wins"] if higher_is_better else res["losses"]
    if p >= alpha:
        verdict = "not decided"
    elif better == (expect == "better"):
        verdict = "reproduced"
    else:
        verdict = "contradicted"
    name = {"t": "t-test", "wilcoxon": "Wilcoxon test", "sign": "sign test"}[test]
    why = (
        f"{metric} {ours_mean:.4g} vs {base_mean:.4g} ({'higher' if higher_is_better else 'lower'}"
        f" is better); ours better in {in_favour} of {res['n']} paired seeds; paired {name} "
        f"p = {p:.2g} ({'<' if p < alpha else '>='} {alpha}); "
        f"{'converged' if converged else 'not trained to convergence'}"
    )
    if note:
        why = f"{why}; {note}"
    return verdict_entry(
        claim,
        verdict=verdict,
        why=why,
        metric=metric,
        ours=ours_mean,
        baseline=baseline,
        baseline_value=base_mean,
        seeds=res["n"],
        p_value=p,
        converged=converged,
        decisive=converged and p < alpha,
        alpha=alpha,
    )


def interval_verdict(
    claim: str,
    *,
    metric: str,
    ours: float,
    low: float,
    high: float,
    baseline: str,
    baseline_value: float,
    higher_is_better: bool,
    seeds: int,
    converged: bool,
    level: str = "95 %",
    note: str = "",
) -> dict:
    """The verdict on "ours is better than ``baseline_value``" from an interval, by a fixed rule.

    For a run that stores an interval of ``ours`` (``low`` to ``high``, e.g. a bootstrap
    interval) instead of per-seed values: ``"reproduced"`` when the whole interval lies on the
    better side of ``baseline_value`` (``higher_is_better`` says which), ``"contradicted"``
    when it lies wholly on the worse side, ``"not decided"`` when it contains the baseline.
    No paired test stands behind it (``p_value`` is ``None``), so it is never decisive.
    Returns :func:`verdict_entry`'s dict; ``why`` states the figures (plus ``note``).
    """
    if not (low <= ours <= high):
        raise ValueError(f"interval [{low}, {high}] does not contain ours = {ours}")
    above, below = low > baseline_value, high < baseline_value
    better, worse = (above, below) if higher_is_better else (below, above)
    verdict = "reproduced" if better else "contradicted" if worse else "not decided"
    where = "lies above" if above else "lies below" if below else "contains"
    why = (
        f"{metric} {ours:.4g}, {level} interval {low:.4g}-{high:.4g} "
        f"{where} the {baseline} value {baseline_value:.4g}"
        f" ({'higher' if higher_is_better else 'lower'} is better); "
        f"{'converged' if converged else 'not trained to convergence'}"
    )
    if note:
        why = f"{why}; {note}"
    return verdict_entry(
        claim,
        verdict=verdict,
        why=why,
        metric=metric,
        ours=ours,
        baseline=baseline,
        baseline_value=baseline_value,
        seeds=seeds,
        p_value=None,
        converged=converged,
        decisive=False,
    )


def summary_verdict(
    claim: str,
    *,
    metric: str,
    ours: tuple[float, float, int],
    baseline: str,
    baseline_stats: tuple[float, float, int],
    higher_is_better: bool,
    converged: bool,
    ddof: int,
    expect: str = "better",
    alpha: float = 0.05,
    note: str = "",
) -> dict:
    """The verdict on "ours is ``expect`` than the baseline" from stored means and deviations.

    For runs that stored ``(mean, sd, n)`` over seeds but not the per-seed values:
    Welch's two-sample t-test from these summaries (``scipy.stats.ttest_ind_from_stats``;
    ``ddof`` says how the stored sd was computed, 0 for ``numpy.std``, 1 for
    ``statistics.stdev``; a baseline with sd 0, e.g. a deterministic one, makes it a
    one-sample test). Unpaired, so it ignores what seed ``i`` of both sides shares: it
    resolves less than a paired test would, not more. The rule is :func:`decide_verdict`'s:
    "not decided" at ``p >= alpha``, else reproduced or contradicted by the side of the
    mean difference; decisive only when converged and resolved.
    """
    from scipy import stats

    if expect not in ("better", "worse"):
        raise ValueError(f"expect must be 'better' or 'worse', got {expect!r}")
    (m1, s1, n1), (m2, s2, n2) = ours, baseline_stats
    if min(n1, n2) < 2 or (s1 == 0 and s2 == 0):
        raise ValueError("summary_verdict needs n >= 2 per side and a non-zero deviation")

    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (numpy.std) or 1 (statistics.stdev), got {ddof!r}")

    def sample_sd(sd, n):  # the sample standard deviation (ddof 1) the test needs
        return sd * math.sqrt(n / (n - 1)) if ddof == 0 else sd

    p = float(
        stats.ttest_ind_from_stats(
            m1, sample_sd(s1, n1), n1, m2, sample_sd(s2, n2), n2, equal_var=False
        ).pvalue
    )
    better = m1 > m2 if higher_is_better else m1 < m2
    if p >= alpha:
        verdict = "not decided"
    elif better == (expect == "better"):
        verdict = "reproduced"
    else:
        verdict = "contradicted"
    why = (
        f"{metric} {m1:.4g} (sd {s1:.2g}, n {n1}) vs {m2:.4g} (sd {s2:.2g}, n {n2}) "
        f"({'higher' if higher_is_better else 'lower'} is better); Welch t-test from the "
        f"stored means and deviations p = {p:.2g} ({'<' if p < alpha else '>='} {alpha}); "
        f"{'converged' if converged else 'not trained to convergence'}"
    )
    return verdict_entry(
        claim,
        verdict=verdict,
        why=f"{why}; {note}" if note else why,
        metric=metric,
        ours=m1,
        baseline=baseline,
        baseline_value=m2,
        seeds=min(n1, n2),
        p_value=p,
        converged=converged,
        decisive=converged and p < alpha,
        alpha=alpha,
    )


def difference_verdict(
    claim: str,
    *,
    metric: str,
    ours: float,
    baseline: str,
    baseline_value: float,
    difference: tuple[float, float, int],
    higher_is_better: bool,
    converged: bool,
    ddof: int,
    alpha: float = 0.05,
    note: str = "",
) -> dict:
    """The verdict on "ours is better than the baseline" from the stored paired differences.

    For runs that stored, per claim, the mean and standard deviation over seeds of the
    per-seed difference ``ours - baseline`` (``difference = (mean, sd, n)``, the sd computed
    with ``ddof``): the paired t-test is the one-sample t-test of that mean against zero,
    which these summaries determine exactly. The rule is :func:`decide_verdict`'s.
    """
    from scipy import stats

    mean, sd, n = difference
    if n < 2 or ddof not in (0, 1):
        raise ValueError("difference_verdict needs n >= 2 and ddof 0 or 1")
    sd1 = sd * math.sqrt(n / (n - 1)) if ddof == 0 else sd
    if sd1 == 0:
        p = 1.0 if mean == 0 else 0.0
    else:
        t = mean / (sd1 / math.sqrt(n))
        p = float(2 * stats.t.sf(abs(t), n - 1))
    better = mean > 0 if higher_is_better else mean < 0
    verdict = "not decided" if p >= alpha else "reproduced" if better else "contradicted"
    why = (
        f"{metric} {ours:.4g} vs {baseline_value:.4g} "
        f"({'higher' if higher_is_better else 'lower'} is better); per-seed difference "
        f"{mean:.3g} (sd {sd:.2g}, n {n}); paired t-test from the stored differences p = "
        f"{p:.2g} ({'<' if p < alpha else '>='} {alpha}); "
        f"{'converged' if converged else 'not trained to convergence'}"
    )
    return verdict_entry(
        claim,
        verdict=verdict,
        why=f"{why}; {note}" if note else why,
        metric=metric,
        ours=ours,
        baseline=baseline,
        baseline_value=baseline_value,
        seeds=n,
        p_value=p,
        converged=converged,
        decisive=converged and p < alpha,
        alpha=alpha,
    )


def seed_verdict(
    claim: str,
    doc: dict,
    *,
    metric: str,
    ours: str,
    baseline: str,
    higher_is_better: bool,
    converged: bool,
    seeds: Sequence | None = None,
    expect: str = "better",
    note: str = "",
    sd_metric: str | None = None,
    ddof: int = 1,
) -> dict:
    """:func:`decide_verdict` on the per-seed rows of results JSON ``doc``, or a fallback.

    The per-seed values of case ``ours`` are its rows of metric ``"{metric} seed {s}"`` for
    every seed ``s`` of ``seeds`` (default: the JSON's ``machine.seeds``; the seed goes into
    the metric, so that a page's ``CASE | METRIC`` selectors of the means never match a
    seed's row); likewise for ``baseline``. When every one of them is stored, the
    verdict is :func:`decide_verdict`'s (paired t-test). When not (a run that stored only
    the means over seeds), and ``sd_metric`` names the rows of the standard deviation over
    the seeds (computed with ``ddof``), it is :func:`summary_verdict`'s (Welch t-test from
    the mean rows, cases ``ours`` and ``baseline``, and their sd rows). Without these, the
    verdict is "not decided", ``why`` says that a rerun is needed, and ``ours`` /
    ``baseline_value`` are the mean rows.
    """
    seeds = list(doc["machine"]["seeds"] if seeds is None else seeds)

    def values(case):
        out = []
        for s in seeds:
            found = [r for r in doc["rows"] if r["case"] == case]
            found = [r["value"] for r in found if r["metric"] == f"{metric} seed {s}"]
            if len(found) != 1:
                return None
            out.append(found[0])
        return out

    a, b = values(ours), values(baseline)
    if a is not None and b is not None and len(a) >= 2:
        return decide_verdict(
            claim,
            metric=metric,
            ours=a,
            baseline=baseline,
            baseline_values=b,
            higher_is_better=higher_is_better,
            converged=converged,
            expect=expect,
            note=note,
        )
    mean_a, mean_b = row_value(doc, ours, metric), row_value(doc, baseline, metric)
    n = len(seeds)
    sds = (0.0, 0.0)
    if sd_metric is not None:
        sds = (row_value(doc, ours, sd_metric), row_value(doc, baseline, sd_metric))
    if n >= 2 and any(sds):
        sd_a, sd_b = sds
        return summary_verdict(
            claim,
            metric=metric,
            ours=(mean_a, sd_a, n),
            baseline=baseline,
            baseline_stats=(mean_b, sd_b, n),
            higher_is_better=higher_is_better,
            converged=converged,
            ddof=ddof,
            expect=expect,
            note=note,
        )
    lack = (
        "one seed, so the difference cannot be tested"
        if n < 2
        else "rerun needed: this JSON stores no per-seed rows, so the difference cannot be tested"
    )
    why = (
        f"{metric} {mean_a:.4g} vs {mean_b:.4g} (means of {n} seeds; "
        f"{'higher' if higher_is_better else 'lower'} is better); {lack}"
    )
    return verdict_entry(
        claim,
        verdict="not decided",
        why=f"{why}; {note}" if note else why,
        metric=metric,
        ours=mean_a,
        baseline=baseline,
        baseline_value=mean_b,
        seeds=len(seeds),
        p_value=None,
        converged=converged,
        decisive=False,
    )


def row_value(doc: dict, case: str, metric: str, field: str = "value"):
    """``field`` of the one row of results JSON ``doc`` with ``case`` and ``metric``.

    Raises
    ------
    ValueError
        When no row or more than one row has that case and metric.
    """
    found = [r for r in doc["rows"] if r["case"] == case and r["metric"] == metric]
    if len(found) != 1:
        raise ValueError(f"{len(found)} rows with case {case!r} and metric {metric!r}, not one")
    return found[0][field]


def rederive_verdicts(path: str | Path, rule: Callable[[dict], Sequence[dict]]) -> int:
    """``--verdicts-only PATH``: rewrite a results JSON's ``verdicts`` from its own rows.

    ``rule(doc)`` is the script's verdict rule applied to the parsed JSON; it returns the
    entries (made by :func:`verdict_entry`, :func:`decide_verdict` or
    :func:`interval_verdict`). Nothing is retrained and nothing but ``verdicts`` changes: the
    rows and the machine record are written back as they were. Prints each verdict; returns 0.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    doc["verdicts"] = [verdict_entry(**v) for v in rule(doc)]
    second = text.split("\n", 2)[1] if text.startswith("{\n") else ""
    indent = len(second) - len(second.lstrip(" ")) or 2  # keep the file's own indent
    write_json_doc(path, doc, indent=indent)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  {v['claim']}")
    print(f"wrote the verdicts of {path}")
    return 0


def verdicts_only(args: argparse.Namespace) -> int | None:
    """Answer ``--verdicts-only JSON`` of a :func:`base_parser` given the verdict rule.

    Rewrites the file's verdicts by that rule (:func:`rederive_verdicts`) and returns its
    exit code 0; returns None when the flag was not given, and the script goes on.
    """
    path = getattr(args, "verdicts_only", None)
    if path is None:
        return None
    return rederive_verdicts(path, args.verdict_rule)


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


@dataclass
class QuotedRow:
    """A figure not measured in this run (a paper's, an issue's, another machine's).

    It has no ``vs`` and no ``ratio`` (only a baseline measured in the same run gets a
    ratio) and no row may name it as its ``vs``; ``quoted`` is made by :func:`quote`.
    """

    case: str
    metric: str
    value: float
    unit: str
    quoted: dict

    def __post_init__(self) -> None:
        quote(**self.quoted)  # validates


def quote(source: str, machine: str) -> dict:
    """The ``quoted`` record of a figure not measured in this run.

    Parameters
    ----------
    source : str
        Where the figure comes from (a paper's table, an issue, another run's JSON).
    machine : str
        The machine it was measured on, as far as the source says.

    Raises
    ------
    ValueError
        When either is empty.
    """
    if not (isinstance(source, str) and source.strip()):
        raise ValueError("a quoted figure needs its source")
    if not (isinstance(machine, str) and machine.strip()):
        raise ValueError("a quoted figure needs the machine it was measured on")
    return {"source": source, "machine": machine}


def row_dict(row: Row | QuotedRow) -> dict:
    """``row`` as written to the JSON (a quoted row has no ``vs`` / ``ratio`` keys)."""
    return asdict(row)


def row_from_dict(d: dict) -> Row | QuotedRow:
    """The row of a stored JSON's ``rows`` entry: :class:`QuotedRow` when it has ``quoted``.

    Raises
    ------
    TypeError
        For a quoted entry with ``vs`` or ``ratio`` keys (or any other unknown key).
    """
    return QuotedRow(**d) if "quoted" in d else Row(**d)


def rederive_rows(path: str | Path, rule: Callable[[dict], Sequence[Row | QuotedRow]]) -> int:
    """Rewrite a results JSON's ``rows`` by a script's ``rule(doc)`` (e.g. ``--quoted-only``).

    For a change of a stored run's *form* that needs no rerun, such as marking figures
    from elsewhere as quoted: ``rule`` gets the parsed JSON and returns the new rows
    (:class:`Row` / :class:`QuotedRow`, so they are validated; :func:`row_from_dict` reads
    a stored entry); the rest of the document is written back as ``rule`` leaves it (it
    may correct a ``machine`` entry that describes those rows), in the file's own indent.
    Prints what changed; returns 0.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    old = [json.dumps(r, sort_keys=True) for r in doc["rows"]]
    doc["rows"] = [row_dict(r) for r in rule(doc)]
    new = [json.dumps(r, sort_keys=True) for r in doc["rows"]]
    second = text.split("\n", 2)[1] if text.startswith("{\n") else ""
    indent = len(second) - len(second.lstrip(" ")) or 2  # keep the file's own indent
    write_json_doc(path, doc, indent=indent)
    print(
        f"{path}: {len(set(old) - set(new))} rows replaced or dropped, "
        f"{len(set(new) - set(old))} written anew, {len(new)} rows"
    )
    return 0


def write_json(
    path: str | Path,
    benchmark: str,
    machine: dict,
    rows: Sequence[Row | QuotedRow],
    verdicts: Sequence[dict] | None = None,
) -> None:
    """Write the ``DESIGN.md`` benchmark JSON to ``path`` (parent folders created).

    ``verdicts`` (entries made by :func:`verdict_entry` or :func:`decide_verdict`) becomes
    the top-level ``verdicts`` list; each is checked again before anything is written.
    """
    doc = {"benchmark": benchmark, "machine": machine, "rows": [row_dict(r) for r in rows]}
    if verdicts is not None:
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts]
    write_json_doc(path, doc)


def finish(
    args: argparse.Namespace,
    benchmark: str,
    machine: dict,
    rows: Sequence[Row | QuotedRow],
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


# ------------------------------------------------------------------ training until flat

# A model that must train until flat trains in *cycles*: each a fresh warm-up + cosine
# schedule of a fixed number of steps from the previous cycle's weights, its batches drawn
# with the seed ``seed + CYCLE_SEED * c`` in cycle ``c`` (cycle 0 is the plain run), until
# the validation curve of all cycles on one step axis is flat by the script's rule or a cap
# of cycles is spent (:func:`until_flat`). A run that resumes cycle by cycle (one unit per
# cycle) drives :func:`concat` itself.

CYCLE_SEED = 100  # cycle c draws its batches with seed + CYCLE_SEED * c


def concat(curves: Sequence[Sequence[Sequence[float]]], cycle_steps: int | None = None) -> list:
    """The validation curves of consecutive training cycles on one step axis.

    Parameters
    ----------
    curves : sequence of curves
        Cycle ``c``'s curve at index ``c``: ``[[step, value], ...]``, the steps counted from
        that cycle's start (its evaluation before its first step at step 0).
    cycle_steps : int, optional
        Steps of every cycle: cycle ``c``'s steps are shifted by ``c * cycle_steps``. None
        (default): by the sum of the earlier cycles' last steps (each cycle ends at its last
        evaluation).

    Returns
    -------
    list of [step, value]
        The joined curve. A later cycle's evaluation at its step 0 repeats the previous
        cycle's end and is left out; steps and values are kept as given (ints stay ints).
    """
    out: list = []
    offset = 0
    for c, curve in enumerate(curves):
        if cycle_steps is not None:
            offset = c * cycle_steps
        out += [[offset + s, v] for s, v in curve if not (c and s == 0)]
        if cycle_steps is None:
            offset += curve[-1][0]
    return out


def until_flat(
    cycle: Callable[[int, int], Sequence[Sequence[float]]],
    judge: Callable[[list], bool],
    max_cycles: int,
    seed: int = 0,
    cycle_steps: int | None = None,
) -> tuple[list, int, bool]:
    """Train in cycles until the joined validation curve is flat or ``max_cycles`` ran.

    Calls ``cycle(c, seed + CYCLE_SEED * c)`` for ``c = 0, 1, ...`` in order; after each
    cycle ``judge`` sees the curves so far joined by :func:`concat`, and a flat one ends the
    run.

    Parameters
    ----------
    cycle : callable
        ``cycle(c, cycle_seed)`` trains cycle ``c`` (from the previous cycle's weights when
        ``c > 0``) with batch seed ``cycle_seed`` and returns its validation curve
        ``[[step, value], ...]`` (steps from the cycle's own start).
    judge : callable
        ``judge(curve)``: whether a joined curve ``[[step, value], ...]`` is flat.
    max_cycles : int
        The most cycles to run (>= 1).
    seed : int
        The seed of cycle 0.
    cycle_steps : int, optional
        Steps per cycle, passed to :func:`concat` (None: each cycle ends at its last
        evaluation).

    Returns
    -------
    curve : list of [step, value]
        The joined validation curve of the cycles run.
    cycles : int
        How many cycles ran (1 to ``max_cycles``).
    converged : bool
        ``judge(curve)``: False when the cap was reached with the curve not flat.

    Raises
    ------
    ValueError
        When ``max_cycles`` is below 1.
    """
    if max_cycles < 1:
        raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
    curves: list = []
    while len(curves) < max_cycles:
        c = len(curves)
        curves.append(cycle(c, seed + CYCLE_SEED * c))
        if judge(concat(curves, cycle_steps)):
            break
    curve = concat(curves, cycle_steps)
    return curve, len(curves), judge(curve)


# ------------------------------------------------------------------ runs in pieces
#
# A run longer than one sitting is written in pieces: ``--max-hours H`` starts no new unit
# (a seed, a fit) after H hours and ``--resume`` continues the run stored at ``--json``
# (:func:`piece_arguments`, :func:`piece_deadline`). The convention for a script: the
# results JSON itself holds every finished unit, under ``runs`` keyed by seed (a string),
# and ``complete``; it is rewritten after every unit, so a killed piece loses one unit at
# most, and ``--resume`` keeps the units in it and runs the rest (:func:`previous_run`;
# graph_merging, mvcge, cogamid/long.py). FAME and MoRE-Brain, older, keep their units in
# ``PATH.state.json`` beside the JSON instead (:func:`state_path`, :func:`resume_state`):
# their stored results and pages are built from those files, so they stay as they are.


def piece_arguments(p: argparse.ArgumentParser, unit: str = "seed") -> None:
    """Add ``--max-hours H`` and ``--resume`` of a run written in pieces (see above)."""
    p.add_argument(
        "--max-hours",
        type=float,
        default=None,
        metavar="H",
        help=f"start no new {unit} after H hours (continue with --resume)",
    )
    p.add_argument("--resume", action="store_true", help="continue the stored run of --json")


def piece_deadline(args: argparse.Namespace) -> float:
    """The ``time.perf_counter()`` after which this piece starts no new unit: ``--max-hours``
    from now, or infinity without it."""
    if args.max_hours is None:
        return math.inf
    return time.perf_counter() + 3600 * args.max_hours


def previous_run(args: argparse.Namespace) -> dict | None:
    """The stored results JSON that ``--resume`` continues; None without ``--resume``,
    without ``--json`` or while that file does not exist yet (the run then starts afresh)."""
    if not args.resume or args.json is None or not Path(args.json).is_file():
        return None
    return json.loads(Path(args.json).read_text())


def state_path(path: str | Path) -> Path:
    """The state file of a run written in pieces: ``PATH.state.json`` beside its JSON."""
    return Path(path).with_suffix(".state.json")


def resume_state(args: argparse.Namespace) -> dict:
    """The state of the earlier pieces for ``--resume`` (an empty dict without it).

    Exits with a message when ``--resume`` has no ``--json`` or no state file beside it.
    """
    if not args.resume:
        return {}
    if args.json is None or not state_path(args.json).is_file():
        raise SystemExit("--resume needs --json PATH with a PATH.state.json from an earlier piece")
    return json.loads(state_path(args.json).read_text())


_UNSET = object()


def _shown(value: object) -> str:
    return "unset" if value is _UNSET else repr(value)


def _differences(stored: dict, now: dict, defaults: dict, prefix: str = "") -> list[str]:
    """``"key: stored -> now"`` for every differing key of two settings dicts; nested dicts
    are compared key by key (``"outer.inner"``); a key missing on one side is its
    ``defaults`` value when there is one (top level only), else ``unset``."""
    out = []
    for k in sorted(set(stored) | set(now), key=str):
        a, b = stored.get(k, _UNSET), now.get(k, _UNSET)
        if k in defaults:
            a = defaults[k] if a is _UNSET else a
            b = defaults[k] if b is _UNSET else b
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, {}, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {_shown(a)} -> {_shown(b)}")
    return out


def check_resume_settings(
    stored: dict | None,
    now: dict,
    path: str | Path,
    *,
    what: str = "settings",
    defaults: dict | None = None,
    before: str | None = None,
    fix: str | None = None,
    flag: str | None = "--resume",
) -> None:
    """Refuse to continue a stored run (``--resume``) whose settings are not this command's.

    Both sides are compared as JSON stores them (``now`` and ``defaults`` go through a
    JSON round trip, so tuples equal lists).

    Parameters
    ----------
    stored : dict or None
        The settings the stored state or JSON recorded; ``None`` for an old state written
        before it recorded them (refused: its runs cannot be matched to this command).
    now : dict
        This command's settings.
    path : str or Path
        The stored file, named in the message.
    what : str
        What the dicts are, for the message: ``"settings"``, ``"plan"``, ...
    defaults : dict or None
        Values of keys added since older states: a key missing on one side counts as its
        value here (so an old state matches a command that keeps the default). A missing
        key without a default is a difference.
    before : str or None
        What wrote a state without the record (``stored`` None), e.g. ``"a fixed-step
        run"``; a generic note without it.
    fix : str or None
        What to do instead, ending the message (default: resume with the same settings or
        write to another ``--json``).
    flag : str or None
        The option the message starts with (``None``: no prefix, for checks of stored files
        outside ``--resume``).

    Raises
    ------
    ValueError
        ``stored`` differs from ``now``: the message names every differing key with its
        stored and current value (``"--resume: PATH was written with other settings
        (seeds: 5 -> 10; lr: 0.001 -> 0.01); resume with the same settings or write to
        another --json"``), or says that ``stored`` is None and what wrote such a state.
    """
    head = f"{flag}: {path}" if flag else str(path)
    if stored is None:
        note = before or "an old state, written before they were recorded"
        raise ValueError(
            f"{head} was written without its {what} record (none stored: {note}); "
            + (fix or "write to another --json")
        )
    stored, now = json.loads(json.dumps(stored)), json.loads(json.dumps(now))
    if stored == now:
        return
    if isinstance(stored, dict) and isinstance(now, dict):
        diff = _differences(stored, now, json.loads(json.dumps(defaults or {})))
    else:
        diff = [f"{stored!r} -> {now!r}"]
    if not diff:  # equal once the defaults fill the keys new since the stored state
        return
    other = "other" if what.endswith("s") else "another"
    raise ValueError(
        f"{head} was written with {other} {what} ({'; '.join(diff)}); "
        + (fix or "resume with the same settings or write to another --json")
    )


def refuse(msg: str) -> NoReturn:
    """Stop on bad command-line input: ``msg`` on stderr and exit status 2.

    Status 2 is argparse's for a usage error (``ArgumentParser.error``); this is for
    input refused after parsing, such as a ``--resume`` of a stored run of other settings
    (:func:`check_resume_settings`)::

        try:
            check_resume_settings(stored, now, path)
        except ValueError as err:
            refuse(str(err))

    Parameters
    ----------
    msg : str
        What is wrong and what to do instead, printed as it is (one line, no prefix).

    Raises
    ------
    SystemExit
        Always, with code 2.
    """
    print(msg, file=sys.stderr, flush=True)
    raise SystemExit(2)


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


def print_rows(rows: Sequence[Row | QuotedRow], title: str = "") -> None:
    """Print benchmark rows as a case / metric / value / unit / ratio table (a quoted
    row's ratio column says ``quoted``)."""
    print_table(
        ["case", "metric", "value", "unit", "ratio"],
        [
            [r.case, r.metric, r.value, r.unit, "quoted" if isinstance(r, QuotedRow) else r.ratio]
            for r in rows
        ],
        title=title,
    )
