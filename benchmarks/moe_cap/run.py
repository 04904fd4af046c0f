"""MoE-CAP measured: S-MBU / S-MFU against dense MBU / MFU on real MoE decoding (issue 47).

Jiang, Fu, Huang et al., "MoE-CAP: Benchmarking Cost, Accuracy and Performance of Sparse
Mixture-of-Experts Systems", NeurIPS 2025 Datasets & Benchmarks (arXiv 2412.07067).
The formulas are :mod:`sci_moe.moe.cap` (paper Eqs. 4-5); this script measures them.

**Models** (random weights, built from a config; nothing is downloaded):

* ``Mixtral``: transformers' ``MixtralForCausalLM`` shaped like Mixtral-8x7B with every
  width divided by 8 (hidden 512, expert FFN 1792, 8 heads / 2 KV heads, 8 experts,
  top-2), 4 layers, vocabulary 1024;
* ``Qwen1.5-MoE``: transformers' ``Qwen2MoeForCausalLM`` shaped like Qwen1.5-MoE-A2.7B
  with widths divided by 4 (hidden 512, 60 experts of FFN 352, top-4, one shared expert
  of FFN 1408, 8 heads, MHA), 4 layers, vocabulary 1024;
* ``sci-moe``: four of the package's own :class:`sci_moe.moe.MoE` layers (d_model 512,
  16 SwiGLU experts of 896, top-2) with RMSNorm and residuals; no attention, so no KV
  cache and one context length (0). Recorded with :class:`~sci_moe.moe.cap.CapRecorder`.

``--device cuda`` uses a larger setting (widths of the real models, 8 layers; see
:data:`SETTINGS`).

**Workload**: one decode step per sequence for batch ``B`` and context ``L``: the KV cache
(transformers ``StaticCache``, ``max_cache_len = L``) is filled with random keys and
values, and each step decodes the token at position ``L - 1`` (so every step reads ``L``
cached positions), greedy (argmax) tokens fed back. The LM head is part of the step and
counted (``lm_head=True``). ``warmup`` untimed steps, then ``steps`` timed ones, each
timed alone (device synchronised). The experts every step activates are recorded from the
routers (forward hooks on the transformers' ``gate`` modules; ``CapRecorder`` for sci-moe).

**Metrics** of each step (its own latency and activated experts), against the peaks
measured in the same run:

* ``s_mbu``, ``s_mfu``: the paper's Eqs. 4-5 (:func:`~sci_moe.moe.cap.cap_metrics`);
* ``dense_mbu``: Eq. 4 with every expert counted as read (``activated="all"``), the MBU
  of a dense model of the same size;
* ``dense_mfu``: Eq. 5 with every expert counted as computed for every token (FLOPs
  ``S-F_token + 2 sum_l (E_l - k_l) S_expert``), the MFU of a dense model;
* ``topk_mbu``: Eq. 4 with only the ``k`` experts of one token counted (the "active
  parameters" of a model card).

Each workload stores the median over its steps (``tpot_ms``, ``s_mbu``, ...) and the maximum
(``*_max``): a utilisation above 100 % of a measured peak in any single step is physically
impossible, so the bounds are checked on the maxima.

**Peaks**, measured in this run with the same thread count (:func:`measure_peaks`), in
rounds before, between and after the model blocks (each round's rows and the CPU other
processes used since the previous round are stored): bandwidth = the best of a STREAM-like
triad ``a = b + s c`` (3 arrays, bytes counted as STREAM does: 2 reads + 1 write), a copy,
a read-only sum and a matrix-vector product, fp32 arrays far larger than the last-level
cache; FLOPs per dtype = the best of NT GEMMs ``a @ b.T`` (the layout of ``nn.Linear``):
large squares and a batch of 256 tokens through a wide expert-like matrix. The peak used is
the best over all rounds.

**Seeds**: the whole grid runs with ``--seed``; the cells the verdicts read (batch 1, 8 and
256 at the shortest context, both dtypes) run again with ``--seeds`` seeds (new weights,
routing and inputs) for paired tests.

**Verdicts** (:func:`verdicts`, re-derivable with ``--verdicts-only JSON``): one per claim
of the abstract / the paper's metric section, each by a fixed rule on the stored rows.

Run: ``python benchmarks/moe_cap/run.py [--quick] [--json PATH] [--plots DIR] [--threads N]
[--device cuda] [--seeds 5]``. Quick (about a minute): 2 layers, batches 1, 8, 64, contexts
32 and 128, 2 seeds. Full CPU run: batches 1, 8, 32, 128, 256, contexts 64, 256, 1024,
5 seeds (about ten minutes on one thread; 581 s beside other jobs using two thirds of a
2-core machine).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    decide_verdict,
    machine_info,
    print_table,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json,
)
from torch import nn

from sci_moe.moe import MoE
from sci_moe.moe.cap import CapRecorder, Hardware, ModelSpec, cap_metrics, cap_radar
from sci_moe.moe.cap.radar import RadarAxis

DTYPES = ("float32", "bfloat16")
MODELS = ("Mixtral", "Qwen1.5-MoE", "sci-moe")
#: The metrics each workload stores (median over its timed steps; ``*_max`` the maximum).
UTILISATION = ("s_mbu", "s_mfu", "dense_mbu", "dense_mfu", "topk_mbu")

#: Model widths and the grid per setting. ``cpu``: Mixtral-8x7B / Qwen1.5-MoE-A2.7B with
#: widths divided by 8 / 4 (weights 0.37 / 0.58 GB in fp32, far above the 32 MiB L3);
#: ``cuda``: the real widths, 8 layers; ``quick``: the cpu widths, 2 layers, a small grid.
SETTINGS = {
    "cpu": {
        "layers": 4,
        "mixtral": {"hidden": 512, "ffn": 1792, "heads": 8, "kv_heads": 2},
        "qwen": {"hidden": 512, "ffn": 352, "shared_ffn": 1408, "heads": 8, "kv_heads": 8},
        "scimoe": {"hidden": 512, "ffn": 896, "experts": 16, "top_k": 2},
        "vocab": 1024,
        "batches": (1, 8, 32, 128, 256),
        "contexts": (64, 256, 1024),
        "seed_batches": (1, 8, 256),
        "steps": 6,
        "steps_small": 16,
        "warmup": 2,
        "max_kv_gb": 1.1,
        "triad_n": 32 << 20,
        "gemm_n": {
            "float32": (1024, 2048, (256, 512, 3584)),
            "bfloat16": (512, 1024, (256, 512, 3584)),
        },
        "reps": 3,
    },
    "quick": {
        "layers": 2,
        "mixtral": {"hidden": 512, "ffn": 1792, "heads": 8, "kv_heads": 2},
        "qwen": {"hidden": 512, "ffn": 352, "shared_ffn": 1408, "heads": 8, "kv_heads": 8},
        "scimoe": {"hidden": 512, "ffn": 896, "experts": 16, "top_k": 2},
        "vocab": 1024,
        "batches": (1, 8, 64),
        "contexts": (32, 128),
        "seed_batches": (1, 8, 64),
        "steps": 3,
        "steps_small": 5,
        "warmup": 1,
        "max_kv_gb": 0.3,
        "triad_n": 16 << 20,
        "gemm_n": {"float32": (1024, (256, 512, 3584)), "bfloat16": (512, (256, 512, 3584))},
        "reps": 2,
    },
    "cuda": {
        "layers": 8,
        "mixtral": {"hidden": 4096, "ffn": 14336, "heads": 32, "kv_heads": 8},
        "qwen": {"hidden": 2048, "ffn": 1408, "shared_ffn": 5632, "heads": 16, "kv_heads": 16},
        "scimoe": {"hidden": 2048, "ffn": 3584, "experts": 16, "top_k": 2},
        "vocab": 32000,
        "batches": (1, 8, 32, 128, 256),
        "contexts": (256, 1024, 4096),
        "seed_batches": (1, 8, 256),
        "steps": 10,
        "steps_small": 20,
        "warmup": 3,
        "max_kv_gb": 40.0,
        "triad_n": 256 << 20,
        "gemm_n": {"float32": (4096, 8192), "bfloat16": (4096, 8192)},
        "reps": 5,
    },
}


# ----------------------------------------------------------------------------- device


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


# ----------------------------------------------------------------------------- models


def hf_config(kind: str, setting: dict):
    """The transformers config of the ``Mixtral`` or ``Qwen1.5-MoE`` shaped model."""
    if kind not in ("Mixtral", "Qwen1.5-MoE"):
        raise ValueError(f"unknown transformers model {kind!r}; use 'Mixtral' or 'Qwen1.5-MoE'")
    s = setting["mixtral" if kind == "Mixtral" else "qwen"]
    shared = dict(
        vocab_size=setting["vocab"],
        hidden_size=s["hidden"],
        num_hidden_layers=setting["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        tie_word_embeddings=False,
    )
    if kind == "Mixtral":
        from transformers import MixtralConfig

        return MixtralConfig(
            **shared, intermediate_size=s["ffn"], num_local_experts=8, num_experts_per_tok=2
        )
    from transformers import Qwen2MoeConfig

    return Qwen2MoeConfig(
        **shared,
        intermediate_size=s["shared_ffn"],
        moe_intermediate_size=s["ffn"],
        shared_expert_intermediate_size=s["shared_ffn"],
        num_experts=60,
        num_experts_per_tok=4,
        norm_topk_prob=False,
    )


class MoEStack(nn.Module):
    """``n`` pre-norm residual blocks ``x + MoE(RMSNorm(x))`` of sci-moe :class:`MoE` layers.

    Parameters
    ----------
    d_model, num_experts, top_k, d_hidden, layers : int
    """

    def __init__(self, d_model: int, num_experts: int, top_k: int, d_hidden: int, layers: int):
        super().__init__()
        self.norms = nn.ModuleList(nn.RMSNorm(d_model) for _ in range(layers))
        self.layers = nn.ModuleList(
            MoE(d_model=d_model, num_experts=num_experts, top_k=top_k, d_hidden=d_hidden)
            for _ in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` of shape ``(B, d_model)`` -> ``(B, d_model)``."""
        for norm, layer in zip(self.norms, self.layers, strict=True):
            x = x + layer(norm(x))
        return x


