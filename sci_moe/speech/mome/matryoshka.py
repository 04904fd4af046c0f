r"""Matryoshka compression of token sequences: average pooling or stacking at a rate.

A sequence of ``T`` frames ``x_1..x_T`` is compressed at rate ``r`` into ``T / r`` tokens,
either by **average pooling** (the mean of each window of ``r`` real frames, same width)
or by **stacking** (the ``r`` frames of a window concatenated, width ``r d``), as
Llama-MTSK and MoME do for audio and video tokens. Rates are given per modality
(:class:`MatryoshkaRates`); training visits every rate combination in one step and
inference uses any one of them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

__all__ = ["COMPRESSION_MODES", "MatryoshkaRates", "compress", "compress_mask", "rate_label"]

#: Compression modes of :func:`compress`.
COMPRESSION_MODES = ("avg", "stack")


def _check_rate(rate) -> int:
    if isinstance(rate, bool) or not isinstance(rate, int) or rate < 1:
        raise ValueError(f"compression rate must be an integer >= 1, got {rate!r}")
    return rate


def compress_mask(mask: torch.Tensor, rate: int) -> torch.Tensor:
    """Token mask after compression: a window is real if any of its frames is.

    Parameters
    ----------
    mask : Tensor, shape (B, T), bool
    rate : int
        Must divide ``T``.

    Returns
    -------
    Tensor, shape (B, T // rate), bool
    """
    rate = _check_rate(rate)
    B, T = mask.shape
    if T % rate:
        raise ValueError(
            f"rate {rate} does not divide the sequence length {T}; pad the frames to a "
            "multiple of every rate (the speech data set pads to their least common multiple)"
        )
    return mask.reshape(B, T // rate, rate).any(-1)


def compress(
    x: torch.Tensor, rate: int, mode: str = "avg", mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    r"""Compress ``(B, T, d)`` frames at ``rate``.

    .. math::

        \mathrm{avg}: z_j = \frac{\sum_{t \in w_j} m_t x_t}{\max(1, \sum_{t \in w_j} m_t)},
        \qquad \mathrm{stack}: z_j = [x_{(j-1)r+1}; \dots; x_{jr}]

    with ``w_j`` the ``j``-th window of ``rate`` frames and ``m`` the frame mask (padding
    frames are excluded from the mean, zeroed when stacked). Rate 1 returns ``x``
    unchanged.

    Parameters
    ----------
    x : Tensor, shape (B, T, d)
    rate : int
        Must divide ``T`` (pad first).
    mode : {"avg", "stack"}
    mask : Tensor, shape (B, T), bool, optional
        Real frames.

    Returns
    -------
    z : Tensor, shape (B, T // rate, d) for "avg", (B, T // rate, rate * d) for "stack"
    mask : Tensor, shape (B, T // rate), bool, or None

    Examples
    --------
    >>> x = torch.arange(8.0).reshape(1, 4, 2)
    >>> compress(x, 2)[0]
    tensor([[[1., 2.],
             [5., 6.]]])
    >>> compress(x, 2, "stack")[0].shape
    torch.Size([1, 2, 4])
    """
    rate = _check_rate(rate)
    if mode not in COMPRESSION_MODES:
        raise ValueError(f"mode must be one of {COMPRESSION_MODES}, got {mode!r}")
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, d), got {tuple(x.shape)}")
    B, T, d = x.shape
    if mask is not None and mask.shape != (B, T):
        raise ValueError(f"mask must have shape {(B, T)}, got {tuple(mask.shape)}")
    new_mask = None if mask is None else compress_mask(mask, rate)
    if rate == 1:
        return x, new_mask
    if T % rate:
        compress_mask(torch.ones(B, T, dtype=torch.bool), rate)  # raises the message
    if mask is not None:
        x = x * mask.unsqueeze(-1).to(x.dtype)
    w = x.reshape(B, T // rate, rate, d)
    if mode == "stack":
        return w.reshape(B, T // rate, rate * d), new_mask
    if mask is None:
        return w.mean(2), None
    count = mask.reshape(B, T // rate, rate).sum(-1, keepdim=True).clamp_min(1).to(x.dtype)
    return w.sum(2) / count, new_mask


def rate_label(rates: Mapping[str, int]) -> str:
    """A stable label of one rate combination, e.g. ``"audio=4,video=2"``."""
    return ",".join(f"{m}={r}" for m, r in sorted(rates.items()))


@dataclass
class MatryoshkaRates:
    """Compression rates per modality, and the combinations training visits.

    Parameters
    ----------
    rates : dict of str to sequence of int
        E.g. ``{"audio": (4, 8, 16)}`` or ``{"audio": (4, 16), "video": (1, 2)}``.
    mode : {"avg", "stack"}
        How :func:`compress` reduces each modality.
    paired : bool
        Pair the modalities' rates position by position (audio 1 with video 1, audio 2
        with video 2, ...) instead of taking every combination; every modality then needs
        the same number of rates.

    Examples
    --------
    >>> MatryoshkaRates({"audio": (4, 16), "video": (1, 2)}).labels()
    ['audio=4,video=1', 'audio=4,video=2', 'audio=16,video=1', 'audio=16,video=2']
    """

    rates: dict = field(default_factory=lambda: {"audio": (4, 8, 16)})
    mode: str = "avg"
    paired: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.rates, Mapping) or not self.rates:
            raise ValueError("rates must be a non-empty dict of modality -> rates")
        clean = {}
        for m, rs in self.rates.items():
            if isinstance(rs, int):
                rs = (rs,)
            rs = tuple(_check_rate(r) for r in rs)
            if not rs or len(set(rs)) != len(rs):
                raise ValueError(f"rates of {m!r} must be distinct and non-empty, got {rs}")
            clean[str(m)] = rs
        self.rates = clean
        if not isinstance(self.paired, bool):
            raise ValueError(f"paired must be true or false, got {self.paired!r}")
        if self.paired and len({len(rs) for rs in clean.values()}) > 1:
            raise ValueError(
                f"paired rates need as many rates per modality, got {clean}; "
                "give equal-length rate lists or paired=False"
            )
        if self.mode not in COMPRESSION_MODES:
            raise ValueError(f"mode must be one of {COMPRESSION_MODES}, got {self.mode!r}")

    @property
    def modalities(self) -> tuple[str, ...]:
        """Modality names, in the given order."""
        return tuple(self.rates)

    def combinations(self) -> list[dict[str, int]]:
        """Every rate combination: the Cartesian product over modalities, or the
        position-wise pairs with :attr:`paired`."""
        mods = self.modalities
        if self.paired:
            return [dict(zip(mods, c, strict=True)) for c in zip(*self.rates.values(), strict=True)]
        return [dict(zip(mods, c, strict=True)) for c in itertools.product(*self.rates.values())]

    def labels(self) -> list[str]:
        """:func:`rate_label` of every combination, in :meth:`combinations` order."""
        return [rate_label(c) for c in self.combinations()]

    def multiple(self, modality: str) -> int:
        """Least common multiple of a modality's rates (pad its frames to a multiple)."""
        return math.lcm(*self.rates[modality])
