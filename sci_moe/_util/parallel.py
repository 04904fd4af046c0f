"""A failure-tolerant process pool: every job gives a result, finished work is never lost."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["parallel_map"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _one_thread() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"


def _die_with(parent_pid: int, poll_s: float = 0.5) -> None:
    """Make this worker process exit when ``parent_pid`` (the caller of parallel_map) dies.

    Two mechanisms, as a ``kill -9`` of the caller runs no clean-up: on Linux the kernel
    sends SIGKILL when the worker's own parent dies (``prctl(PR_SET_PDEATHSIG)``; the
    forkserver exits when the caller does); everywhere, a daemon thread polls the caller's
    pid and ends the process (``os._exit``) once it is gone.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no usable libc
            pass

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # pragma: no cover - the pid was reused by another user
                os._exit(1)

    threading.Thread(target=watch, name="sci-moe-parent-watchdog", daemon=True).start()
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:  # the parent died before the death signal was armed
        os._exit(1)


def _worker_init(parent_pid: int, initializer) -> None:
    _die_with(parent_pid)
    (initializer or _one_thread)()


def _context(method: str, fn):
    ctx = mp.get_context(method)
    if method == "forkserver":
        # import the worker's module once in the server, not in every worker
        ctx.set_forkserver_preload([fn.__module__])
    return ctx


def parallel_map(
    fn,
    jobs: Sequence[tuple],
    n_jobs: int = 1,
    progress: bool = False,
    desc: str = "",
    on_result=None,
    mp_context: str = "forkserver",
    initializer: Callable[[], None] | None = None,
    unit: str = "job",
) -> list:
    """``[fn(*job) for job in jobs]`` over ``n_jobs`` one-thread worker processes.

    ``fn`` must be a picklable top-level function that returns a dict and reports bad
    input as ``{"failed": True, "reason": ...}`` rather than raising; an exception or a
    dead worker is turned into such a dict, so finished results are never lost.
    ``on_result(index, result)`` is called in this process as each job finishes (in
    completion order), e.g. to cache it. Workers start with ``OMP_NUM_THREADS=1`` and then
    run ``initializer`` (a picklable top-level function, e.g. one that silences a
    library's logger). Workers die with this process, also when it is killed with
    ``kill -9`` (Linux ``PR_SET_PDEATHSIG`` plus a watchdog thread on this process's pid):
    no orphaned pool keeps computing.

    The default start method ``"forkserver"`` imports ``fn``'s module once in a clean
    server process and forks every worker from it: cheap start-up, and no OpenMP thread
    pool inherited from this process (``tblite`` and torch share ``libgomp``, which is not
    fork-safe once its threads exist). ``"spawn"`` is the slow, equally safe option.
    As with any spawn/forkserver pool, a *script* that calls this with ``n_jobs > 1``
    must keep its top-level work under ``if __name__ == "__main__":`` (workers import the
    main script); otherwise the workers fail and every job is reported as failed.

    Parameters
    ----------
    fn : callable
        ``fn(*job) -> dict``.
    jobs : sequence of tuple
        Arguments of each call.
    n_jobs : int
        Worker processes (1: run here, in order).
    progress : bool
        Show a tqdm bar (``desc``, ``unit``).
    on_result : callable, optional
        ``on_result(index, result)`` as each job finishes.
    mp_context : {"forkserver", "spawn", "fork"}
        Start method of the workers.
    initializer : callable, optional
        Run once in each worker process (never in this process: with ``n_jobs == 1`` the
        jobs run here and it is not called, so it cannot change this process's state).

    Returns
    -------
    list of dict
        One result per job, in the order of ``jobs``.
    """
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}")
    jobs = [tuple(j) for j in jobs]
    results: list = [None] * len(jobs)
    bar = None
    if progress:
        from .progress import progress_bar

        bar = progress_bar(total=len(jobs), desc=desc or getattr(fn, "__name__", ""), unit=unit)

    def done(i, res):
        results[i] = res
        if on_result is not None:
            on_result(i, res)
        if bar is not None:
            bar.update(1)

    try:
        if n_jobs == 1 or len(jobs) <= 1:
            for i, j in enumerate(jobs):
                try:
                    res = fn(*j)
                except Exception as err:
                    res = {"failed": True, "reason": f"{type(err).__name__}: {err}"}
                done(i, res)
        else:
            ctx = _context(mp_context, fn)
            old = os.environ.get("OMP_NUM_THREADS")
            # inherited by the forkserver / workers, which start lazily on submit
            os.environ["OMP_NUM_THREADS"] = "1"
            try:
                with cf.ProcessPoolExecutor(
                    max_workers=min(n_jobs, len(jobs)),
                    mp_context=ctx,
                    initializer=functools.partial(_worker_init, os.getpid(), initializer),
                ) as pool:
                    futs = {pool.submit(fn, *j): i for i, j in enumerate(jobs)}
                    for fut in cf.as_completed(futs):
                        try:
                            res = fut.result()
                        except Exception as err:  # a worker died (BrokenProcessPool) or raised
                            res = {
                                "failed": True,
                                "reason": f"worker: {type(err).__name__}: {err}",
                            }
                        done(futs[fut], res)
            finally:
                if old is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = old
    finally:
        if bar is not None:
            bar.close()
    return results
