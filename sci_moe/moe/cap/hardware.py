"""Hardware peaks for the MoE-CAP metrics: GPU datasheet values and a measured CPU.

The GPU peaks are the vendors' **dense** tensor-core figures. NVIDIA datasheets print
the 2:4-structured-sparsity figure first (H100 SXM bf16: 1,979 TFLOP/s "with sparsity"),
which is twice the dense peak; the MoE-CAP code stores those sparsity figures and
divides by 2 in its S-MFU. Here the table holds the dense values directly, so no factor
appears in the formulas.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..._util import read_json_file
from .dtypes import canonical_dtype

__all__ = ["Hardware", "available_hardware", "get_hardware", "measure_cpu"]


@dataclass(frozen=True)
class Hardware:
    """Peak compute and memory bandwidth of one device.

    Parameters
    ----------
    name : str
    peak_flops : dict of str to float
        Dense peak in FLOP/s per number format (keys as :func:`canonical_dtype`:
        ``"bfloat16"``, ``"float16"``, ``"float32"``, ``"tfloat32"``, ``"float8"``,
        ``"int8"`` ...).
    peak_bandwidth : float
        Peak memory bandwidth :math:`B_{peak}` in bytes/s.
    memory_bytes : float
        Device memory in bytes (0 if unknown).
    note : str
        Where the numbers come from.
    """

    name: str
    peak_flops: Mapping[str, float]
    peak_bandwidth: float
    memory_bytes: float = 0.0
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.peak_flops:
            raise ValueError(f"hardware {self.name!r} needs at least one peak_flops entry")
        flops = {}
        for key, value in self.peak_flops.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"peak_flops[{key!r}] must be a positive number, got {value!r}")
            flops[canonical_dtype(key)] = float(value)
        object.__setattr__(self, "peak_flops", flops)
        bw = self.peak_bandwidth
        if not (isinstance(bw, (int, float)) and math.isfinite(bw) and bw > 0):
            raise ValueError(f"peak_bandwidth must be a positive number of bytes/s, got {bw!r}")

    def flops_for(self, dtype: str | torch.dtype) -> float:
        """Dense peak :math:`F_{peak}` in FLOP/s for ``dtype``."""
        key = canonical_dtype(dtype)
        if key not in self.peak_flops:
            raise ValueError(
                f"hardware {self.name!r} has no peak for {key}; it has {sorted(self.peak_flops)} "
                "- pass dtype= one of those"
            )
        return self.peak_flops[key]

    def to_dict(self) -> dict:
        """Plain-JSON form (the format :func:`get_hardware` reads from a file)."""
        return {
            "name": self.name,
            "peak_flops": dict(self.peak_flops),
            "peak_bandwidth": self.peak_bandwidth,
            "memory_bytes": self.memory_bytes,
            "note": self.note,
        }


_T = 1e12
# Dense peaks from the NVIDIA datasheets (A100: "NVIDIA A100 Tensor Core GPU" datasheet,
# SXM4 80GB column; H100/H200: "NVIDIA H100 / H200 Tensor Core GPU" datasheets, SXM
# columns), sparsity figures halved. float32 is the CUDA-core FP32 peak (PyTorch does not
# use TF32 for float32 matmuls by default); tfloat32 the dense TF32 tensor-core peak;
# float64 the FP64 tensor-core peak.
# H100 and H200 SXM share the Hopper GH100 compute (the H200 differs in memory only).
_HOPPER_SXM_PEAKS = {
    "float64": 67 * _T,
    "float32": 67 * _T,
    "tfloat32": 494.5 * _T,
    "bfloat16": 989 * _T,
    "float16": 989 * _T,
    "float8": 1979 * _T,
    "int8": 1979 * _T,
}
_DATASHEETS = {
    "a100": Hardware(
        "NVIDIA A100 SXM4 80GB",
        {
            "float64": 19.5 * _T,
            "float32": 19.5 * _T,
            "tfloat32": 156 * _T,
            "bfloat16": 312 * _T,
            "float16": 312 * _T,
            "int8": 624 * _T,
        },
        2.039e12,
        80e9,
        "NVIDIA A100 datasheet (SXM4 80GB), dense tensor-core peaks",
    ),
    "h100": Hardware(
        "NVIDIA H100 SXM5 80GB",
        dict(_HOPPER_SXM_PEAKS),
        3.35e12,
        80e9,
        "NVIDIA H100 datasheet (SXM), dense tensor-core peaks (sparsity figures / 2)",
    ),
    "h200": Hardware(
        "NVIDIA H200 SXM 141GB",
        dict(_HOPPER_SXM_PEAKS),
        4.8e12,
        141e9,
        "NVIDIA H200 datasheet (SXM), dense tensor-core peaks (sparsity figures / 2)",
    ),
}

_CPU_CACHE: dict[float, Hardware] = {}


def _best_rate(fn, work: float, budget: float, min_reps: int = 2) -> float:
    """Largest ``work / seconds`` over repeated calls of ``fn`` within ``budget`` seconds."""
    fn()  # warm-up (allocation, thread-pool start)
    best = 0.0
    end = time.perf_counter() + budget
    reps = 0
    while reps < min_reps or time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = max(best, work / max(dt, 1e-9))
        reps += 1
    return best


def measure_cpu(max_seconds: float = 2.0) -> Hardware:
    """Measure this CPU's achievable peaks with short probes (about ``max_seconds``).

    Compute: the best rate of a 1024 x 1024 ``torch.matmul`` (``2 n^3`` FLOPs) in float32
    and in bfloat16, with torch's current thread count. Bandwidth: the best rate of
    ``dst.copy_(src)`` on 128 MiB buffers, counting the bytes read plus written
    (``2 x 128 MiB``), like STREAM "copy". The three probes share ``max_seconds`` (each
    runs at least three times, so a very small budget is exceeded).

    These are achieved rates, i.e. lower bounds of the true peaks: utilisations computed
    against them are upper bounds. A last-level cache larger than 128 MiB would inflate
    the bandwidth figure.

    Parameters
    ----------
    max_seconds : float
        Time budget of the whole measurement, in seconds (> 0).

    Returns
    -------
    Hardware
    """
    if not (max_seconds > 0 and math.isfinite(max_seconds)):
        raise ValueError(f"max_seconds must be a positive number, got {max_seconds!r}")
    deadline = time.perf_counter() + max_seconds
    n = 1024
    flops = {}
    with torch.no_grad():
        # Buffers first: their allocation counts against the budget, not the probes.
        src = torch.ones((128 << 20) // 4)
        dst = torch.empty_like(src)
        for left, dtype in ((3, torch.float32), (2, torch.bfloat16)):
            a = torch.randn(n, n).to(dtype)
            b = torch.randn(n, n).to(dtype)
            share = (deadline - time.perf_counter()) / left
            flops[canonical_dtype(dtype)] = _best_rate(lambda a=a, b=b: a @ b, 2.0 * n**3, share)
        share = deadline - time.perf_counter()
        bandwidth = _best_rate(lambda: dst.copy_(src), 2.0 * src.nbytes, share)
    return Hardware(
        "this CPU",
        flops,
        bandwidth,
        0.0,
        f"measured: {n}x{n} matmul and 2x{src.nbytes >> 20} MiB copy probes, "
        f"{torch.get_num_threads()} threads, {max_seconds:g} s budget",
    )


def available_hardware() -> list[str]:
    """Names :func:`get_hardware` accepts (besides a JSON path)."""
    return [*sorted(_DATASHEETS), "cpu"]


def get_hardware(name_or_path: str | Path | Hardware, max_seconds: float = 2.0) -> Hardware:
    """A datasheet GPU, this CPU (measured once per process), or a JSON description.

    Parameters
    ----------
    name_or_path : str, Path or Hardware
        ``"a100"``, ``"h100"``, ``"h200"``, ``"cpu"`` (case-insensitive), or a JSON file
        ``{"name": ..., "peak_flops": {"bfloat16": FLOP/s, ...}, "peak_bandwidth":
        bytes/s}``. A :class:`Hardware` is returned unchanged.
    max_seconds : float
        Budget of the CPU probe (:func:`measure_cpu`).

    Returns
    -------
    Hardware
    """
    if isinstance(name_or_path, Hardware):
        return name_or_path
    key = str(name_or_path).strip().lower()
    if key in _DATASHEETS:
        return _DATASHEETS[key]
    if key == "cpu":
        if max_seconds not in _CPU_CACHE:
            _CPU_CACHE[max_seconds] = measure_cpu(max_seconds)
        return _CPU_CACHE[max_seconds]
    path = Path(name_or_path)
    if path.suffix.lower() == ".json" or path.exists():
        data = read_json_file(path, "hardware file")
        keys = ("peak_flops", "peak_bandwidth")
        if not isinstance(data, Mapping) or any(k not in data for k in keys):
            raise ValueError(
                f"{path} must hold an object with 'peak_flops' (FLOP/s per dtype) and "
                "'peak_bandwidth' (bytes/s)"
            )
        return Hardware(
            str(data.get("name", path.stem)),
            dict(data["peak_flops"]),
            data["peak_bandwidth"],
            float(data.get("memory_bytes", 0.0)),
            str(data.get("note", f"from {path}")),
        )
    raise ValueError(
        f"unknown hardware {str(name_or_path)!r}; use one of {available_hardware()} "
        "or the path of a JSON description"
    )
