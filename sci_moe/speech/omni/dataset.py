"""Frame-level training data of one utterance: features, magnitudes, IRM and phoneme labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..tts import PhonemeEvent
from .alignment import event_frame_labels
from .frontend import FrontEndConfig, ideal_ratio_mask, log_magnitude, stft

__all__ = ["FrameSet", "utterance_frames"]


@dataclass
class FrameSet:
    """Frames of one or more utterances (concatenated in time order).

    Attributes
    ----------
    log_mag : numpy.ndarray, shape (T, F)
        Log magnitude of the reverberant STFT (not normalised).
    magnitude : numpy.ndarray, shape (T, F)
        ``|X|`` of the reverberant STFT.
    irm : numpy.ndarray, shape (T, F)
        Ideal ratio mask (direct path as target).
    labels : numpy.ndarray, shape (T,), int64
        Phoneme class at each frame centre.
    utterance : numpy.ndarray, shape (T,), int64
        Which utterance each frame comes from.
    """

    log_mag: np.ndarray
    magnitude: np.ndarray
    irm: np.ndarray
    labels: np.ndarray
    utterance: np.ndarray

    @classmethod
    def concat(cls, sets: Sequence[FrameSet]) -> FrameSet:
        """Concatenate frame sets, renumbering utterances ``0, 1, ...``."""
        if not sets:
            raise ValueError("concat needs at least one FrameSet")
        offs, ut = 0, []
        for s in sets:
            ut.append(s.utterance + offs)
            offs += int(s.utterance.max()) + 1
        return cls(
            *(
                np.concatenate([getattr(s, k) for s in sets])
                for k in ("log_mag", "magnitude", "irm", "labels")
            ),
            np.concatenate(ut),
        )

    def __len__(self) -> int:
        return self.labels.shape[0]


def utterance_frames(
    reverberant: np.ndarray,
    direct: np.ndarray,
    events: Sequence[PhonemeEvent],
    config: FrontEndConfig | None = None,
    espeak: bool = True,
) -> FrameSet:
    """Frames of one utterance.

    Parameters
    ----------
    reverberant, direct : numpy.ndarray, shape (n_samples,)
        Microphone signal and its direct path (same length and sample rate).
    events : sequence of PhonemeEvent
        Phoneme timings (espeak's or a forced alignment's).
    config : FrontEndConfig, optional
    espeak : bool
        ``events`` carry espeak symbols (else ARPAbet).

    Returns
    -------
    FrameSet
        Labels at frame centres ``(t H + L / 2) / fs``.
    """
    cfg = config or FrontEndConfig()
    if reverberant.shape != direct.shape:
        raise ValueError(
            f"reverberant {reverberant.shape} and direct {direct.shape} must have one length"
        )
    X, S = stft(reverberant, cfg), stft(direct, cfg)
    T = X.shape[0]
    centres = (np.arange(T) * cfg.hop_length + cfg.frame_length / 2) / cfg.sample_rate
    return FrameSet(
        log_mag=log_magnitude(X).astype(np.float32),
        magnitude=np.abs(X).astype(np.float32),
        irm=ideal_ratio_mask(S, X).astype(np.float32),
        labels=event_frame_labels(events, centres, espeak=espeak),
        utterance=np.zeros(T, dtype=np.int64),
    )