def build_model(kind: str, setting: dict, seed: int, device: torch.device):
    """A model with random weights (float32) and its :class:`ModelSpec`.

    Returns ``(model, spec)``; the spec of a transformers model comes from its config
    (:meth:`ModelSpec.from_config`), that of ``sci-moe`` from the module.
    """
    torch.manual_seed(seed)
    if kind == "sci-moe":
        s = setting["scimoe"]
        model = MoEStack(s["hidden"], s["experts"], s["top_k"], s["ffn"], setting["layers"])
        model = model.to(device).eval()
        return model, ModelSpec.from_module(model, name=kind, dtype="float32")
    cfg = hf_config(kind, setting)
    if kind == "Mixtral":
        from transformers import MixtralForCausalLM as cls
    else:
        from transformers import Qwen2MoeForCausalLM as cls
    model = cls(cfg).to(device).eval()
    spec = ModelSpec.from_config(cfg.to_dict(), name=kind)
    return model, spec


def _gates(model: nn.Module) -> list[nn.Module]:
    """The routers of a transformers MoE model, in layer order."""
    gates = [m for name, m in model.named_modules() if name.endswith("mlp.gate")]
    if not gates:
        raise ValueError(f"{type(model).__name__} has no '*.mlp.gate' router modules")
    return gates


