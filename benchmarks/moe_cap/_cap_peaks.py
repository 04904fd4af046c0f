"""Peak probes for ``run.py``: the bandwidth and FLOP rates of this machine, measured in rounds.

Bandwidth is the best of a STREAM-like triad, a copy, a read-only sum and a matrix-vector
product over fp32 arrays far larger than the last-level cache (bytes/s); FLOPs per dtype
the best of NT GEMMs (FLOP/s). :func:`hardware_from_rounds` keeps the best of every round as
the :class:`~sci_moe.moe.cap.Hardware` the metrics divide by. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch

from sci_moe.moe.cap import Hardware

__all__ = [
    "bf16_native",
    "hardware_from_rounds",
    "measure_peaks",
]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_seconds(fn: Callable[[], object], reps: int, device: torch.device) -> float:
    """Fastest of ``reps`` timed calls of ``fn`` after one warm-up call, s."""
    fn()
    _sync(device)
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def _bandwidth_probes(device: torch.device, n: int, reps: int) -> dict[str, float]:
    """Triad, copy, read-only sum and matrix-vector product on fp32 arrays of ``n`` elements."""
    b = torch.rand(n, device=device)
    c = torch.rand(n, device=device)
    a = torch.empty_like(b)
    nb = b.element_size()
    rows = n // 4096
    w = b[: rows * 4096].view(rows, 4096)
    x = torch.rand(4096, device=device)
    triad = _best_seconds(lambda: torch.add(b, c, alpha=3.0, out=a), reps, device)
    return {
        "triad": 3 * n * nb / triad,
        "copy": 2 * n * nb / _best_seconds(lambda: a.copy_(b), reps, device),
        "read": n * nb / _best_seconds(lambda: b.sum(), reps, device),
        "gemv": w.numel() * nb / _best_seconds(lambda: torch.mv(w, x), reps, device),
    }


def measure_peaks(
    device: torch.device,
    triad_n: int,
    gemm_n: dict[str, Sequence[int]],
    reps: int = 3,
) -> dict[str, float]:
    """One round of peak probes on ``device`` with torch's current thread count.

    Parameters
    ----------
    device : torch.device
    triad_n : int
        Elements of each fp32 array of the bandwidth probes (choose far above the
        last-level cache: ``32 << 20`` is 128 MiB per array).
    gemm_n : dict of str to sequence of int or (int, int, int)
        Shapes of the NT GEMM probe ``a @ b.T`` per dtype: ``n`` for square ``(n, n)``
        operands (``2 n^3`` FLOPs) or ``(m, k, n)`` for ``a`` of ``(m, k)`` and ``b`` of
        ``(n, k)`` (``2 m k n`` FLOPs, e.g. a batch of tokens through an expert).
    reps : int
        Timed repeats per probe (the fastest counts).

    Returns
    -------
    dict
        ``triad``, ``copy``, ``read``, ``gemv`` (bytes/s; triad counts ``3 n`` elements,
        copy ``2 n``, the read-only sum ``n``, the matrix-vector product its matrix),
        ``bandwidth`` (their maximum) and ``flops_<dtype>`` (FLOP/s, best over the sizes).
    """
    with torch.no_grad():
        out = _bandwidth_probes(device, triad_n, reps)
        out["bandwidth"] = max(out["triad"], out["copy"], out["read"], out["gemv"])
        for dtype, sizes in gemm_n.items():
            best = 0.0
            for size in sizes:
                m, k, n = (size, size, size) if isinstance(size, int) else size
                m1 = torch.randn(m, k, device=device).to(getattr(torch, dtype))
                m2 = torch.randn(n, k, device=device).to(getattr(torch, dtype))
                sec = _best_seconds(lambda m1=m1, m2=m2: torch.mm(m1, m2.t()), reps, device)
                best = max(best, 2.0 * m * k * n / sec)
            out[f"flops_{dtype}"] = best
    return out


def hardware_from_rounds(rounds: Sequence[dict], name: str) -> Hardware:
    """The best rate of every probe over all rounds, as a :class:`Hardware`."""
    flops = {
        k.removeprefix("flops_"): max(r[k] for r in rounds)
        for k in rounds[0]
        if k.startswith("flops_")
    }
    bandwidth = max(r["bandwidth"] for r in rounds)
    note = f"measured in this run: best of {len(rounds)} probe rounds"
    return Hardware(name, flops, bandwidth, 0.0, note)


def bf16_native(device: torch.device) -> bool:
    """Whether ``device`` has bfloat16 arithmetic (CUDA; a CPU with AVX512-BF16 or AMX)."""
    if device.type == "cuda":
        return True
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))
