r"""A small trainable speech encoder: convolutional subsampling + transformer layers.

MoME (Cappellazzo et al., NeurIPS 2025) feeds the LLM the tokens of a *pretrained* audio
encoder (Whisper) and video encoder (AV-HuBERT); no such encoder ships offline here, so
the standard stand-in of small-scale ASR recipes is trained from scratch with the
adapters: a convolutional front end that subsamples the log-mel frames (as Whisper's and
Conformer's do, here by ``subsample``), sinusoidal positions, and a few pre-norm
transformer encoder layers,

.. math::

    u = \mathrm{GELU}(\mathrm{Conv}_{k, s}(x)),\quad
    v = \mathrm{GELU}(\mathrm{Conv}_{k, 1}(u)) + \mathrm{PE},\quad
    h = \mathrm{LN}(\mathrm{Transformer}^{L}(v)),

with padding frames zeroed after each convolution and masked out of the attention, so
padding never changes a real frame's encoding. In training mode the input frames can be
masked first, SpecAugment-style (Park et al. 2019, without time warping; :func:`spec_mask`):
``time_masks`` spans of up to ``time_mask_width`` frames and ``freq_masks`` bands of up to
``freq_mask_width`` features per utterance are set to zero (the per-utterance mean of the
normalised log-mels), off by default and never in eval mode. The Matryoshka compression
(:func:`~sci_moe.speech.mome.compress`) is applied to its output ``h``, so one encoder
serves every rate, as the paper's frozen encoder does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ARCHITECTURE_FIELDS", "EncoderConfig", "SpeechEncoder", "spec_mask"]

#: The :class:`EncoderConfig` fields that fix the weights' shapes and meaning (the others,
#: dropout and masking, act in training only).
ARCHITECTURE_FIELDS = ("dim", "layers", "heads", "ff_mult", "kernel", "subsample")


def _int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass
class EncoderConfig:
    """Options of a :class:`SpeechEncoder`.

    Parameters
    ----------
    dim : int
        Width of the encoder (channels of the convolutions, model size of the layers).
    layers : int
        Transformer encoder layers after the convolutions (0: convolutions only).
    heads : int
        Attention heads; must divide ``dim``.
    ff_mult : int
        Feed-forward width of each layer in multiples of ``dim``.
    kernel : int
        Odd kernel size of both convolutions.
    subsample : int
        Stride of the first convolution: output frames per input frame is ``1 / subsample``
        (2 turns 100 log-mel frames/s into 50 tokens/s, Whisper's rate).
    dropout : float
        Dropout inside the transformer layers, in [0, 1).
    time_masks : int
        Time masks per utterance in training mode (0: none), >= 0.
    time_mask_width : int
        Largest width of a time mask in input frames (each width uniform in
        ``0..time_mask_width``), >= 0.
    time_mask_ratio : float
        A time mask covers at most this fraction of the utterance's real frames, in
        (0, 1] (SpecAugment's upper bound ``p``; short utterances keep most frames).
    freq_masks : int
        Feature (frequency) masks per utterance in training mode (0: none), >= 0.
    freq_mask_width : int
        Largest width of a feature mask in features (bins), >= 0.
    """

    dim: int = 128
    layers: int = 2
    heads: int = 4
    ff_mult: int = 2
    kernel: int = 5
    subsample: int = 2
    dropout: float = 0.1
    time_masks: int = 0
    time_mask_width: int = 20
    time_mask_ratio: float = 0.2
    freq_masks: int = 0
    freq_mask_width: int = 8

    def __post_init__(self) -> None:
        _int("dim", self.dim, 1)
        _int("layers", self.layers, 0)
        _int("heads", self.heads, 1)
        _int("ff_mult", self.ff_mult, 1)
        _int("kernel", self.kernel, 1)
        _int("subsample", self.subsample, 1)
        if self.kernel % 2 == 0:
            raise ValueError(f"kernel must be odd (same padding), got {self.kernel}")
        if self.dim % self.heads:
            raise ValueError(f"heads={self.heads} must divide dim={self.dim}")
        d = self.dropout
        if isinstance(d, bool) or not isinstance(d, int | float) or not 0 <= d < 1:
            raise ValueError(f"dropout must be a number in [0, 1), got {d!r}")
        for name in ("time_masks", "time_mask_width", "freq_masks", "freq_mask_width"):
            _int(name, getattr(self, name), 0)
        r = self.time_mask_ratio
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= 1:
            raise ValueError(f"time_mask_ratio must be a number in (0, 1], got {r!r}")

    def architecture(self) -> dict:
        """The fields that fix the weights (:data:`ARCHITECTURE_FIELDS`) as a dict."""
        return {k: getattr(self, k) for k in ARCHITECTURE_FIELDS}


def _spans(
    lengths: torch.Tensor, count: int, width: torch.Tensor, size: int, generator
) -> torch.Tensor:
    """``(B, size)`` bool: True where one of ``count`` random spans per row falls, each of
    width uniform in ``0..width[b]`` and start uniform in ``0..lengths[b] - w``."""
    B = lengths.shape[0]
    pos = torch.arange(size)
    hit = torch.zeros(B, size, dtype=torch.bool)
    for _ in range(count):
        w = (torch.rand(B, generator=generator) * (width + 1)).floor().long()
        w = torch.minimum(w, lengths)
        start = (torch.rand(B, generator=generator) * (lengths - w + 1)).floor().long()
        hit |= (pos >= start[:, None]) & (pos < (start + w)[:, None])
    return hit


def spec_mask(
    x: torch.Tensor,
    mask: torch.Tensor,
    *,
    time_masks: int = 0,
    time_width: int = 0,
    freq_masks: int = 0,
    freq_width: int = 0,
    time_ratio: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Zero random time spans and feature bands of each utterance (SpecAugment masking).

    Per utterance ``b`` with ``n_b = mask[b].sum()`` real frames (the real frames come
    first, padding last), each of ``time_masks`` spans has a width ``w`` drawn uniformly
    from ``0..min(time_width, floor(time_ratio * n_b))`` and a start uniformly from
    ``0..n_b - w``; each of ``freq_masks`` bands has a width uniform in
    ``0..freq_width`` (at most ``d``) and a start uniform in ``0..d - w``. Masked values
    are set to zero, the mean of per-utterance normalised log-mels. Padding is left as
    it is.

    Parameters
    ----------
    x : Tensor, shape (B, T, d)
        Input frames.
    mask : Tensor, shape (B, T), bool
        Real frames.
    time_masks, freq_masks : int
        Number of time spans and feature bands per utterance, >= 0.
    time_width, freq_width : int
        Largest span width in frames and largest band width in features, >= 0.
    time_ratio : float
        Largest fraction of an utterance's real frames one span covers, in (0, 1].
    generator : torch.Generator, optional
        Source of the draws (CPU); default torch's global generator, which the training
        engine seeds and checkpoints, so a run stays a function of its seed.

    Returns
    -------
    Tensor, shape (B, T, d)
        ``x`` with the spans and bands zeroed (``x`` itself when no mask is asked for).

    Examples
    --------
    >>> x, m = torch.ones(2, 50, 8), torch.ones(2, 50, dtype=torch.bool)
    >>> y = spec_mask(x, m, time_masks=1, time_width=10, freq_masks=1, freq_width=3,
    ...               generator=torch.Generator().manual_seed(0))
    >>> y.shape, bool((y == 0).any()), bool(((y == 0) | (y == x)).all())
    (torch.Size([2, 50, 8]), True, True)
    """
    if x.dim() != 3 or mask.shape != x.shape[:2]:
        raise ValueError(
            f"x must be (B, T, d) and mask (B, T), got {tuple(x.shape)}, {tuple(mask.shape)}"
        )
    for name, v in (("time_masks", time_masks), ("time_width", time_width),
                    ("freq_masks", freq_masks), ("freq_width", freq_width)):  # fmt: skip
        _int(name, v, 0)
    if isinstance(time_ratio, bool) or not isinstance(time_ratio, int | float):
        raise ValueError(f"time_ratio must be a number in (0, 1], got {time_ratio!r}")
    if not 0 < time_ratio <= 1:
        raise ValueError(f"time_ratio must be a number in (0, 1], got {time_ratio!r}")
    B, T, d = x.shape
    if not (time_masks and time_width) and not (freq_masks and freq_width):
        return x
    keep = torch.ones(B, T, d, dtype=torch.bool)
    if time_masks and time_width:
        n = mask.bool().sum(1).cpu()
        cap = torch.minimum(torch.full_like(n, time_width), (time_ratio * n).floor().long())
        keep &= ~_spans(n, time_masks, cap, T, generator).unsqueeze(-1)
    if freq_masks and freq_width:
        full = torch.full((B,), d, dtype=torch.long)
        cap = torch.full((B,), min(freq_width, d), dtype=torch.long)
        keep &= ~_spans(full, freq_masks, cap, d, generator).unsqueeze(1)
    return x * keep.to(device=x.device, dtype=x.dtype)


def _positions(length: int, dim: int, device) -> torch.Tensor:
    """Sinusoidal position encodings ``(length, dim)`` (Vaswani et al. 2017)."""
    pos = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(1e4) / dim)
    )
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return pe