def _static_cache(model, batch: int, ctx: int, dtype: torch.dtype, device, seed: int):
    """A ``StaticCache`` of ``ctx`` positions filled with random keys and values.

    The values are drawn in float32 on ``device`` (generator seeded with ``seed``) and cast
    to ``dtype``, so caches of both dtypes hold the same values.
    """
    from transformers import StaticCache

    gen = torch.Generator(device=device).manual_seed(seed)

    cfg = model.config
    cache = StaticCache(config=cfg, max_cache_len=ctx)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    probe = torch.zeros(batch, cfg.num_key_value_heads, 1, head_dim, dtype=dtype, device=device)
    for layer in cache.layers:
        layer.lazy_initialization(probe, probe)
        for buf in (layer.keys, layer.values):
            buf.copy_(torch.randn(buf.shape, generator=gen, device=device).to(dtype))
    return cache


def decode_hf(
    model: nn.Module,
    batch: int,
    ctx: int,
    steps: int,
    warmup: int,
    seed: int = 0,
) -> dict:
    """Time ``steps`` decode steps of a transformers MoE model at batch ``batch``, context ``ctx``.

    Returns
    -------
    dict
        ``latency``: seconds per step, shape ``(steps,)``; ``activated``: activated routed
        experts per step and MoE layer, shape ``(steps, n_moe)``; ``tokens``: tokens per
        step (``batch``).
    """
    if ctx < 1:
        raise ValueError(f"ctx must be >= 1 for a model with attention, got {ctx}")
    param = next(model.parameters())
    device, dtype = param.device, param.dtype
    gen = torch.Generator().manual_seed(seed)
    cache = _static_cache(model, batch, ctx, dtype, device, seed)
    ids = torch.randint(0, model.config.vocab_size, (batch, 1), generator=gen).to(device)
    gates = _gates(model)
    num_experts = gates[0].num_experts
    picked: list[torch.Tensor] = []
    hooks = [g.register_forward_hook(lambda m, i, o: picked.append(o[2])) for g in gates]
    lat, act = [], []
    try:
        with torch.inference_mode():
            for step in range(warmup + steps):
                for layer in cache.layers:
                    layer.cumulative_length.fill_(ctx - 1)
                picked.clear()
                _sync(device)
                t0 = time.perf_counter()
                out = model(input_ids=ids, cache=cache, use_cache=True)
                ids = out.logits[:, -1:].argmax(-1)
                _sync(device)
                dt = time.perf_counter() - t0
                if step >= warmup:
                    lat.append(dt)
                    act.append(
                        [
                            int((torch.bincount(p.reshape(-1), minlength=num_experts) > 0).sum())
                            for p in picked
                        ]
                    )
    finally:
        for h in hooks:
            h.remove()
    return {"latency": np.array(lat), "activated": np.array(act, float), "tokens": batch}


def decode_scimoe(model: nn.Module, batch: int, steps: int, warmup: int, seed: int = 0) -> dict:
    """Time ``steps`` one-token-per-sequence steps of a sci-moe model with :class:`CapRecorder`.

    Returns the same dict as :func:`decode_hf`.
    """
    param = next(model.parameters())
    gen = torch.Generator().manual_seed(seed)
    width = model_width(model)
    xs = [
        torch.randn(batch, width, generator=gen).to(device=param.device, dtype=param.dtype)
        for _ in range(warmup + steps)
    ]
    with torch.inference_mode(), CapRecorder(model) as rec:
        for x in xs:
            model(x)
    return {
        "latency": rec.latencies()[warmup:],
        "activated": rec.activated()[warmup:],
        "tokens": batch,
    }


