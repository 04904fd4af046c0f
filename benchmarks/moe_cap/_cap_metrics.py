"""The utilisation metrics of ``run.py``: S-MBU / S-MFU against dense and top-k MBU / MFU.

Per decode step (its latency in seconds and activated experts) against the measured peaks
(:mod:`sci_moe.moe.cap`, paper Eqs. 4-5), reduced to medians and maxima over the steps; the
rows of a workload (``case`` ``"<model> <dtype> B=<batch> L=<ctx>[ seed <s>]"``), KV-cache
and weight sizes in GB. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import statistics

import numpy as np
from _common import Row

from sci_moe.moe.cap import Hardware, ModelSpec, cap_metrics

__all__ = [
    "UTILISATION",
    "cell_case",
    "cell_rows",
    "dense_flops_per_token",
    "kv_gb",
    "summarise",
    "utilisation",
    "weights_gb",
]


#: The metrics each workload stores (median over its timed steps; ``*_max`` the maximum).
UTILISATION = ("s_mbu", "s_mfu", "dense_mbu", "dense_mfu", "topk_mbu")


def dense_flops_per_token(spec: ModelSpec, ctx: float, lm_head: bool) -> float:
    """FLOPs per token if every expert served every token (a dense model of the same size).

    ``S-F_token + 2 sum_l (E_l - k_l) S_expert,l`` (:func:`~sci_moe.moe.cap.flops_per_token`
    plus the experts a token does not use).
    """
    from sci_moe.moe.cap import flops_per_token

    extra = sum(2.0 * (m.num_experts - m.top_k) * m.expert_params for m in spec.moe_layers)
    return flops_per_token(spec, ctx, lm_head=lm_head) + extra


def utilisation(
    spec: ModelSpec,
    hw: Hardware,
    *,
    batch: int,
    ctx: int,
    latency: float,
    activated: np.ndarray,
    dtype: str,
    lm_head: bool,
) -> dict[str, float]:
    """S-MBU, S-MFU, dense MBU / MFU and top-k MBU of one step (fractions, 1.0 = 100 %).

    Parameters
    ----------
    spec : ModelSpec
    hw : Hardware
        The peaks measured in the run.
    batch, ctx : int
        Sequences and context length (KV-cache positions read).
    latency : float
        Seconds of the step.
    activated : ndarray, shape (n_moe,)
        Activated routed experts per MoE layer in the step.
    dtype : str
        Weight and KV-cache format.
    lm_head : bool
        Count the LM head.

    Returns
    -------
    dict
        ``s_mbu``, ``s_mfu``, ``dense_mbu``, ``dense_mfu``, ``topk_mbu``,
        ``activated_fraction`` (routed-expert parameters read / all), ``throughput``
        (tokens/s), ``bandwidth`` (bytes/s achieved by Eq. 4), ``flops`` (FLOP/s by Eq. 5).
    """
    kw = dict(batch_size=batch, seq_len=ctx, tpot=latency, dtype=dtype, lm_head=lm_head)
    rep = cap_metrics(spec, hw, activated=np.asarray(activated, float), **kw)
    dense = cap_metrics(spec, hw, activated="all", **kw)
    topk = cap_metrics(spec, hw, activated=np.array([m.top_k for m in spec.moe_layers]), **kw)
    dense_f = rep.throughput * dense_flops_per_token(spec, ctx, lm_head)
    return {
        "s_mbu": rep.s_mbu,
        "s_mfu": rep.s_mfu,
        "dense_mbu": dense.s_mbu,
        "dense_mfu": dense_f / rep.peak_flops,
        "topk_mbu": topk.s_mbu,
        "activated_fraction": rep.activated_expert_fraction,
        "throughput": rep.throughput,
        "bandwidth": rep.achieved_bandwidth,
        "flops": rep.achieved_flops,
    }


def summarise(spec, hw, run: dict, *, batch, ctx, dtype, lm_head) -> dict[str, float]:
    """Per-step :func:`utilisation` of a run, reduced to medians and maxima over the steps.

    Returns ``tpot_ms`` (median), ``tpot_min_ms``, ``throughput`` (tokens/s at the median),
    ``activated_fraction`` (mean), ``activated_uniform`` (the fraction expected under
    uniform routing, :func:`~sci_moe.moe.cap.expected_activated`), and for every metric of
    :data:`UTILISATION` its median and ``<metric>_max``.
    """
    from sci_moe.moe.cap import expected_activated

    per_step = [
        utilisation(
            spec,
            hw,
            batch=batch,
            ctx=ctx,
            latency=float(t),
            activated=a,
            dtype=dtype,
            lm_head=lm_head,
        )
        for t, a in zip(run["latency"], run["activated"], strict=True)
    ]
    lat = run["latency"]
    out = {
        "tpot_ms": 1e3 * float(np.median(lat)),
        "tpot_min_ms": 1e3 * float(np.min(lat)),
        "throughput": batch / float(np.median(lat)),
        "activated_fraction": float(np.mean([s["activated_fraction"] for s in per_step])),
        "activated_uniform": float(
            np.mean(
                [
                    expected_activated(m.num_experts, m.top_k, batch) / m.num_experts
                    for m in spec.moe_layers
                ]
            )
        ),
    }
    for key in UTILISATION:
        vals = [s[key] for s in per_step]
        out[key] = float(statistics.median(vals))
        out[f"{key}_max"] = float(max(vals))
    return out


_UNITS = {
    "tpot_ms": "ms",
    "tpot_min_ms": "ms",
    "throughput": "tokens/s",
    "activated_fraction": "fraction",
    "activated_uniform": "fraction",
}


def cell_case(model: str, dtype: str, batch: int, ctx: int, seed: int | None = None) -> str:
    """The ``case`` of a workload's rows (``seed`` for the seed-replicated cells)."""
    case = f"{model} {dtype} B={batch} L={ctx}"
    return case if seed is None else f"{case} seed {seed}"


def cell_rows(case: str, summary: dict) -> list[Row]:
    return [Row(case, k, v, _UNITS.get(k, "fraction of peak")) for k, v in summary.items()]


def kv_gb(spec: ModelSpec, batch: int, ctx: int, dtype: str) -> float:
    from sci_moe.moe.cap import kv_cache_bytes

    return kv_cache_bytes(spec, batch, ctx, dtype) / 1e9


def weights_gb(spec: ModelSpec, dtype: str) -> float:
    """Weights counted by the spec (embeddings included), GB."""
    from sci_moe.moe.cap import bytes_per_param

    return spec.total_params * bytes_per_param(dtype) / 1e9
