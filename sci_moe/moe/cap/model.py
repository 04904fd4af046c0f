"""Model descriptions for the MoE-CAP metrics: parameter counts per layer, KV-cache layout.

A :class:`ModelSpec` is what S-MBU and S-MFU need to know about a model: attention
parameters and KV-cache elements per layer, and for every MoE layer the size of one
routed expert, the shared experts and the router. Build it from a transformers-style
``config.json`` (:meth:`ModelSpec.from_config`), from a shipped configuration
(:func:`~sci_moe.moe.cap.load_model`), or from any module holding sci-moe :class:`~sci_moe.moe.MoE`
layers (:meth:`ModelSpec.from_module`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..._util import read_json_file
from ..experts import ExpertBank
from .dtypes import canonical_dtype

__all__ = ["AttentionSpec", "MoELayerSpec", "ModelSpec", "spec_from_dict"]


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class AttentionSpec:
    """Sizes of one attention layer: grouped-query (GQA) or multi-head latent (MLA).

    Parameters
    ----------
    hidden_size : int
        Model width ``d``.
    num_heads, num_kv_heads, head_dim : int
        Query heads ``n_h``, key/value heads ``n_kv`` (``n_kv = n_h`` for MHA) and
        head size ``d_h`` (GQA).
    q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim : int
        Multi-head latent attention (DeepSeek-V2/V3); ``kv_lora_rank > 0`` selects MLA.
        ``q_lora_rank = 0`` means a full-rank query projection.

    Notes
    -----
    GQA parameters (q, k, v, o projections; biases and norms not counted):

    .. math:: S_{attn} = d\\,n_h d_h + 2\\,d\\,n_{kv} d_h + n_h d_h\\,d

    MLA parameters, with :math:`d_{qk} = d_{nope} + d_{rope}` and ranks
    :math:`r_q, r_{kv}`:

    .. math::

        S_{attn} = d\\,r_q + r_q n_h d_{qk} + d\\,(r_{kv} + d_{rope})
                   + r_{kv} n_h (d_{nope} + d_v) + n_h d_v\\,d
    """

    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

    def __post_init__(self) -> None:
        _positive("hidden_size", self.hidden_size)
        _positive("num_heads", self.num_heads)
        _positive("num_kv_heads", self.num_kv_heads)
        _positive("head_dim", self.head_dim)
        for name in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim"):
            _positive(name, getattr(self, name), 0)
        _positive("v_head_dim", self.v_head_dim, 0)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads={self.num_heads} must be a multiple of "
                f"num_kv_heads={self.num_kv_heads} (grouped-query attention)"
            )
        if self.is_mla and (
            self.qk_rope_head_dim + self.qk_nope_head_dim < 1 or not self.v_head_dim
        ):
            raise ValueError(
                "multi-head latent attention (kv_lora_rank > 0) needs qk_rope_head_dim, "
                "qk_nope_head_dim and v_head_dim"
            )

    @property
    def is_mla(self) -> bool:
        """Whether this is multi-head latent attention."""
        return self.kv_lora_rank > 0

    def params(self) -> int:
        """Weights of the q/k/v/o projections, :math:`S_{attn}` (one layer)."""
        d, h = self.hidden_size, self.num_heads
        if not self.is_mla:
            return 2 * d * h * self.head_dim + 2 * d * self.num_kv_heads * self.head_dim
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        if self.q_lora_rank:
            q = d * self.q_lora_rank + self.q_lora_rank * h * qk
        else:
            q = d * h * qk
        kv = d * (self.kv_lora_rank + self.qk_rope_head_dim)
        kv += self.kv_lora_rank * h * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + h * self.v_head_dim * d

    def kv_elements(self) -> int:
        """KV-cache elements per token and layer.

        ``2 n_kv d_h`` (keys and values) for GQA; ``r_kv + d_rope`` (the cached latent
        and the shared rotary key) for MLA.
        """
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def score_flops(self, context_len: float) -> float:
        """Attention-score FLOPs of one query token against ``context_len`` keys (one layer).

        .. math:: F_{score}(L) = 2 n_h d_h L\\ (QK^\\top) + 2 n_h d_h L\\ (AV) = 4 n_h d_h L

        (MLA: :math:`2 n_h (d_{nope} + d_{rope}) L + 2 n_h d_v L`.)
        """
        h = self.num_heads
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            return 2.0 * h * (qk + self.v_head_dim) * context_len
        return 4.0 * h * self.head_dim * context_len


@dataclass(frozen=True)
class MoELayerSpec:
    """Sizes of one MoE layer.

    Parameters
    ----------
    num_experts : int
        Routed experts ``E``.
    top_k : int
        Routed experts per token ``k``.
    expert_params : int
        Parameters of one routed expert, :math:`S_{expert}` (``3 d d_{ff}`` for a SwiGLU
        expert).
    router_params : int
        Parameters of the router, :math:`N_{router}` (``d E``).
    shared_params : int
        Parameters of all shared (always-active) experts together.
    num_shared_experts : int
        Number of shared experts (counted in ``k_expert = top_k + num_shared_experts``).
    """

    num_experts: int
    top_k: int
    expert_params: int
    router_params: int = 0
    shared_params: int = 0
    num_shared_experts: int = 0

    def __post_init__(self) -> None:
        _positive("num_experts", self.num_experts)
        _positive("top_k", self.top_k)
        if self.top_k > self.num_experts:
            raise ValueError(
                f"top_k={self.top_k} exceeds num_experts={self.num_experts}; check the config"
            )
        _positive("expert_params", self.expert_params)
        _positive("router_params", self.router_params, 0)
        _positive("shared_params", self.shared_params, 0)
        _positive("num_shared_experts", self.num_shared_experts, 0)

    @property
    def k_expert(self) -> int:
        """``top_k + num_shared_experts`` (the paper's :math:`k_{expert}`)."""
        return self.top_k + self.num_shared_experts


@dataclass(frozen=True)
class ModelSpec:
    """What the MoE-CAP metrics need to know about a model.

    Parameters
    ----------
    name : str
    num_layers : int
        Transformer blocks :math:`n_{layer}` (each with one attention layer when
        ``attention`` is given).
    hidden_size : int
        Model width ``d``.
    attention : AttentionSpec or None
        The attention layer of every block; ``None`` for models without attention (e.g.
        a stack of sci-moe MoE layers): no attention parameters, FLOPs or KV cache.
    moe_layers : tuple of MoELayerSpec
        One entry per MoE layer, in order.
    dense_params : int
        Always-active parameters outside attention and MoE layers, per token: dense FFN
        blocks (DeepSeek's ``first_k_dense_replace`` layers, Qwen's ``mlp_only_layers``)
        or the other modules of a sci-moe model. Embeddings are not included.
    vocab_size : int
        Vocabulary size ``V`` (used only with ``lm_head=True`` in the metrics).
    tie_word_embeddings : bool
        Input embedding and LM head share weights (affects :attr:`total_params`).
    dtype : str
        Default number format of the weights (``"bfloat16"``).
    note : str
        Where the description comes from.
    """

    name: str
    num_layers: int
    hidden_size: int
    attention: AttentionSpec | None
    moe_layers: tuple[MoELayerSpec, ...]
    dense_params: int = 0
    vocab_size: int = 0
    tie_word_embeddings: bool = False
    dtype: str = "bfloat16"
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _positive("num_layers", self.num_layers)
        _positive("hidden_size", self.hidden_size)
        _positive("dense_params", self.dense_params, 0)
        _positive("vocab_size", self.vocab_size, 0)
        object.__setattr__(self, "moe_layers", tuple(self.moe_layers))
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if self.attention is not None and self.attention.hidden_size != self.hidden_size:
            raise ValueError(
                f"attention.hidden_size={self.attention.hidden_size} differs from "
                f"hidden_size={self.hidden_size}"
            )

    # -- sizes --------------------------------------------------------------------

    @property
    def num_moe_layers(self) -> int:
        """Number of MoE layers."""
        return len(self.moe_layers)

    @property
    def attention_params(self) -> int:
        """:math:`S_{attn}` of one layer (0 without attention)."""
        return 0 if self.attention is None else self.attention.params()

    @property
    def kv_elements_per_token(self) -> int:
        """KV-cache elements per token, all layers together."""
        return 0 if self.attention is None else self.num_layers * self.attention.kv_elements()

    @property
    def embedding_params(self) -> int:
        """Input embedding plus LM head (``V d``, twice unless tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    @property
    def total_params(self) -> int:
        """All parameters counted here (norms and biases are not counted)."""
        moe = sum(
            m.num_experts * m.expert_params + m.shared_params + m.router_params
            for m in self.moe_layers
        )
        attn = self.num_layers * self.attention_params
        return attn + moe + self.dense_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses: top-k routed and shared experts, attention, the rest."""
        moe = sum(
            m.top_k * m.expert_params + m.shared_params + m.router_params for m in self.moe_layers
        )
        attn = self.num_layers * self.attention_params
        return attn + moe + self.dense_params + self.embedding_params

    # -- constructors ------------------------------------------------------------

    @classmethod
    def from_config(
        cls, config: Mapping | str | Path, name: str | None = None, ffn_matrices: int | None = None
    ) -> ModelSpec:
        """Read a transformers-style ``config.json`` (dict or path).

        Keys read: ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
        ``num_key_value_heads``, ``head_dim``, ``intermediate_size``,
        ``moe_intermediate_size``, ``num_local_experts`` / ``num_experts`` /
        ``n_routed_experts``, ``num_experts_per_tok``, ``n_shared_experts``,
        ``shared_expert_intermediate_size``, ``first_k_dense_replace``,
        ``moe_layer_freq``, ``decoder_sparse_step``, ``mlp_only_layers``,
        ``q_lora_rank``, ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``,
        ``v_head_dim``, ``vocab_size``, ``tie_word_embeddings``, ``torch_dtype`` /
        ``dtype``; a nested ``text_config`` is used when present.

        Parameters
        ----------
        config : dict or str or Path
        name : str, optional
            Defaults to ``_name_or_path``, ``model_type`` or the file name.
        ffn_matrices : int, optional
            Weight matrices per FFN/expert: 3 for gated (SwiGLU, the default), 2 for a
            plain MLP. Also read from the config key ``ffn_matrices``.

        Returns
        -------
        ModelSpec
        """
        path = None
        if isinstance(config, (str, Path)):
            path = Path(config)
            config = read_json_file(path, "model config", "is not a file; give a config.json")
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping or a path, got {type(config).__name__}")
        top = config
        if isinstance(config.get("text_config"), Mapping):
            config = {**config, **config["text_config"]}
        return spec_from_dict(config, top, name, ffn_matrices, path)

    @classmethod
    def from_module(
        cls,
        model: nn.Module,
        *,
        name: str | None = None,
        attention: AttentionSpec | None = None,
        num_layers: int | None = None,
        dtype: str | torch.dtype | None = None,
    ) -> ModelSpec:
        """Describe a module that holds sci-moe routed layers.

        Every routed path (:func:`~sci_moe.moe.routed_paths`: each
        :class:`~sci_moe.moe.MoE`, and each path of a field layer exposing
        ``routed_paths()``) becomes one :class:`MoELayerSpec`: ``expert_params`` is the
        bank's stacked parameters (or a container of expert modules) divided by ``E``;
        the shared experts and any non-stacked bank parameters (the frozen base layer of
        :class:`~sci_moe.moe.LoRAExperts`) are ``shared_params``; the router's
        parameters are ``router_params``. All other parameters except ``nn.Embedding``
        tables are ``dense_params``.

        Parameters
        ----------
        model : nn.Module
        name : str, optional
            Defaults to the class name.
        attention : AttentionSpec, optional
            Attention of each block, if the model has attention the walk cannot see.
        num_layers : int, optional
            Blocks (default: the number of MoE layers).
        dtype : str or torch.dtype, optional
            Default: the dtype of the first floating parameter.
        """
        from ..routed import routed_paths

        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        paths = routed_paths(model)
        if not paths:
            raise ValueError(
                f"{type(model).__name__} contains no sci_moe.moe.MoE layer nor any layer "
                "with routed_paths(); describe it with ModelSpec.from_config or "
                "ModelSpec(...) instead"
            )
        counted: set[int] = set()
        moe_specs = []
        for path in paths:
            E = path.num_experts
            bank = path.experts
            if isinstance(bank, ExpertBank):
                stacked = sum(p.numel() for p in bank.parameters(recurse=False))
                rest = sum(p.numel() for p in bank.parameters()) - stacked
                if getattr(path.owner, "dispatcher", None) is not None:
                    stacked *= E // bank.num_experts  # expert parallel: the global bank
            else:  # a container of E expert modules
                stacked, rest = sum(p.numel() for p in bank.parameters()), 0
            shared = rest + (
                0 if path.shared is None else sum(p.numel() for p in path.shared.parameters())
            )
            router = 0 if path.router is None else sum(p.numel() for p in path.router.parameters())
            moe_specs.append(
                MoELayerSpec(
                    num_experts=E,
                    top_k=path.top_k,
                    expert_params=max(1, stacked // E),
                    router_params=router,
                    shared_params=shared,
                    num_shared_experts=path.num_shared_experts,
                )
            )
            for part in (path.router, bank, path.shared):
                if part is not None:
                    counted.update(id(p) for p in part.parameters())
        for m in model.modules():
            if isinstance(m, nn.Embedding):
                counted.update(id(p) for p in m.parameters())
        dense = sum(p.numel() for p in model.parameters() if id(p) not in counted)
        if dtype is None:
            floats = [p.dtype for p in model.parameters() if p.is_floating_point()]
            dtype = floats[0] if floats else torch.get_default_dtype()
        return cls(
            name=name or type(model).__name__,
            num_layers=num_layers or len(moe_specs),
            hidden_size=paths[0].d_model,
            attention=attention,
            moe_layers=tuple(moe_specs),
            dense_params=dense,
            dtype=canonical_dtype(dtype),
            note="from the module's sci-moe routed layers",
        )


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
