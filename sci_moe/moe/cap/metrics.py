"""Sparsity-aware utilisation metrics of MoE-CAP: S-MBU (Eq. 4) and S-MFU (Eq. 5).

Jiang, Fu, Huang et al., "MoE-CAP: Benchmarking Cost, Accuracy and Performance of Sparse
Mixture-of-Experts Systems", NeurIPS 2025 Datasets & Benchmarks (arXiv:2412.07067).

For one inference step of ``B`` sequences with ``L`` tokens of context each, taking
``TPOT`` seconds and processing ``T`` tokens (``T = B`` when decoding):

.. math::

    S_{activated} &= n_{layer} S_{attn}
        + \\sum_{l} \\Big(\\sum_{i=1}^{E} \\mathbb{1}[l, i]\\, S_{expert} + S_{shared}\\Big)
        + S_{dense}

    S_{KV} &= e_{KV}\\, n_{layer}\\, L\\, B \\qquad (e_{KV} = 2 n_{kv} d_h \\text{ for GQA})

    \\text{S-MBU} &= \\frac{(S_{activated} + S_{KV}) / TPOT}{B_{peak}}

    \\text{S-F}_{token} &= F_{attn} + 2 N_{router} + 2 k_{expert} N_{expert}

    \\text{S-MFU} &= \\frac{T_{token}\\, \\text{S-F}_{token}}{F_{peak}},
        \\qquad T_{token} = T / TPOT

with sizes in bytes (parameters times bytes per parameter of the weight dtype),
:math:`\\mathbb{1}[l, i] = 1` when expert ``i`` of MoE layer ``l`` serves **any** token of
the step, :math:`F_{attn} = n_{layer}(2 S_{attn} + 4 n_h d_h L)`, :math:`N_{router}` and
:math:`N_{expert}` summed over MoE layers, :math:`k_{expert}` = top-k + shared experts.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .dtypes import bytes_per_param, canonical_dtype
from .hardware import Hardware, get_hardware
from .model import ModelSpec

__all__ = [
    "EXPERT_COUNTS",
    "CapReport",
    "activated_counts",
    "activated_param_count",
    "cap_metrics",
    "expected_activated",
    "flops_per_token",
    "kv_cache_bytes",
    "s_mbu",
    "s_mfu",
]

#: ``"per_expert"``: the paper's Eqs. 4-5. ``"per_layer_once"``: the MoE-CAP code
#: (sparse-generative-ai/MoE-CAP @ 4f2c775): one expert per MoE layer in S-MFU, no
#: router FLOPs, activated experts averaged over layers in S-MBU.
EXPERT_COUNTS = ("per_expert", "per_layer_once")


def _check_expert_count(expert_count: str) -> None:
    if expert_count not in EXPERT_COUNTS:
        raise ValueError(f"expert_count must be one of {EXPERT_COUNTS}, got {expert_count!r}")


def expected_activated(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected number of distinct experts used by ``tokens`` uniformly routed tokens.

    Each token picks ``k`` distinct experts uniformly at random, independently of the
    others, so an expert is unused with probability :math:`(1 - k/E)^T`:

    .. math:: \\mathbb{E}\\Big[\\sum_i \\mathbb{1}[i]\\Big] = E\\,\\big(1 - (1 - k/E)^{T}\\big)

    Real routers are not uniform; this is the estimate used when no routing was recorded.
    """
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def activated_counts(spec: ModelSpec, activated="uniform", tokens: float = 1) -> np.ndarray:
    """Activated routed experts per MoE layer, :math:`\\sum_i \\mathbb{1}[l, i]`.

    Parameters
    ----------
    spec : ModelSpec
    activated : {"uniform", "all"}, float, sequence or array
        ``"uniform"``: :func:`expected_activated` for ``tokens`` tokens; ``"all"``: every
        expert; a number: that many in every MoE layer; shape ``(n_moe,)``: count per
        layer; shape ``(n_moe, E)``: per-expert usage (a boolean mask or token counts;
        an expert counts when its entry is > 0).
    tokens : float
        Tokens in the step (for ``"uniform"``).

    Returns
    -------
    ndarray, shape (n_moe,), float64
    """
    layers = spec.moe_layers
    n = len(layers)
    E = np.array([m.num_experts for m in layers], dtype=np.float64)
    if isinstance(activated, str):
        if activated == "uniform":
            return np.array([expected_activated(m.num_experts, m.top_k, tokens) for m in layers])
        if activated == "all":
            return E
        raise ValueError(
            f"activated must be 'uniform', 'all', a number or an array, got {activated!r}"
        )
    if isinstance(activated, torch.Tensor):
        activated = activated.detach().cpu().numpy()
    arr = np.asarray(activated, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    elif arr.ndim == 2:
        if arr.shape[0] != n:
            raise ValueError(f"activated has {arr.shape[0]} rows but the model has {n} MoE layers")
        if not all(arr.shape[1] == m.num_experts for m in layers):
            raise ValueError(
                f"activated has {arr.shape[1]} columns; give one column per expert "
                f"({sorted({m.num_experts for m in layers})})"
            )
        arr = (arr > 0).sum(axis=1).astype(np.float64)
    elif arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(
            f"activated has shape {arr.shape}; give one count per MoE layer ({n},) "
            f"or a usage mask ({n}, E)"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > E):
        raise ValueError("activated counts must lie between 0 and the layer's num_experts")
    return arr


def activated_param_count(
    spec: ModelSpec,
    counts: np.ndarray,
    expert_count: str = "per_expert",
    lm_head: bool = False,
) -> float:
    """Parameters read in one step, :math:`S_{activated}` in parameters (not bytes).

    ``"per_expert"`` sums :math:`\\mathbb{1}[l,i] S_{expert,l}` layer by layer;
    ``"per_layer_once"`` uses :math:`n_{moe} \\cdot \\overline{a} \\cdot \\overline{S}_{expert}`
    with :math:`\\overline{a}` the activation averaged over layers (as the MoE-CAP
    code); both agree when all MoE layers have the same expert size.
    """
    _check_expert_count(expert_count)
    layers = spec.moe_layers
    total = spec.num_layers * spec.attention_params + spec.dense_params
    total += sum(m.shared_params for m in layers)
    if layers:
        sizes = np.array([m.expert_params for m in layers], dtype=np.float64)
        if expert_count == "per_expert":
            total += float(np.dot(counts, sizes))
        else:
            total += len(layers) * float(np.mean(counts)) * float(np.mean(sizes))
    if lm_head:
        total += spec.vocab_size * spec.hidden_size
    return float(total)


def kv_cache_bytes(
    spec: ModelSpec, batch_size: int, seq_len: float, dtype: str | torch.dtype
) -> float:
    """KV cache read in one step, :math:`S_{KV}`, in bytes.

    .. math:: S_{KV} = e_{KV}\\, n_{layer}\\, L\\, B\\, b_{KV}

    with :math:`e_{KV} = 2 n_{kv} d_h` (GQA) or :math:`r_{kv} + d_{rope}` (MLA) and
    :math:`b_{KV}` the bytes per element of ``dtype``.
    """
    return float(spec.kv_elements_per_token) * seq_len * batch_size * bytes_per_param(dtype)


def flops_per_token(
    spec: ModelSpec,
    seq_len: float,
    expert_count: str = "per_expert",
    lm_head: bool = False,
) -> float:
    """FLOPs per token, :math:`\\text{S-F}_{token}`.

    .. math::

        \\text{S-F}_{token} = n_{layer}\\big(2 S_{attn} + F_{score}(L)\\big)
            + 2 N_{router} + 2 \\sum_l \\big(k_l S_{expert,l} + S_{shared,l}\\big)
            + 2 S_{dense}

    (:math:`k_{expert} N_{expert}` of Eq. 5 written per layer, so that shared experts of
    another size, e.g. Qwen2-MoE's, are exact). ``"per_layer_once"`` (the MoE-CAP code)
    counts :math:`S_{expert,l}` once per layer instead of :math:`k_l` times and drops
    :math:`2 N_{router}`. ``lm_head=True`` adds :math:`2 V d`.
    """
    _check_expert_count(expert_count)
    if seq_len < 0:
        raise ValueError(f"seq_len must be >= 0, got {seq_len}")
    f = 2.0 * spec.num_layers * spec.attention_params + 2.0 * spec.dense_params
    if spec.attention is not None:
        f += spec.num_layers * spec.attention.score_flops(seq_len)
    for m in spec.moe_layers:
        if expert_count == "per_expert":
            f += 2.0 * m.router_params + 2.0 * (m.top_k * m.expert_params + m.shared_params)
        else:
            f += 2.0 * (m.expert_params + m.shared_params)
    if lm_head:
        f += 2.0 * spec.vocab_size * spec.hidden_size
    return f


@dataclass(frozen=True)
class CapReport:
    """S-MBU and S-MFU of one workload, with the quantities they are made of.

    Attributes
    ----------
    model, hardware : str
    dtype, kv_dtype : str
        Weight and KV-cache number formats.
    batch_size : int
        Sequences ``B``.
    seq_len : float
        Context length ``L`` per sequence (tokens in the KV cache), tokens.
    tokens : float
        Tokens processed per step ``T`` (``B`` when decoding).
    tpot : float
        Seconds per step (time per output token when decoding), s.
    throughput : float
        :math:`T_{token} = T / TPOT`, tokens/s.
    num_devices : int
    expert_count : str
    activated : tuple of float
        Activated routed experts per MoE layer.
    activated_mode : str
        ``"uniform"``, ``"all"``, ``"given"`` or ``"recorded"``.
    activated_expert_fraction : float
        Routed-expert parameters read / all routed-expert parameters.
    activated_bytes, kv_bytes : float
        :math:`S_{activated}` and :math:`S_{KV}`, bytes.
    achieved_bandwidth, peak_bandwidth : float
        Bytes/s (the peak times ``num_devices``).
    flops_per_token : float
        :math:`\\text{S-F}_{token}`, FLOPs.
    achieved_flops, peak_flops : float
        FLOP/s (the peak times ``num_devices``).
    s_mbu, s_mfu : float
        Fractions (1.0 = 100 %).
    steps : int
        Steps averaged (recorded runs), 1 otherwise.
    """

    model: str
    hardware: str
    dtype: str
    kv_dtype: str
    batch_size: int
    seq_len: float
    tokens: float
    tpot: float
    throughput: float
    num_devices: int
    expert_count: str
    activated: tuple[float, ...]
    activated_mode: str
    activated_expert_fraction: float
    activated_bytes: float
    kv_bytes: float
    achieved_bandwidth: float
    peak_bandwidth: float
    flops_per_token: float
    achieved_flops: float
    peak_flops: float
    s_mbu: float
    s_mfu: float
    steps: int = 1

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        out = asdict(self)
        out["activated"] = list(self.activated)
        return out

    def format_table(self) -> str:
        """A two-column text table of the main quantities."""
        act = np.asarray(self.activated)
        act_txt = "-"
        if act.size:
            act_txt = f"{act.mean():.2f} (min {act.min():.2f}, max {act.max():.2f})"
        rows = [
            ("model", self.model),
            ("hardware", f"{self.hardware} x {self.num_devices}"),
            ("dtype (weights / KV)", f"{self.dtype} / {self.kv_dtype}"),
            ("batch x context", f"{self.batch_size} x {self.seq_len:g} tokens"),
            ("time per step", f"{self.tpot * 1e3:.4g} ms"),
            ("throughput", f"{self.throughput:.6g} tokens/s"),
            (f"activated experts/layer ({self.activated_mode})", act_txt),
            ("activated expert params", f"{100 * self.activated_expert_fraction:.2f} %"),
            ("S_activated", f"{self.activated_bytes / 1e9:.6g} GB"),
            ("S_KV", f"{self.kv_bytes / 1e9:.6g} GB"),
            ("achieved bandwidth", f"{self.achieved_bandwidth / 1e12:.6g} TB/s"),
            ("S-F_token", f"{self.flops_per_token / 1e9:.6g} GFLOP"),
            ("achieved compute", f"{self.achieved_flops / 1e12:.6g} TFLOP/s"),
            ("expert count", self.expert_count),
            ("S-MBU", f"{100 * self.s_mbu:.4f} %"),
            ("S-MFU", f"{100 * self.s_mfu:.4f} %"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _count(name: str, value) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _positive_number(name: str, value, allow_zero: bool = False) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def cap_metrics(
    spec: ModelSpec,
    hardware: Hardware | str,
    *,
    batch_size: int,
    seq_len: float,
    tpot: float | None = None,
    throughput: float | None = None,
    tokens: float | None = None,
    activated="uniform",
    dtype: str | torch.dtype | None = None,
    kv_dtype: str | torch.dtype | None = None,
    num_devices: int = 1,
    expert_count: str = "per_expert",
    lm_head: bool = False,
) -> CapReport:
    """S-MBU (Eq. 4) and S-MFU (Eq. 5) of one workload.

    Parameters
    ----------
    spec : ModelSpec
    hardware : Hardware or str
        See :func:`~sci_moe.moe.cap.get_hardware`.
    batch_size : int
        Sequences ``B`` in the step.
    seq_len : float
        Context length ``L`` of each sequence (tokens whose keys/values are read), tokens.
    tpot : float, optional
        Seconds per step (time per output token when decoding).
    throughput : float, optional
        Tokens per second :math:`T_{token}`; give exactly one of ``tpot`` and
        ``throughput`` (``TPOT = T / T_{token}``).
    tokens : float, optional
        Tokens processed per step ``T`` (default ``batch_size``: one new token per
        sequence, i.e. decoding).
    activated : {"uniform", "all"}, number or array
        Activated experts per MoE layer; see :func:`activated_counts`.
    dtype, kv_dtype : str or torch.dtype, optional
        Weight format (default ``spec.dtype``) and KV-cache format (default ``dtype``);
        bytes per parameter and :math:`F_{peak}` follow from them.
    num_devices : int
        Devices serving the model; both peaks are multiplied by it.
    expert_count : {"per_expert", "per_layer_once"}
        The paper's equations, or the MoE-CAP code's variant (see :data:`EXPERT_COUNTS`).
    lm_head : bool
        Also count the LM head (``V d`` parameters; not in the paper's equations).

    Returns
    -------
    CapReport
    """
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"spec must be a ModelSpec, got {type(spec).__name__}")
    hw = get_hardware(hardware)
    _check_expert_count(expert_count)
    batch_size = _count("batch_size", batch_size)
    num_devices = _count("num_devices", num_devices)
    seq_len = _positive_number("seq_len", seq_len, allow_zero=True)  # float from here
    tokens = float(batch_size) if tokens is None else _positive_number("tokens", tokens)
    if (tpot is None) == (throughput is None):
        raise ValueError("give exactly one of tpot (seconds per step) and throughput (tokens/s)")
    if tpot is not None:
        tpot = _positive_number("tpot", tpot)
        throughput = tokens / tpot
    else:
        throughput = _positive_number("throughput", throughput)
        tpot = tokens / throughput
    dtype = canonical_dtype(spec.dtype if dtype is None else dtype)
    kv_dtype = canonical_dtype(dtype if kv_dtype is None else kv_dtype)
    if isinstance(activated, str):
        mode = activated
    else:
        mode = "given"
    counts = activated_counts(spec, activated, tokens)

    b = bytes_per_param(dtype)
    act_bytes = activated_param_count(spec, counts, expert_count, lm_head) * b
    kv_bytes = kv_cache_bytes(spec, batch_size, seq_len, kv_dtype)
    peak_bw = hw.peak_bandwidth * num_devices
    bandwidth = (act_bytes + kv_bytes) / tpot
    f_token = flops_per_token(spec, seq_len, expert_count, lm_head)
    peak_f = hw.flops_for(dtype) * num_devices
    achieved_f = throughput * f_token
    routed_all = sum(m.num_experts * m.expert_params for m in spec.moe_layers)
    routed_used = sum(c * m.expert_params for c, m in zip(counts, spec.moe_layers, strict=True))
    return CapReport(
        model=spec.name,
        hardware=hw.name,
        dtype=dtype,
        kv_dtype=kv_dtype,
        batch_size=batch_size,
        seq_len=seq_len,
        tokens=tokens,
        tpot=tpot,
        throughput=throughput,
        num_devices=num_devices,
        expert_count=expert_count,
        activated=tuple(float(c) for c in counts),
        activated_mode=mode,
        activated_expert_fraction=float(routed_used / routed_all) if routed_all else 0.0,
        activated_bytes=act_bytes,
        kv_bytes=kv_bytes,
        achieved_bandwidth=bandwidth,
        peak_bandwidth=peak_bw,
        flops_per_token=f_token,
        achieved_flops=achieved_f,
        peak_flops=peak_f,
        s_mbu=bandwidth / peak_bw,
        s_mfu=achieved_f / peak_f,
    )


def s_mbu(spec: ModelSpec, hardware: Hardware | str, **kwargs) -> float:
    """Sparse memory-bandwidth utilisation (MoE-CAP Eq. 4).

    .. math::

        \\text{S-MBU} = \\frac{\\big(S_{activated} + S_{KV}\\big) / TPOT}{B_{peak}},
        \\quad S_{activated} = n_{layer} S_{attn}
            + \\sum_l \\sum_i \\mathbb{1}[l, i]\\, S_{expert}

    Keyword arguments as :func:`cap_metrics` (``batch_size``, ``seq_len``, ``tpot`` or
    ``throughput``, ``activated``, ...). Returns a fraction (1.0 = 100 %).
    """
    return cap_metrics(spec, hardware, **kwargs).s_mbu


def s_mfu(spec: ModelSpec, hardware: Hardware | str, **kwargs) -> float:
    """Sparse model-FLOPs utilisation (MoE-CAP Eq. 5).

    .. math::

        \\text{S-MFU} = \\frac{T_{token}\\,\\text{S-F}_{token}}{F_{peak}},\\quad
        \\text{S-F}_{token} = F_{attn} + 2 N_{router} + 2 k_{expert} N_{expert}

    Keyword arguments as :func:`cap_metrics`. Returns a fraction (1.0 = 100 %).
    """
    return cap_metrics(spec, hardware, **kwargs).s_mfu
