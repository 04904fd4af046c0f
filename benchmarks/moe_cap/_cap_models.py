"""The models of ``run.py`` and their decoding: settings, construction, timed decode steps.

Mixtral and Qwen1.5-MoE (transformers, random weights from a config) and a stack of
sci-moe :class:`~sci_moe.moe.MoE` layers, sized by :data:`SETTINGS`; one decode step per
sequence against a filled ``StaticCache``, each step timed alone (seconds) with the experts
it activated recorded from the routers; the bfloat16 fidelity of a float32 model. A helper
module: ``run.py`` imports it.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _cap_peaks import _sync
from torch import nn

from sci_moe.moe import MoE
from sci_moe.moe.cap import CapRecorder, ModelSpec

__all__ = [
    "DTYPES",
    "MODELS",
    "SETTINGS",
    "MoEStack",
    "build_model",
    "decode_hf",
    "decode_scimoe",
    "fidelity",
    "hf_config",
    "model_width",
]


DTYPES = ("float32", "bfloat16")


MODELS = ("Mixtral", "Qwen1.5-MoE", "sci-moe")


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
