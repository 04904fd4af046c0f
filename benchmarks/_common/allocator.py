"""The glibc allocator policy under PyTorch's CPU tensors (``--malloc``).

glibc maps large blocks afresh (page faults on every step) and moves that threshold with
the history of frees, so one contestant's timing depends on what ran before it in the same
process. :func:`set_malloc_policy` can switch to a caching policy, under which freed memory
is reused and steady-state steps pay no page faults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

__all__ = ["set_malloc_policy"]


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