def model_width(model: nn.Module) -> int:
    """``d_model`` of a :class:`MoEStack`."""
    return model.layers[0].d_model


# ---------------------------------------------------------------------------- metrics


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


def fidelity(model: nn.Module, kind: str, ctx: int, seed: int) -> tuple[nn.Module, dict]:
    """Convert a float32 model to bfloat16 and measure how far one step's output moves.

    Runs one decode step (batch 16, context ``ctx``; sci-moe: 16 tokens) in float32, converts
    the model in place to bfloat16 and runs the same step (same cache values, inputs).

    Returns
    -------
    model : nn.Module
        The bfloat16 model.
    dict
        ``fidelity`` = ``1 - ||y_bf16 - y_fp32|| / ||y_fp32||`` (logits, or the sci-moe
        output) and, for transformers models, ``top1_agreement`` (greedy tokens equal).
    """
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed + 7919)
    batch = 16
    outs = []
    if kind == "sci-moe":
        x = torch.randn(batch, model_width(model), generator=gen).to(device)
        with torch.inference_mode():
            outs.append(model(x).float())
            model = model.to(torch.bfloat16)
            outs.append(model(x.to(torch.bfloat16)).float())
    else:
        ids = torch.randint(0, model.config.vocab_size, (batch, 1), generator=gen).to(device)
        for dtype in (torch.float32, torch.bfloat16):
            if dtype == torch.bfloat16:
                model = model.to(torch.bfloat16)
            cache = _static_cache(model, batch, ctx, dtype, device, seed)
            for layer in cache.layers:
                layer.cumulative_length.fill_(ctx - 1)
            with torch.inference_mode():
                outs.append(model(input_ids=ids, cache=cache, use_cache=True).logits[:, -1].float())
    ref, low = outs
    res = {"fidelity": 1.0 - float((low - ref).norm() / ref.norm())}
    if kind != "sci-moe":
        res["top1_agreement"] = float((low.argmax(-1) == ref.argmax(-1)).float().mean())
    return model, res


# -------------------------------------------------------------------------- the run


