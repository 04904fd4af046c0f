"""Transformers-style ``config.json`` -> :class:`~sci_moe.moe.cap.ModelSpec`; shipped configs.

The shipped configurations (``configs/*.json`` in this package) were transcribed by hand
from the models' public ``config.json`` files; nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from .model import AttentionSpec, ModelSpec, MoELayerSpec

__all__ = ["available_models", "load_model", "spec_from_dict"]

_BUILTIN = {
    "mixtral-8x7b": "mixtral-8x7b.json",
    "qwen3-30b-a3b": "qwen3-30b-a3b.json",
    "deepseek-v3": "deepseek-v3.json",
    "olmoe-1b-7b": "olmoe-1b-7b.json",
}


def _get(cfg: Mapping, *keys, default=None):
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            return value
    return default


def spec_from_dict(
    cfg: Mapping,
    top: Mapping | None = None,
    name: str | None = None,
    ffn_matrices: int | None = None,
    path: Path | None = None,
) -> ModelSpec:
    """Build a :class:`ModelSpec` from a config dict (see :meth:`ModelSpec.from_config`).

    A layer ``l`` is an MoE layer when the config has routed experts and
    ``l >= first_k_dense_replace``, ``l % moe_layer_freq == 0`` (DeepSeek),
    ``(l + 1) % decoder_sparse_step == 0`` and ``l`` is not in ``mlp_only_layers``
    (Qwen); other layers have a dense FFN of ``intermediate_size``. The expert size is
    ``moe_intermediate_size`` if present, else ``intermediate_size`` (Mixtral, OLMoE).

    Parameters
    ----------
    cfg : Mapping
        The (text) config.
    top : Mapping, optional
        The outer config (for ``_name_or_path`` and ``sci_moe_note``); default ``cfg``.
    name : str, optional
    ffn_matrices : int, optional
        3 (gated FFN, default) or 2 (plain MLP).
    path : Path, optional
        The file the config came from (for the name and note).
    """
    top = cfg if top is None else top
    missing = [k for k in ("hidden_size", "num_hidden_layers") if cfg.get(k) is None]
    if missing:
        raise ValueError(f"model config lacks {missing}; give a transformers-style config.json")
    d = int(cfg["hidden_size"])
    n_layers = int(cfg["num_hidden_layers"])
    nm = int(ffn_matrices or cfg.get("ffn_matrices") or 3)
    if nm not in (2, 3):
        raise ValueError(f"ffn_matrices must be 2 (MLP) or 3 (gated/SwiGLU), got {nm}")
    heads = cfg.get("num_attention_heads")
    attention = None
    if heads:
        heads = int(heads)
        kv_heads = int(_get(cfg, "num_key_value_heads", default=heads))
        head_dim = int(_get(cfg, "head_dim", default=d // heads))
        mla = {
            k: int(cfg.get(k) or 0)
            for k in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim")
        }
        mla["v_head_dim"] = int(cfg.get("v_head_dim") or 0) if mla["kv_lora_rank"] else 0
        attention = AttentionSpec(d, heads, kv_heads, head_dim, **mla)

    n_experts = int(_get(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0))
    dense_ffn = nm * d * int(cfg.get("intermediate_size") or 0)
    moe_layers: list[MoELayerSpec] = []
    n_dense = n_layers
    if n_experts > 0:
        if cfg.get("num_experts_per_tok") is None:
            raise ValueError("model config has experts but no num_experts_per_tok")
        top_k = int(cfg["num_experts_per_tok"])
        expert_ff = _get(cfg, "moe_intermediate_size", "intermediate_size")
        if expert_ff is None:
            raise ValueError("model config lacks moe_intermediate_size / intermediate_size")
        expert = nm * d * int(expert_ff)
        n_shared = int(cfg.get("n_shared_experts") or 0)
        shared = n_shared * expert
        if cfg.get("shared_expert_intermediate_size"):  # Qwen2-MoE: one wide shared expert
            n_shared = max(n_shared, 1)
            shared = nm * d * int(cfg["shared_expert_intermediate_size"])
        first_dense = int(cfg.get("first_k_dense_replace") or 0)
        freq = int(_get(cfg, "moe_layer_freq", default=1))
        step = int(_get(cfg, "decoder_sparse_step", default=1))
        mlp_only = set(cfg.get("mlp_only_layers") or ())
        if freq < 1 or step < 1:
            raise ValueError("moe_layer_freq and decoder_sparse_step must be >= 1")
        spec = MoELayerSpec(n_experts, top_k, expert, d * n_experts, shared, n_shared)
        for layer in range(n_layers):
            is_moe = (
                layer >= first_dense
                and layer % freq == 0
                and (layer + 1) % step == 0
                and layer not in mlp_only
            )
            if is_moe:
                moe_layers.append(spec)
        n_dense = n_layers - len(moe_layers)
    if n_dense and not dense_ffn:
        raise ValueError("model config has dense FFN layers but no intermediate_size")
    dtype = _get(cfg, "torch_dtype", "dtype", default="bfloat16")
    if name is None:
        name = _get(top, "_name_or_path", "model_type", default=path.stem if path else "model")
    return ModelSpec(
        name=str(name),
        num_layers=n_layers,
        hidden_size=d,
        attention=attention,
        moe_layers=tuple(moe_layers),
        dense_params=n_dense * dense_ffn,
        vocab_size=int(cfg.get("vocab_size") or 0),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        dtype=str(dtype),
        note=str(top.get("sci_moe_note", "")) or (f"from {path}" if path else "from a config"),
    )


def available_models() -> list[str]:
    """Names of the shipped model configurations."""
    return sorted(_BUILTIN)


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A shipped model (:func:`available_models`) or a ``config.json`` path.

    Parameters
    ----------
    name_or_path : str or Path
        ``"mixtral-8x7b"``, ``"qwen3-30b-a3b"``, ``"deepseek-v3"``, ``"olmoe-1b-7b"``
        (case-insensitive), or a path to a transformers-style JSON config.

    Returns
    -------
    ModelSpec
    """
    key = str(name_or_path).strip().lower()
    if key in _BUILTIN:
        text = resources.files(__package__).joinpath("configs").joinpath(_BUILTIN[key]).read_text()
        return ModelSpec.from_config(json.loads(text), name=key)
    path = Path(name_or_path)
    if path.suffix.lower() == ".json" or path.exists():
        return ModelSpec.from_config(path)
    raise ValueError(
        f"unknown model {str(name_or_path)!r}; use one of {available_models()} "
        "or the path of a config.json"
    )
