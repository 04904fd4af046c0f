"""A small decoder-only transformer LM whose FFNs are :class:`~sci_moe.moe.MoE` layers."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch
import torch.nn.functional as F
from torch import nn

from ..moe import MoE, MoEConfig, MoEInfo, SharedExperts
from .data import VOCAB_SIZE
from .mamba import MambaBlock, MambaConfig, RoMBlock, RoMConfig

__all__ = ["MoELMConfig", "MoETransformerLM"]


@dataclass
class MoELMConfig:
    """Configuration of a :class:`MoETransformerLM`.

    Parameters
    ----------
    vocab_size : int
        256 for the byte-level corpus of :mod:`sci_moe.language.data`.
    d_model, n_layers, n_heads, seq_len : int
        Width, depth, attention heads (``d_model % n_heads == 0``) and the longest
        context (size of the learned position table).
    d_hidden : int
        Hidden size of each (SwiGLU) expert.
    num_experts, top_k : int
        Routed experts per MoE layer and experts per token.
    dense_first_layer : bool
        Make the first block's FFN a dense SwiGLU of hidden size ``top_k * d_hidden``
        (the same active parameters as an MoE layer), as in the Default MoE paper.
    tie_embeddings : bool
        Share the token embedding with the output head.
    moe : dict
        Extra :class:`~sci_moe.moe.MoE` options for every MoE layer, e.g.
        ``default_moe``, ``default_beta``, ``default_scored``, ``orthogonality_coef``,
        ``variance_coef``, ``load_balance_coef``, ``z_loss_coef``, ``selection_bias``,
        ``bias_update_rate``, ``score``. Validated here by building an
        :class:`~sci_moe.moe.MoEConfig`.
    layers : str
        Sequence mixer of each block, one letter per layer: ``"a"`` causal
        self-attention, ``"m"`` Mamba (:class:`~sci_moe.language.mamba.MambaBlock`),
        ``"r"`` Routing Mamba (:class:`~sci_moe.language.mamba.RoMBlock`). Empty (the
        default) means attention everywhere; ``"mama"`` is a hybrid stack.
    mamba : dict
        Options of the Mamba/RoM mixers: :class:`~sci_moe.language.mamba.RoMConfig`
        fields (``d_state``, ``d_conv``, ``expand``, ``num_experts``, ``top_k``,
        ``routing``, ``router``, ``load_balance_coef``, ...; RoM's ``num_experts`` and
        ``top_k`` default to this config's) and ``ffn`` (bool, default ``False``):
        whether Mamba/RoM blocks also get an FFN (attention blocks always do).
    positions : bool
        Learned position embeddings (default). ``False`` (for Mamba stacks) drops them,
        and with them the ``seq_len`` limit on inputs.
    """

    vocab_size: int = VOCAB_SIZE
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    seq_len: int = 64
    d_hidden: int = 64
    num_experts: int = 8
    top_k: int = 2
    dense_first_layer: bool = False
    tie_embeddings: bool = True
    moe: dict = field(default_factory=dict)
    layers: str = ""
    mamba: dict = field(default_factory=dict)
    positions: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "seq_len", "d_hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.num_experts < 1:
            raise ValueError(f"num_experts must be >= 1, got {self.num_experts}")
        if not 1 <= self.top_k <= self.num_experts:
            raise ValueError(
                f"top_k must be in [1, num_experts={self.num_experts}], got {self.top_k}"
            )
        if self.dense_first_layer and self.n_layers < 2:
            raise ValueError("dense_first_layer needs n_layers >= 2 (else there is no MoE)")
        if not isinstance(self.moe, dict):
            raise TypeError(f"moe must be a dict of MoE options, got {type(self.moe).__name__}")
        reserved = {"d_model", "num_experts", "top_k", "d_hidden"} & set(self.moe)
        if reserved:
            raise ValueError(f"set {sorted(reserved)} as MoELMConfig fields, not in moe")
        self.moe_config()  # validates the options
        if self.layers and (len(self.layers) != self.n_layers or set(self.layers) - set("amr")):
            raise ValueError(
                f"layers={self.layers!r} must have one letter of 'a' (attention), 'm' (Mamba), "
                f"'r' (Routing Mamba) per layer (n_layers={self.n_layers})"
            )
        if not isinstance(self.mamba, dict):
            raise TypeError(f"mamba must be a dict of options, got {type(self.mamba).__name__}")
        for kind in set(self.layers) - {"a"}:
            self.mixer_config(kind)  # validates the options

    def layer_kind(self, i: int) -> str:
        """Mixer letter of block ``i`` (``"a"``, ``"m"`` or ``"r"``)."""
        return self.layers[i] if self.layers else "a"

    def has_ffn(self, i: int) -> bool:
        """Whether block ``i`` has an FFN (attention blocks always; Mamba ones if asked)."""
        return self.layer_kind(i) == "a" or bool(self.mamba.get("ffn", False))

    def mixer_config(self, kind: str) -> MambaConfig:
        """The :class:`MambaConfig` (``"m"``) or :class:`RoMConfig` (``"r"``) of a mixer."""
        opts = {k: v for k, v in self.mamba.items() if k != "ffn"}
        if kind == "m":
            rom_only = {f.name for f in fields(RoMConfig)} - {f.name for f in fields(MambaConfig)}
            opts = {k: v for k, v in opts.items() if k not in rom_only}
            return MambaConfig(d_model=self.d_model, **opts)
        opts.setdefault("num_experts", self.num_experts)
        opts.setdefault("top_k", self.top_k)
        return RoMConfig(d_model=self.d_model, **opts)

    def moe_config(self) -> MoEConfig:
        """The :class:`~sci_moe.moe.MoEConfig` of each MoE layer."""
        names = {f.name for f in fields(MoEConfig)}
        opts = {k: v for k, v in self.moe.items() if k in names}
        router = {**opts.pop("router", {}), **{k: v for k, v in self.moe.items() if k not in names}}
        return MoEConfig(
            d_model=self.d_model,
            num_experts=self.num_experts,
            top_k=self.top_k,
            d_hidden=self.d_hidden,
            expert="glu",
            check_finite=False,
            router=router,
            **opts,
        )


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with :func:`F.scaled_dot_product_attention`."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, C // self.n_heads).unbind(2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))`` then ``x + ffn(norm(x))``."""

    def __init__(self, cfg: MoELMConfig, dense: bool, kind: str = "a", ffn: bool = True) -> None:
        super().__init__()
        self.kind = kind
        self.norm1 = nn.LayerNorm(cfg.d_model)
        if kind == "a":
            self.attn: nn.Module = CausalSelfAttention(cfg.d_model, cfg.n_heads)
        elif kind == "m":
            self.attn = MambaBlock(cfg.mixer_config("m"))
        else:
            self.attn = RoMBlock(cfg.mixer_config("r"))
        if not ffn:
            self.ffn = None
            return
        self.norm2 = nn.LayerNorm(cfg.d_model)
        if dense:
            # dense SwiGLU of the same active size
            self.ffn: nn.Module = SharedExperts(cfg.d_model, cfg.top_k * cfg.d_hidden)
        else:
            self.ffn = MoE(cfg.moe_config())

    @property
    def is_moe(self) -> bool:
        return isinstance(self.ffn, MoE)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, MoEInfo | None, MoEInfo | None]:
        """``(x, info of the MoE FFN or None, info of a RoM mixer or None)``."""
        mixer_info = None
        if self.kind == "r":
            a, mixer_info = self.attn(self.norm1(x))
        else:
            a = self.attn(self.norm1(x))
        x = x + a
        if self.ffn is None:
            return x, None, mixer_info
        h = self.norm2(x)
        if self.is_moe:
            y, info = self.ffn(h, return_routing=True)
        else:
            y, info = self.ffn(h), None
        return x + y, info, mixer_info