def kv_gb(spec: ModelSpec, batch: int, ctx: int, dtype: str) -> float:
    from sci_moe.moe.cap import kv_cache_bytes

    return kv_cache_bytes(spec, batch, ctx, dtype) / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdicts)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds of the verdict cells (default 5; quick 2)"
    )
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    key = "cuda" if device.type == "cuda" else ("quick" if args.quick else "cpu")
    setting = dict(SETTINGS[key])
    if device.type == "cuda" and args.quick:
        setting.update(batches=(1, 8, 64), contexts=(256, 1024), seed_batches=(1, 8, 64), steps=3)
    n_seeds = args.seeds if args.seeds is not None else (2 if args.quick else 5)
    seeds = [args.seed + i for i in range(n_seeds)]
    ctx0 = setting["contexts"][0]
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        device=str(device),
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        setting=key,
        seeds=seeds,
        layers=setting["layers"],
        batches=list(setting["batches"]),
        contexts=list(setting["contexts"]),
        seed_batches=list(setting["seed_batches"]),
        steps=setting["steps"],
        steps_small_batches=setting["steps_small"],
        bf16_native=bf16_native(device),
        warmup=setting["warmup"],
        max_kv_gb=setting["max_kv_gb"],
        probes={"triad_n": setting["triad_n"], "gemm": setting["gemm_n"], "reps": setting["reps"]},
        models={
            "Mixtral": setting["mixtral"] | {"experts": 8, "top_k": 2},
            "Qwen1.5-MoE": setting["qwen"] | {"experts": 60, "top_k": 4, "shared": 1},
            "sci-moe": setting["scimoe"],
        },
        vocab=setting["vocab"],
    )
    print(
        f"moe_cap: torch {machine['torch']}, {machine['cpu']}, device {device}, "
        f"{torch.get_num_threads()} threads, seeds {seeds}, git {machine['git']}"
    )
    other = OtherLoad()
    rows: list[Row] = []
    rounds: list[dict] = []
    hw_name = machine["device_name"] or "this CPU"

    since = [OtherLoad()]  # the load since the previous probe round

    def peaks_round() -> None:
        probe = OtherLoad()
        r = measure_peaks(device, setting["triad_n"], setting["gemm_n"], setting["reps"])
        rounds.append(r)
        i = len(rounds) - 1
        for k, v in r.items():
            unit = "GFLOP/s" if k.startswith("flops") else "GB/s"
            rows.append(Row(f"peak round {i}", k, v * 1e-9, unit))
        for name, load in (("other_cpu_fraction", probe), ("other_cpu_fraction_since", since[0])):
            rows.append(
                Row(f"peak round {i}", name, load.report()["other_cpu_fraction"] or 0.0, "fraction")
            )
        since[0] = OtherLoad()
        print(
            f"peaks round {i}: triad {r['triad'] / 1e9:.1f} GB/s, best bandwidth "
            f"{r['bandwidth'] / 1e9:.1f} GB/s, "
            + ", ".join(
                f"{k[6:]} {v / 1e9:.1f} GFLOP/s" for k, v in r.items() if k.startswith("flops")
            )
        )

    peaks_round()
    results: dict[tuple, dict] = {}  # (model, dtype, batch, ctx, seed) -> run
    specs: dict[str, ModelSpec] = {}
    fid: dict[str, dict] = {}

    def block(kind: str, seed: int, cells: Callable[[str], list[tuple[int, int]]]) -> None:
        model, spec = build_model(kind, setting, seed, device)
        specs[kind] = spec
        for dtype in DTYPES:
            if dtype == "bfloat16":
                model, f = fidelity(model, kind, ctx0, seed)
                if seed == args.seed:
                    fid[kind] = f
            for batch, ctx in cells(kind):
                if kv_gb(spec, batch, ctx, dtype) > setting["max_kv_gb"]:
                    continue
                steps = setting["steps_small" if batch <= 8 else "steps"]
                if kind == "sci-moe":
                    run = decode_scimoe(model, batch, steps, setting["warmup"], seed)
                else:
                    run = decode_hf(model, batch, ctx, steps, setting["warmup"], seed)
                results[(kind, dtype, batch, ctx, seed)] = run
                print(
                    f"  {kind:12s} {dtype:9s} seed {seed} B={batch:<4d} L={ctx:<5d} "
                    f"tpot {1e3 * np.median(run['latency']):8.2f} ms  activated "
                    f"{run['activated'].mean():.1f}"
                )
        del model

    def grid(kind):
        ctxs = (0,) if kind == "sci-moe" else setting["contexts"]
        return [(b, c) for c in ctxs for b in setting["batches"]]

    def seed_cells(kind):
        c = 0 if kind == "sci-moe" else ctx0
        return [(b, c) for b in setting["seed_batches"]]

    for kind in MODELS:
        block(kind, args.seed, grid)
        peaks_round()
    for seed in seeds:
        if seed == args.seed:
            continue
        for kind in MODELS:
            block(kind, seed, seed_cells)
        peaks_round()

    hw = hardware_from_rounds(rounds, hw_name)
    rows.append(Row("peak", "bandwidth", hw.peak_bandwidth * 1e-9, "GB/s"))
    for dtype, v in hw.peak_flops.items():
        rows.append(Row("peak", f"flops_{dtype}", v * 1e-9, "GFLOP/s"))
    for k in ("triad", "bandwidth", *(f"flops_{d}" for d in hw.peak_flops)):
        vals = [r[k] for r in rounds]
        rows.append(Row("peak", f"{k}_spread", (max(vals) - min(vals)) / max(vals), "fraction"))
    machine["hardware"] = hw.to_dict()

    summaries: dict[tuple, dict] = {}
    for (kind, dtype, batch, ctx, seed), run in results.items():
        lm_head = kind != "sci-moe"
        s = summarise(specs[kind], hw, run, batch=batch, ctx=ctx, dtype=dtype, lm_head=lm_head)
        summaries[(kind, dtype, batch, ctx, seed)] = s
        if seed == args.seed:
            rows += cell_rows(cell_case(kind, dtype, batch, ctx), s)
        c0 = 0 if kind == "sci-moe" else ctx0
        if ctx == c0 and batch in setting["seed_batches"]:
            rows += cell_rows(cell_case(kind, dtype, batch, ctx, seed), s)
    for kind, spec in specs.items():
        rows.append(Row(kind, "total_params", float(spec.total_params), "parameters"))
        rows.append(Row(kind, "active_params", float(spec.active_params), "parameters"))
        for dtype in DTYPES:
            rows.append(Row(f"{kind} {dtype}", "weights_gb", weights_gb(spec, dtype), "GB"))
        for k, v in fid[kind].items():
            rows.append(Row(f"{kind} bfloat16", k, v, "fraction"))

    report(summaries, setting, args.seed, ctx0)
    doc = {"machine": machine, "rows": [r.__dict__ for r in rows]}
    verdict_list = verdicts(doc)
    for v in verdict_list:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  {v['claim']}")
    if args.plots is not None:
        plot_utilisation(
            doc, args.plots / f"moe_cap{'_quick' if args.quick else ''}_utilisation.png"
        )
        plot_radar(doc, args.plots / f"moe_cap{'_quick' if args.quick else ''}_radar.png")
        print(f"plots in {args.plots}")
    machine["contention"] = other.report()
    print(
        f"total {machine['contention']['wall_s']:.0f} s; other processes used "
        f"{machine['contention']['other_cpu_s']} CPU s"
    )
    if args.json is not None:
        write_json(args.json, "moe_cap", machine, rows, verdicts=verdict_list)
        print(f"wrote {args.json}")
    return 0


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


