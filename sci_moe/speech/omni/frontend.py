"""Causal STFT front end, log-magnitude features and the ideal ratio mask (IRM).

The Omni-Expert paper (Saha et al., NeurIPS 2025) uses ACE-like causal features: 8 ms
frames with 2 ms overlap at 16 kHz, 65 frequency bins (a 128-point FFT). Frame ``t``
covers samples ``[t H, t H + L)`` (``L`` = 128, ``H`` = 96), so a mask for frame ``t``
needs no future samples beyond the frame. A periodic Hamming window (no zeros) keeps the
weighted overlap-add inverse exact wherever a frame covers a sample.

IRM (paper Eq. 1), with ``S`` the direct-path STFT and ``N = X - S`` the reverberant part:

.. math:: M(t, f) = \\Big(\\frac{|S|^2}{|S|^2 + |N|^2}\\Big)^{1/2}, \\qquad \\hat S = M \\odot X
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "FeatureNormalizer",
    "FrontEndConfig",
    "apply_mask",
    "causal_context",
    "ideal_ratio_mask",
    "istft",
    "log_magnitude",
    "log_spectral_distance",
    "stft",
]


@dataclass(frozen=True)
class FrontEndConfig:
    """Frame settings of the causal STFT.

    Parameters
    ----------
    sample_rate : int
        Hz (the paper: 16000).
    frame_ms, hop_ms : float
        Frame length and hop in ms (the paper: 8 ms frames, 2 ms overlap -> 6 ms hop).
    """

    sample_rate: int = 16000
    frame_ms: float = 8.0
    hop_ms: float = 6.0

    def __post_init__(self):
        if self.sample_rate <= 0:
            raise ValueError(f"sample_rate must be > 0 Hz, got {self.sample_rate}")
        if not 0 < self.hop_ms <= self.frame_ms:
            raise ValueError(
                f"need 0 < hop_ms <= frame_ms, got hop_ms={self.hop_ms}, frame_ms={self.frame_ms}"
            )
        if self.frame_length < 4:
            raise ValueError(f"frame_ms={self.frame_ms} gives under 4 samples: use longer frames")

    @property
    def frame_length(self) -> int:
        """Samples per frame ``L`` (also the FFT size)."""
        return round(self.sample_rate * self.frame_ms / 1000)

    @property
    def hop_length(self) -> int:
        """Samples between frame starts ``H``."""
        return round(self.sample_rate * self.hop_ms / 1000)

    @property
    def n_bins(self) -> int:
        """Frequency bins ``L // 2 + 1`` (65 at the paper's settings)."""
        return self.frame_length // 2 + 1

    def window(self) -> np.ndarray:
        """Periodic Hamming window of length ``L``."""
        n = np.arange(self.frame_length)
        return 0.54 - 0.46 * np.cos(2 * np.pi * n / self.frame_length)

    def n_frames(self, n_samples: int) -> int:
        """Frames for a signal of ``n_samples`` (the last one zero-padded)."""
        L, H = self.frame_length, self.hop_length
        return 1 + max(0, -(-(n_samples - L) // H))


def stft(audio: np.ndarray, config: FrontEndConfig | None = None) -> np.ndarray:
    """Causal short-time Fourier transform.

    Parameters
    ----------
    audio : numpy.ndarray, shape (n_samples,)
    config : FrontEndConfig, optional

    Returns
    -------
    numpy.ndarray, shape (n_frames, n_bins), complex128
        Frame ``t`` = ``rfft(w * x[t H : t H + L])`` (zero-padded at the end).
    """
    cfg = config or FrontEndConfig()
    x = np.asarray(audio, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"audio must be a non-empty 1-D array, got shape {x.shape}")
    L, H = cfg.frame_length, cfg.hop_length
    T = cfg.n_frames(x.size)
    pad = np.zeros((T - 1) * H + L)
    pad[: x.size] = x
    idx = np.arange(T)[:, None] * H + np.arange(L)[None, :]
    return np.fft.rfft(pad[idx] * cfg.window(), axis=1)


def istft(spec: np.ndarray, length: int, config: FrontEndConfig | None = None) -> np.ndarray:
    """Weighted overlap-add inverse of :func:`stft`.

    .. math:: x[n] = \\frac{\\sum_t w[n - tH]\\, \\mathrm{irfft}(X_t)[n - tH]}{\\sum_t w^2[n - tH]}

    Parameters
    ----------
    spec : numpy.ndarray, shape (n_frames, n_bins), complex
    length : int
        Samples to return.
    config : FrontEndConfig, optional

    Returns
    -------
    numpy.ndarray, shape (length,), float64
    """
    cfg = config or FrontEndConfig()
    spec = np.asarray(spec)
    if spec.ndim != 2 or spec.shape[1] != cfg.n_bins:
        raise ValueError(f"spec must have shape (n_frames, {cfg.n_bins}), got {spec.shape}")
    L, H = cfg.frame_length, cfg.hop_length
    w = cfg.window()
    frames = np.fft.irfft(spec, n=L, axis=1) * w
    T = spec.shape[0]
    n = (T - 1) * H + L
    out, env = np.zeros(n), np.zeros(n)
    for t in range(T):  # T adds of L samples: cheap next to the FFTs
        out[t * H : t * H + L] += frames[t]
        env[t * H : t * H + L] += w**2
    out = np.divide(out, env, out=np.zeros_like(out), where=env > 1e-12)
    if length > n:
        out = np.concatenate([out, np.zeros(length - n)])
    return out[:length]


def ideal_ratio_mask(direct: np.ndarray, reverberant: np.ndarray) -> np.ndarray:
    """IRM of a reverberant STFT with the direct path as target (paper Eq. 1).

    Parameters
    ----------
    direct, reverberant : numpy.ndarray, shape (n_frames, n_bins), complex
        STFTs of the direct-path signal ``S`` and the reverberant signal ``X``.

    Returns
    -------
    numpy.ndarray, shape (n_frames, n_bins), float in [0, 1]
        ``sqrt(|S|^2 / (|S|^2 + |X - S|^2))``; 1 where both are zero.
    """
    if direct.shape != reverberant.shape:
        raise ValueError(f"direct {direct.shape} and reverberant {reverberant.shape} differ")
    s2 = np.abs(direct) ** 2
    n2 = np.abs(reverberant - direct) ** 2
    tot = s2 + n2
    return np.sqrt(np.divide(s2, tot, out=np.ones_like(s2), where=tot > 0))


def apply_mask(
    reverberant: np.ndarray, mask: np.ndarray, config: FrontEndConfig | None = None
) -> np.ndarray:
    """Waveform of ``M * X`` (the reverberant STFT's phase kept), same length as the input.

    Parameters
    ----------
    reverberant : numpy.ndarray, shape (n_samples,)
    mask : numpy.ndarray, shape (n_frames, n_bins)
        Real gains (e.g. an estimated or the ideal ratio mask).
    config : FrontEndConfig, optional

    Returns
    -------
    numpy.ndarray, shape (n_samples,)
    """
    X = stft(reverberant, config)
    if mask.shape != X.shape:
        raise ValueError(f"mask has shape {mask.shape} but the STFT has {X.shape}")
    return istft(np.asarray(mask) * X, len(reverberant), config)


def log_magnitude(spec: np.ndarray, floor: float = 1e-5) -> np.ndarray:
    """``log(|X| + floor)``, shape of ``spec`` (float)."""
    return np.log(np.abs(spec) + floor)


def log_spectral_distance(
    reference: np.ndarray,
    estimate: np.ndarray,
    config: FrontEndConfig | None = None,
    dynamic_range_db: float = 40.0,
) -> float:
    r"""Log-spectral distance in dB between two waveforms, over the reference's active frames.

    .. math:: \mathrm{LSD} = \frac{1}{|A|} \sum_{t \in A} \Big(\frac{1}{F} \sum_f
       \big(20 \log_{10} |S_{tf}| - 20 \log_{10} |\hat S_{tf}|\big)^2\Big)^{1/2}

    ``A``: frames whose energy is within ``dynamic_range_db`` of the loudest reference
    frame; magnitudes floored at -100 dB re the reference's peak bin.

    Parameters
    ----------
    reference, estimate : numpy.ndarray, shape (n_samples,)
    config : FrontEndConfig, optional
    dynamic_range_db : float

    Returns
    -------
    float
        dB (lower is closer).
    """
    if np.shape(reference) != np.shape(estimate):
        raise ValueError(
            f"reference {np.shape(reference)} and estimate {np.shape(estimate)} differ"
        )
    S, E = np.abs(stft(reference, config)), np.abs(stft(estimate, config))
    floor = S.max() * 1e-5
    if floor == 0:
        raise ValueError("reference is silent")
    energy = 10 * np.log10(np.sum(S**2, axis=1) + 1e-300)
    active = energy >= energy.max() - dynamic_range_db
    d = 20 * np.log10(np.maximum(S, floor)) - 20 * np.log10(np.maximum(E, floor))
    return float(np.mean(np.sqrt(np.mean(d[active] ** 2, axis=1))))


def causal_context(features: np.ndarray, context: int) -> np.ndarray:
    """Stack each frame with its ``context - 1`` predecessors (zeros before the start).

    Parameters
    ----------
    features : numpy.ndarray, shape (n_frames, n_bins)
    context : int
        Frames per row, the current one last.

    Returns
    -------
    numpy.ndarray, shape (n_frames, context, n_bins)
        Row ``t`` holds frames ``t - context + 1 ... t``: only the past and present.
    """
    if context < 1:
        raise ValueError(f"context must be >= 1 frame, got {context}")
    T, F = features.shape
    pad = np.concatenate([np.zeros((context - 1, F), features.dtype), features])
    idx = np.arange(T)[:, None] + np.arange(context)[None, :]
    return pad[idx]


@dataclass
class FeatureNormalizer:
    """Global per-bin mean/std normalisation (fit on training frames only).

    Attributes
    ----------
    mean, std : numpy.ndarray, shape (n_bins,)
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, features: np.ndarray) -> FeatureNormalizer:
        """Fit on ``features`` of shape ``(n_frames, n_bins)``."""
        f = np.asarray(features, dtype=np.float64)
        if f.ndim != 2 or f.shape[0] < 2:
            raise ValueError(f"fit needs (n_frames >= 2, n_bins) features, got {f.shape}")
        return cls(f.mean(0), np.maximum(f.std(0), 1e-6))

    def __call__(self, features: np.ndarray) -> np.ndarray:
        """Normalised features, same shape."""
        return (features - self.mean) / self.std