class MoETransformerLM(nn.Module):
    """Decoder-only transformer LM with MoE FFNs.

    Token and learned position embeddings, ``n_layers`` pre-norm blocks (causal
    self-attention + :class:`~sci_moe.moe.MoE` FFN, optionally a dense first FFN), a
    final LayerNorm and a linear head (tied to the token embedding by default).

    Parameters
    ----------
    config : MoELMConfig

    Examples
    --------
    >>> model = MoETransformerLM(MoELMConfig(d_model=32, n_layers=2, seq_len=16))
    >>> logits, aux, infos = model(torch.zeros(2, 16, dtype=torch.long))
    >>> logits.shape, len(infos)
    (torch.Size([2, 16, 256]), 2)
    """

    def __init__(self, config: MoELMConfig) -> None:
        super().__init__()
        self.config = c = config
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.seq_len, c.d_model) if c.positions else None
        self.blocks = nn.ModuleList(
            Block(c, (i == 0 and c.dense_first_layer), c.layer_kind(i), c.has_ffn(i))
            for i in range(c.n_layers)
        )
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.apply(self._init)
        if c.tie_embeddings:
            self.head.weight = self.tok.weight

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def moe_layers(self) -> list[MoE]:
        """The MoE FFNs, in depth order."""
        return [b.ffn for b in self.blocks if b.is_moe]

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[MoEInfo]]:
        """Next-token logits for token ids ``idx`` of shape ``(B, T)``, ``T <= seq_len``.

        Returns
        -------
        logits : Tensor, shape (B, T, vocab_size)
        aux_loss : Tensor, scalar
            Sum over MoE layers (and Routing Mamba mixers) of :attr:`MoEInfo.aux_loss`
            (add it to the LM loss).
        infos : list of MoEInfo
            One per MoE layer, in depth order.
        """
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (batch, time), got {tuple(idx.shape)}")
        T = idx.shape[1]
        x = self.tok(idx)
        if self.pos is not None:
            if T > self.config.seq_len:
                raise ValueError(f"sequence length {T} exceeds seq_len={self.config.seq_len}")
            x = x + self.pos(torch.arange(T, device=idx.device))
        infos: list[MoEInfo] = []
        aux = x.new_zeros(())
        for block in self.blocks:
            x, info, mixer_info = block(x)
            if info is not None:
                infos.append(info)
                aux = aux + info.aux_loss
            if mixer_info is not None:  # Routing Mamba's router losses
                aux = aux + mixer_info.aux_loss
        return self.head(self.norm(x)), aux, infos

    def loss(
        self, idx: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, list[MoEInfo]]:
        """Mean next-token cross-entropy (nats), the aux loss and the routing infos."""
        logits, aux, infos = self(idx)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return ce, aux, infos
