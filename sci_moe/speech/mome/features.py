r"""Audio front end: additive noise at a chosen SNR and log-mel filterbank features.

* :func:`add_noise`: ``y = s + \alpha n`` with ``\alpha`` set so that
  ``10 \log_{10}(P_s / P_{\alpha n}) = \mathrm{SNR}`` (powers are means of squares over the
  utterance), white Gaussian noise from a seeded generator.
* :func:`log_mel`: Hann-windowed STFT (25 ms window, 10 ms hop at 16 kHz), power
  spectrum, an HTK-scale triangular mel filterbank (Slaney-style area normalisation is
  *not* applied), ``log(mel + 1e-6)``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["FRAME_RATE", "add_noise", "log_mel", "mel_filterbank"]

#: Log-mel frames per second produced by :func:`log_mel` (10 ms hop).
FRAME_RATE = 100


def add_noise(
    audio: np.ndarray, snr_db: float | None, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Add white Gaussian noise at ``snr_db`` decibels (``None`` or ``inf``: clean copy).

    Parameters
    ----------
    audio : numpy.ndarray, shape (n_samples,)
    snr_db : float or None
        Signal-to-noise ratio in dB of the returned signal.
    rng : numpy.random.Generator, optional
        Source of the noise (a fresh ``default_rng(0)`` when omitted).

    Returns
    -------
    numpy.ndarray, shape (n_samples,), float32

    Examples
    --------
    >>> s = np.sin(np.linspace(0, 100, 16000)).astype(np.float32)
    >>> y = add_noise(s, 10.0, np.random.default_rng(0))
    >>> round(float(10 * np.log10(np.mean(s**2) / np.mean((y - s) ** 2))), 6)
    10.0
    """
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1 or audio.size == 0:
        raise ValueError(f"audio must be a non-empty 1-D waveform, got shape {audio.shape}")
    if snr_db is None or (isinstance(snr_db, float) and math.isinf(snr_db) and snr_db > 0):
        return audio.copy()
    if not math.isfinite(float(snr_db)):
        raise ValueError(f"snr_db must be finite (or None/inf for clean audio), got {snr_db}")
    rng = np.random.default_rng(0) if rng is None else rng
    noise = rng.standard_normal(audio.shape[0])
    p_signal = float(np.mean(audio.astype(np.float64) ** 2))
    if p_signal == 0.0:
        raise ValueError("audio is silent (zero power): an SNR is undefined")
    p_noise = float(np.mean(noise**2))
    scale = math.sqrt(p_signal / (p_noise * 10.0 ** (float(snr_db) / 10.0)))
    return (audio + scale * noise).astype(np.float32)


def mel_filterbank(n_mels: int, n_fft: int, sample_rate: int, f_min: float = 20.0) -> torch.Tensor:
    r"""Triangular filters on the HTK mel scale ``m = 2595 \log_{10}(1 + f / 700)``.

    Parameters
    ----------
    n_mels, n_fft, sample_rate : int
    f_min : float
        Lowest edge in Hz (the highest is the Nyquist frequency).

    Returns
    -------
    Tensor, shape (n_mels, n_fft // 2 + 1), float32
    """
    if n_mels < 1 or n_fft < 2:
        raise ValueError(f"need n_mels >= 1 and n_fft >= 2, got {n_mels}, {n_fft}")

    def to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def to_hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    edges = to_hz(np.linspace(to_mel(f_min), to_mel(sample_rate / 2), n_mels + 2))
    freqs = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None] - lo) / (mid - lo)
    down = (hi - freqs[None]) / (hi - mid)
    return torch.from_numpy(np.clip(np.minimum(up, down), 0.0, None).astype(np.float32))


def log_mel(
    audio: np.ndarray | torch.Tensor,
    sample_rate: int = 16000,
    n_mels: int = 40,
    win_ms: float = 25.0,
    hop_ms: float = 10.0,
) -> torch.Tensor:
    """Log-mel filterbank features of one waveform.

    Parameters
    ----------
    audio : array, shape (n_samples,)
    sample_rate : int
        Hz.
    n_mels : int
    win_ms, hop_ms : float
        Window and hop in milliseconds (hop 10 ms gives :data:`FRAME_RATE` frames/s).

    Returns
    -------
    Tensor, shape (n_frames, n_mels), float32
        ``n_frames = 1 + n_samples // hop`` (centred frames).
    """
    x = torch.as_tensor(np.asarray(audio, dtype=np.float32))
    if x.dim() != 1 or x.numel() == 0:
        raise ValueError(f"audio must be a non-empty 1-D waveform, got shape {tuple(x.shape)}")
    win = round(sample_rate * win_ms / 1000)
    hop = round(sample_rate * hop_ms / 1000)
    n_fft = 1 << (win - 1).bit_length()
    spec = torch.stft(
        x,
        n_fft=n_fft,
        hop_length=hop,
        win_length=win,
        window=torch.hann_window(win),
        center=True,
        return_complex=True,
    )
    power = spec.abs().pow(2)  # (n_fft//2+1, n_frames)
    mel = mel_filterbank(n_mels, n_fft, sample_rate) @ power
    return torch.log(mel + 1e-6).T.contiguous()
