"""Options of the MoE language model's training: the engine's config and the flat
``sci-moe train lm`` config with the model's fields."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..moe import MoEConfig
from ..train import TrainConfig as EngineConfig
from .model import MoELMConfig

__all__ = ["LMConfig", "TrainConfig"]


@dataclass
class TrainConfig(EngineConfig):
    """Options of :func:`train`: the engine's (:class:`sci_moe.train.TrainConfig`) and these.

    The defaults differ from the engine's where the LM needs it: 300 steps of 16 windows,
    peak LR 3e-3 with a 10 % warm-up and cosine decay, AdamW with betas (0.9, 0.95) and
    weight decay 0.1 on matrices, evaluation every 50 steps, and the final (not the best)
    weights kept (``restore_best=False``). ``monitor`` is ``val_loss``. ``device`` is the
    engine's (``None``, the default: the process group's device, the ``LOCAL_RANK`` GPU
    under ``torchrun`` with NCCL and the CPU elsewhere; ``"cpu"``, ``"cuda"``,
    ``"cuda:N"``): the model, every batch and the fixed validation windows go there.

    Parameters
    ----------
    eval_batches : int
        Validation batches of ``batch_size`` fixed windows each.
    bias_balancing : float or None
        Rate of the auxiliary-loss-free bias update (:class:`~sci_moe.moe.BiasBalancer`),
        used when the MoE layers have ``selection_bias=True``; ``None`` takes each router's
        ``bias_update_rate``.
    val_fraction : float
        Validation share of each document stream (see :func:`load_corpus`).
    expert_parallel : bool
        Shard every MoE FFN's experts over the processes of a ``torchrun`` run (needs >= 2
        processes, ``num_experts`` and ``batch_size`` divisible by their number).
    """

    steps: int = 300
    batch_size: int = 16
    lr: float = 3e-3
    warmup: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eval_every: int = 50
    restore_best: bool = False
    eval_batches: int = 4
    bias_balancing: float | None = None
    val_fraction: float = 0.1
    expert_parallel: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.eval_batches, bool) or not isinstance(self.eval_batches, int):
            raise ValueError(f"eval_batches must be an integer, got {self.eval_batches!r}")
        if self.eval_batches < 1:
            raise ValueError(f"eval_batches must be >= 1, got {self.eval_batches}")
        if self.bias_balancing is not None and not (
            isinstance(self.bias_balancing, int | float) and self.bias_balancing >= 0
        ):
            raise ValueError(
                f"bias_balancing must be a number >= 0 or None, got {self.bias_balancing!r}"
            )
        if not (isinstance(self.val_fraction, int | float) and 0.0 < self.val_fraction < 1.0):
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction!r}")
        if not isinstance(self.expert_parallel, bool):
            raise ValueError(f"expert_parallel must be true or false, got {self.expert_parallel!r}")


_MOE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(MoEConfig)}


@dataclass
class LMConfig(TrainConfig):
    """Everything of ``sci-moe train lm``: the training options and the model's, flat.

    :meth:`model_config` turns the model fields into a :class:`MoELMConfig`; MoE and
    Mamba options left at their defaults are not written into its ``moe`` / ``mamba``
    dicts.

    Parameters
    ----------
    d_model : int
        Width of the model.
    n_layers : int
        Blocks.
    n_heads : int
        Attention heads (``d_model`` divisible by it).
    seq_len : int
        Tokens (bytes) per training window and the longest context.
    d_hidden : int
        Hidden size of each SwiGLU expert.
    num_experts : int
        Routed experts per MoE layer.
    top_k : int
        Experts per token.
    dense_first_layer : bool
        A dense SwiGLU of the same active size as the first block's FFN.
    tie_embeddings : bool
        Share the token embedding with the output head.
    layers : str
        Sequence mixer per block, one letter each: ``a`` attention, ``m`` Mamba, ``r``
        Routing Mamba (empty: attention everywhere).
    positions : bool
        Learned position embeddings (turn off for Mamba stacks).
    load_balance_coef : float
        Weight of the MoE layers' load-balancing loss.
    z_loss_coef : float
        Weight of the router z-loss.
    default_moe : bool
        Default MoE: an EMA default output for the experts a token does not select.
    default_beta : float
        Default MoE's EMA decay.
    default_scored : bool
        Default MoE: weight the defaults by the router scores.
    orthogonality_coef : float
        Weight of the expert-specialisation orthogonality loss L_o.
    variance_coef : float
        Weight of the routing-variance loss L_v.
    selection_bias : bool
        Auxiliary-loss-free balancing: a selection bias per expert, updated after each step.
    score : str
        Router score function (``softmax``, ``sigmoid``, ...).
    d_state : int or None
        Mamba/RoM state size (``none``: the mixer's default).
    expand : int or None
        Mamba/RoM inner expansion (``none``: the mixer's default).
    mamba_experts : int or None
        Routing Mamba experts (``none``: ``num_experts``).
    mamba_top_k : int or None
        Routing Mamba experts per token (``none``: ``top_k``).
    mamba_routing : str or None
        Routing Mamba's routing of the projections (``none``: the mixer's default).
    mamba_ffn : bool
        Give Mamba/RoM blocks an FFN too.
    text_file : str or None
        Train on this UTF-8 text file (split by ``val_fraction``) instead of the corpus
        shipped in gensim's wheel.
    init_from : str or None
        Start from the weights of this checkpoint or model file (fine-tuning; the
        optimiser and step start afresh).
    """

    d_model: int = MoELMConfig.d_model
    n_layers: int = MoELMConfig.n_layers
    n_heads: int = MoELMConfig.n_heads
    seq_len: int = MoELMConfig.seq_len
    d_hidden: int = MoELMConfig.d_hidden
    num_experts: int = MoELMConfig.num_experts
    top_k: int = MoELMConfig.top_k
    dense_first_layer: bool = MoELMConfig.dense_first_layer
    tie_embeddings: bool = MoELMConfig.tie_embeddings
    layers: str = MoELMConfig.layers
    positions: bool = MoELMConfig.positions
    load_balance_coef: float = _MOE_DEFAULTS["load_balance_coef"]
    z_loss_coef: float = _MOE_DEFAULTS["z_loss_coef"]
    default_moe: bool = _MOE_DEFAULTS["default_moe"]
    default_beta: float = _MOE_DEFAULTS["default_beta"]
    default_scored: bool = _MOE_DEFAULTS["default_scored"]
    orthogonality_coef: float = _MOE_DEFAULTS["orthogonality_coef"]
    variance_coef: float = _MOE_DEFAULTS["variance_coef"]
    selection_bias: bool = False
    score: str = "softmax"
    d_state: int | None = None
    expand: int | None = None
    mamba_experts: int | None = None
    mamba_top_k: int | None = None
    mamba_routing: str | None = None
    mamba_ffn: bool = False
    text_file: str | None = None
    init_from: str | None = None

    _MOE_KEYS = (
        "load_balance_coef",
        "z_loss_coef",
        "default_moe",
        "default_beta",
        "default_scored",
        "orthogonality_coef",
        "variance_coef",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("text_file", "init_from"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value):
                raise ValueError(f"{name} must be a file path, got {value!r}")
        self.model_config()  # validates the model fields (messages name them)

    def model_config(self) -> MoELMConfig:
        """The :class:`MoELMConfig` of these fields."""
        moe = {k: getattr(self, k) for k in self._MOE_KEYS if getattr(self, k) != _MOE_DEFAULTS[k]}
        if self.selection_bias:
            moe["selection_bias"] = True
        if self.score != "softmax":
            moe["score"] = self.score
        mamba = {}
        if set(self.layers) - {"a"}:
            for key, name in (
                ("d_state", "d_state"),
                ("expand", "expand"),
                ("num_experts", "mamba_experts"),
                ("top_k", "mamba_top_k"),
                ("routing", "mamba_routing"),
            ):
                if getattr(self, name) is not None:
                    mamba[key] = getattr(self, name)
            if self.mamba_ffn:
                mamba["ffn"] = True
        return MoELMConfig(
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            seq_len=self.seq_len,
            d_hidden=self.d_hidden,
            num_experts=self.num_experts,
            top_k=self.top_k,
            dense_first_layer=self.dense_first_layer,
            tie_embeddings=self.tie_embeddings,
            moe=moe,
            layers=self.layers,
            mamba=mamba,
            positions=self.positions,
        )