def weights_gb(spec: ModelSpec, dtype: str) -> float:
    """Weights counted by the spec (embeddings included), GB."""
    from sci_moe.moe.cap import bytes_per_param

    return spec.total_params * bytes_per_param(dtype) / 1e9


def report(summaries: dict, setting: dict, seed: int, ctx0: int) -> None:
    """Print the grid of the main seed."""
    table = []
    for (kind, dtype, batch, ctx, s), v in sorted(summaries.items(), key=lambda kv: str(kv[0])):
        if s != seed:
            continue
        table.append(
            [
                f"{kind} {dtype} B={batch} L={ctx}",
                v["tpot_ms"],
                100 * v["activated_fraction"],
                100 * v["s_mbu"],
                100 * v["dense_mbu"],
                100 * v["topk_mbu"],
                100 * v["s_mfu"],
                100 * v["dense_mfu"],
            ]
        )
    print_table(
        ["workload", "TPOT ms", "act %", "S-MBU %", "MBU %", "top-k MBU %", "S-MFU %", "MFU %"],
        table,
        title="\nmedian over the timed steps, against the peaks measured in this run",
    )


# --------------------------------------------------------------------------- verdicts


def _cells(doc: dict, metric: str, *, seed, batches=None, dtypes=DTYPES, models=MODELS) -> list:
    """Values of ``metric`` of the seed-replicated cells of ``seed`` (shortest context)."""
    m = doc["machine"]
    ctx0 = m["contexts"][0]
    batches = m["seed_batches"] if batches is None else batches
    out = []
    for kind in models:
        for dtype in dtypes:
            for b in batches:
                c = 0 if kind == "sci-moe" else ctx0
                case = cell_case(kind, dtype, b, c, seed)
                found = [r for r in doc["rows"] if r["case"] == case and r["metric"] == metric]
                if found:
                    out.append(found[0]["value"])
    return out