class SpeechEncoder(nn.Module):
    """Conv subsampling + sinusoidal positions + pre-norm transformer layers.

    Parameters
    ----------
    d_in : int
        Features per input frame (40 log-mel bins, 22 viseme classes).
    config : EncoderConfig

    Examples
    --------
    >>> enc = SpeechEncoder(40, EncoderConfig(dim=16, layers=1, heads=2, subsample=2))
    >>> x, mask = torch.randn(3, 20, 40), torch.ones(3, 20, dtype=torch.bool)
    >>> h, m = enc(x, mask)
    >>> h.shape, m.shape
    (torch.Size([3, 10, 16]), torch.Size([3, 10]))
    """

    def __init__(self, d_in: int, config: EncoderConfig | None = None) -> None:
        super().__init__()
        c = self.config = EncoderConfig() if config is None else config
        _int("d_in", d_in, 1)
        p = c.kernel // 2
        self.conv = nn.ModuleList(
            [
                nn.Conv1d(d_in, c.dim, c.kernel, stride=c.subsample, padding=p),
                nn.Conv1d(c.dim, c.dim, c.kernel, padding=p),
            ]
        )
        self.layers: nn.TransformerEncoder | None = None
        if c.layers:
            layer = nn.TransformerEncoderLayer(
                c.dim,
                c.heads,
                c.ff_mult * c.dim,
                c.dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            self.layers = nn.TransformerEncoder(layer, c.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(c.dim)

    @property
    def subsample(self) -> int:
        """Input frames per output frame."""
        return self.config.subsample

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode ``(B, T, d_in)`` frames with their ``(B, T)`` bool mask.

        ``T`` must be a multiple of :attr:`subsample` (the data set pads to it). In
        training mode the frames are first masked as the config asks (:func:`spec_mask`
        with torch's global generator); in eval mode never.

        Returns
        -------
        h : Tensor, shape (B, T // subsample, dim)
            Padding positions are zero.
        mask : Tensor, shape (B, T // subsample), bool
            An output frame is real if any of its input frames is.
        """
        if x.dim() != 3 or mask.shape != x.shape[:2]:
            raise ValueError(
                f"x must be (B, T, d) and mask (B, T), got {tuple(x.shape)}, {tuple(mask.shape)}"
            )
        B, T, _ = x.shape
        c = self.config
        s = c.subsample
        if T % s:
            raise ValueError(
                f"the sequence length {T} is not a multiple of subsample={s}; pad the frames"
            )
        mask = mask.bool()
        if self.training and (c.time_masks or c.freq_masks):
            x = spec_mask(x, mask, time_masks=c.time_masks, time_width=c.time_mask_width,
                          freq_masks=c.freq_masks, freq_width=c.freq_mask_width,
                          time_ratio=c.time_mask_ratio)  # fmt: skip
        out_mask = mask.reshape(B, T // s, s).any(-1)
        keep = out_mask.unsqueeze(1).to(x.dtype)
        h = (x * mask.unsqueeze(-1).to(x.dtype)).transpose(1, 2)
        for conv in self.conv:  # padding stays zero: it reaches no real frame
            h = F.gelu(conv(h)) * keep
        h = h.transpose(1, 2)
        h = h + _positions(h.shape[1], h.shape[2], h.device).to(h.dtype)
        if self.layers is not None:
            h = self.layers(h, src_key_padding_mask=~out_mask)
        h = self.norm(h)
        return h * out_mask.unsqueeze(-1).to(h.dtype), out_mask
