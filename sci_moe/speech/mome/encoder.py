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
padding never changes a real frame's encoding. The Matryoshka compression
(:func:`~sci_moe.speech.mome.compress`) is applied to its output ``h``, so one encoder
serves every rate, as the paper's frozen encoder does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["EncoderConfig", "SpeechEncoder"]


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
    """

    dim: int = 128
    layers: int = 2
    heads: int = 4
    ff_mult: int = 2
    kernel: int = 5
    subsample: int = 2
    dropout: float = 0.1

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

        ``T`` must be a multiple of :attr:`subsample` (the data set pads to it).

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
        s = self.config.subsample
        if T % s:
            raise ValueError(
                f"the sequence length {T} is not a multiple of subsample={s}; pad the frames"
            )
        mask = mask.bool()
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