def _grid_max(doc: dict, metric: str) -> tuple[float, str]:
    found = [
        (r["value"], r["case"])
        for r in doc["rows"]
        if r["metric"] == metric and " B=" in r["case"] and " seed " not in r["case"]
    ]
    return max(found)


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim, by fixed rules on the stored rows (issue 47).

    Every per-seed figure comes from the seed-replicated cells (shortest context, batches
    ``machine.seed_batches``, both dtypes, the three models); a paired t-test over the
    seeds (:func:`_common.decide_verdict`, alpha 0.05) compares it with its bound. Nothing
    is trained here (random weights; the claims are about measurement), so ``converged``
    does not apply and is set true: the test alone decides what is decisive.

    1. *S-MBU is a physically possible utilisation*: per seed, the largest per-step S-MBU
       over the cells is below 100 % of the measured peak bandwidth. Contradicted outright
       when any cell of the full grid exceeds 100 %.
    2. *S-MFU likewise*, against the measured peak FLOPs.
    3. *Dense MBU overstates sparse decoding*: per seed, the smallest per-step maximum of
       dense MBU over the models at batch 1 exceeds 100 % of the measured peak (an
       impossible value, so dense accounting misleads in every model). Judged in the dtypes
       the device computes natively (``machine.bf16_native``: both on CUDA; float32 only
       on a CPU without AVX512-BF16/AMX, where bfloat16 weights are converted in the
       kernels, so bfloat16 decoding is compute-bound and no bandwidth metric can reach its
       peak).
    4. *Dense MFU overstates sparse decoding*: per seed, the smallest dense-MFU maximum at
       the largest batch (where compute matters) over models and dtypes exceeds 100 %.
    5. *Top-k accounting understates batched decoding*: per seed, the smallest ratio
       S-MBU / top-k MBU over models and dtypes at the largest batch exceeds 1.5 (a batch
       activates far more experts than one token's k).
    6. *A small batch activates a large share of the experts* (the paper: 46.79 % for
       Qwen1.5-MoE at batch 8): per seed, the smallest ratio of the activated-expert
       fraction at batch 8 to one token's ``k / E`` over the models exceeds 2.
    7. *The CAP trade-off* (systems optimise two of cost, accuracy, performance): not
       decided here -- random weights have no task accuracy; the radar shows memory,
       fidelity to float32 and TPOT of the float32 and bfloat16 deployments.
    """
    m = doc["machine"]
    seeds = m["seeds"]
    big = max(m["seed_batches"])
    out = []

    def decide(claim, metric, ours, bound, higher, expect, note):
        return decide_verdict(
            claim,
            metric=metric,
            ours=ours,
            baseline=f"bound {bound:g}",
            baseline_values=[bound] * len(ours),
            higher_is_better=higher,
            converged=True,
            expect=expect,
            note=note,
        )

    for key, what in (("s_mbu", "peak bandwidth"), ("s_mfu", "peak FLOPs")):
        ours = [max(_cells(doc, f"{key}_max", seed=s)) for s in seeds]
        top, where = _grid_max(doc, f"{key}_max")
        v = decide(
            f"{key.upper().replace('_', '-')} never exceeds 100 % of the {what} measured "
            "in the run",
            f"largest per-step {key} over the seed cells",
            ours,
            1.0,
            False,
            "better",
            f"largest over the full grid {top:.3g} ({where}); no training, converged n/a",
        )
        if top > 1.0:
            v = verdict_entry(
                v["claim"],
                verdict="contradicted",
                why=v["why"] + "; a grid cell exceeds 100 %",
                metric=v["metric"],
                ours=v["ours"],
                baseline=v["baseline"],
                baseline_value=v["baseline_value"],
                seeds=v["seeds"],
                p_value=v["p_value"],
                converged=True,
                decisive=False,
            )
        out.append(v)

    native = DTYPES if m.get("bf16_native") else ("float32",)
    ours = [min(_cells(doc, "dense_mbu_max", seed=s, batches=[1], dtypes=native)) for s in seeds]
    ratio = [
        min(
            a / b
            for a, b in zip(
                _cells(doc, "dense_mbu", seed=s, batches=[1], dtypes=native),
                _cells(doc, "s_mbu", seed=s, batches=[1], dtypes=native),
                strict=True,
            )
        )
        for s in seeds
    ]
    out.append(
        decide(
            "dense MBU (all experts counted as read) overstates the bandwidth use of sparse "
            "decoding: above 100 % of the measured peak at batch 1 in every model (in the "
            "dtypes the device computes natively)",
            "smallest per-step max of dense MBU at batch 1",
            ours,
            1.0,
            True,
            "better",
            f"dtypes judged: {', '.join(native)}; dense MBU / S-MBU at batch 1 at least "
            f"{min(ratio):.3g} in every cell; no training, converged n/a",
        )
    )
    ours = [min(_cells(doc, "dense_mfu_max", seed=s, batches=[big])) for s in seeds]
    out.append(
        decide(
            f"dense MFU (every expert computed for every token) overstates the compute use of "
            f"sparse decoding: above 100 % of the measured peak at batch {big} in every model "
            "and dtype",
            f"smallest per-step max of dense MFU at batch {big}",
            ours,
            1.0,
            True,
            "better",
            "no training, converged n/a",
        )
    )
    ours = [
        min(
            a / b
            for a, b in zip(
                _cells(doc, "s_mbu", seed=s, batches=[big]),
                _cells(doc, "topk_mbu", seed=s, batches=[big]),
                strict=True,
            )
        )
        for s in seeds
    ]
    act = [min(_cells(doc, "activated_fraction", seed=s, batches=[big])) for s in seeds]
    out.append(
        decide(
            f"counting only one token's top-k experts understates batched decoding: S-MBU / "
            f"top-k MBU above 1.5 at batch {big} in every model and dtype",
            f"smallest S-MBU / top-k MBU at batch {big}",
            ours,
            1.5,
            True,
            "better",
            f"smallest activated-expert fraction at batch {big}: {min(act):.3g}; no training, "
            "converged n/a",
        )
    )
    k_over_e = {
        "Mixtral": 2 / 8,
        "Qwen1.5-MoE": 4 / 60,
        "sci-moe": m["models"]["sci-moe"]["top_k"] / m["models"]["sci-moe"]["experts"],
    }
    ours = []
    for s in seeds:
        ours.append(
            min(
                min(
                    _cells(
                        doc,
                        "activated_fraction",
                        seed=s,
                        batches=[8],
                        models=[k],
                        dtypes=["float32"],
                    )
                )
                / k_over_e[k]
                for k in MODELS
            )
        )
    qwen8 = _cells(
        doc,
        "activated_fraction",
        seed=seeds[0],
        batches=[8],
        models=["Qwen1.5-MoE"],
        dtypes=["float32"],
    )
    out.append(
        decide(
            "a batch of 8 already activates a large share of the experts: activated fraction "
            "above twice one token's k / E in every model",
            "smallest (activated fraction at batch 8) / (k / E)",
            ours,
            2.0,
            True,
            "better",
            f"Qwen1.5-MoE-shaped at batch 8: {qwen8[0]:.3g} of the routed experts (the paper: "
            "0.4679 for the real Qwen1.5-MoE; random routers here); no training, converged n/a",
        )
    )
    radar = radar_systems(doc)
    best_all = sum(
        all(
            s[a] == (max if hi else min)(t[a] for t in radar)
            for a, hi in (("cost", False), ("accuracy", True), ("performance", False))
        )
        for s in radar
    )
    out.append(
        verdict_entry(
            "MoE systems optimise two of cost, accuracy and performance at the expense of the "
            "third (the CAP trade-off)",
            verdict="not decided",
            why=f"{best_all} of {len(radar)} deployments (model x dtype at batch 1) are best on "
            "all three radar axes; but the claim is about serving systems (vLLM, SGLang, "
            "K-Transformers, MoE-Infinity) and task accuracy, and random weights have none: "
            "the radar's accuracy axis is fidelity to float32, its cost the memory",
            metric="deployments best on all three axes",
            ours=float(best_all),
            baseline="none expected",
            baseline_value=0.0,
            seeds=1,
            p_value=None,
            converged=True,
            decisive=False,
        )
    )
    return out


# ------------------------------------------------------------------------------ plots


def radar_systems(doc: dict) -> list[dict]:
    """The radar's systems: every model x dtype at batch 1, shortest context.

    ``cost``: weights, GB; ``accuracy``: fidelity to float32 (1 for
    float32); ``performance``: TPOT, s.
    """
    m = doc["machine"]
    out = []
    for kind in MODELS:
        c = 0 if kind == "sci-moe" else m["contexts"][0]
        for dtype in DTYPES:
            case = cell_case(kind, dtype, 1, c)
            tpot = row_value(doc, case, "tpot_ms") / 1e3
            mem = row_value(doc, f"{kind} {dtype}", "weights_gb")
            acc = 1.0 if dtype == "float32" else row_value(doc, f"{kind} bfloat16", "fidelity")
            out.append(
                {"name": f"{kind} {dtype}", "cost": mem, "accuracy": acc, "performance": tpot}
            )
    return out


def plot_radar(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = radar_systems(doc)

    def span(x: float) -> float:  # five rings of a round step (1, 2, 2.5 or 5 x 10^n) >= x
        exp = math.floor(math.log10(x / 5))
        step = next(b * 10.0**exp for b in (1, 2, 2.5, 5, 10) if b * 10.0**exp >= x / 5)
        return 5 * step

    cost = span(max(s["cost"] for s in systems))
    tpot = span(max(s["performance"] for s in systems))
    low = 1.0 - span(max(1.1 * (1.0 - min(s["accuracy"] for s in systems)), 1e-4))
    axes = (
        RadarAxis("cost", "Cost: weights (GB)", False, (cost, 0.0)),
        RadarAxis("accuracy", "Accuracy: fidelity to fp32", True, (low, 1.0)),
        RadarAxis("performance", "Performance: TPOT at batch 1 (s)", False, (tpot, 0.0)),
    )
    fig = cap_radar(systems, path, axes=axes, title="CAP radar, measured in this run")
    plt.close(fig)


def plot_utilisation(doc: dict, path: Path) -> None:
    """MBU and MFU (sparse, dense, top-k) against batch, per dtype; activated fraction; TPOT."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = doc["machine"]
    ctx0 = m["contexts"][0]
    colors = dict(zip(MODELS, ("C0", "C1", "C2"), strict=True))
    fig, axs = plt.subplots(2, 3, figsize=(15, 8.5))

    def series(kind, dtype, metric):
        c = 0 if kind == "sci-moe" else ctx0
        xs, ys = [], []
        for b in m["batches"]:
            found = [
                r["value"]
                for r in doc["rows"]
                if r["case"] == cell_case(kind, dtype, b, c) and r["metric"] == metric
            ]
            if found:
                xs.append(b)
                ys.append(found[0])
        return xs, ys

    for row, dtype in enumerate(DTYPES):
        panels = (
            (
                "bandwidth utilisation",
                (
                    ("s_mbu", "-", "S-MBU"),
                    ("dense_mbu", "--", "MBU"),
                    ("topk_mbu", ":", "top-k MBU"),
                ),
            ),
            ("compute utilisation", (("s_mfu", "-", "S-MFU"), ("dense_mfu", "--", "MFU"))),
        )
        for col, (title, metrics) in enumerate(panels):
            ax = axs[row, col]
            for kind in MODELS:
                for metric, ls, label in metrics:
                    xs, ys = series(kind, dtype, metric)
                    ax.plot(
                        xs,
                        [100 * y for y in ys],
                        ls,
                        color=colors[kind],
                        marker="o",
                        ms=3,
                        label=f"{kind} {label}",
                    )
            ax.axhline(100, color="k", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("batch (sequences)")
            ax.set_ylabel(f"% of the measured peak ({dtype})")
            ax.set_title(f"{title}, {dtype}, L={ctx0}")
            ax.legend(fontsize=6, ncol=2)
    ax = axs[0, 2]
    for kind in MODELS:
        xs, ys = series(kind, "float32", "activated_fraction")
        ax.plot(xs, ys, "-o", color=colors[kind], ms=3, label=f"{kind} recorded")
        xs, ys = series(kind, "float32", "activated_uniform")
        ax.plot(xs, ys, ":", color=colors[kind], label=f"{kind} uniform routing")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (sequences)")
    ax.set_ylabel("activated routed-expert fraction")
    ax.set_title("experts a decode step touches")
    ax.legend(fontsize=7)
    ax = axs[1, 2]
    for kind in MODELS:
        for dtype, ls in zip(DTYPES, ("-", "--"), strict=True):
            xs, ys = series(kind, dtype, "tpot_ms")
            ax.plot(xs, ys, ls, color=colors[kind], marker="o", ms=3, label=f"{kind} {dtype}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch (sequences)")
    ax.set_ylabel("time per output token (ms)")
    ax.set_title(f"TPOT, L={ctx0}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
