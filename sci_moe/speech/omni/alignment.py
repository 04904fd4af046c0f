"""Phoneme labels per frame: espeak's own events (oracle) and pocketsphinx forced alignment.

The Omni-Expert paper trains on Kaldi phone alignments of 39 phonemes + silence. Here the
*oracle* labels are espeak-ng's phoneme events (exact: the synthesiser says when it
speaks each phoneme), and the *realistic* labels come from pocketsphinx 5 forced
alignment (CMU en-us acoustic model + CMUdict from the wheel, 10 ms frames): the same
kind of pipeline as the paper's. :func:`label_agreement` says how well they agree.

pocketsphinx's alignment needs leading/trailing silence and fails on exactly-zero
samples, so :func:`force_align` pads 0.25 s and adds seeded dither at -60 dB re the
signal's peak before aligning (times are corrected for the padding).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..phonemes import ARPABET, SILENCE, phoneme_index, to_arpabet
from ..tts import PhonemeEvent

__all__ = ["event_frame_labels", "force_align", "label_agreement"]

_PAD_S = 0.25


def force_align(
    audio: np.ndarray, sample_rate: int, text: str, seed: int = 0
) -> tuple[PhonemeEvent, ...]:
    """Phone segmentation of ``audio`` given its transcript, with pocketsphinx.

    Parameters
    ----------
    audio : numpy.ndarray, shape (n_samples,)
    sample_rate : int
        Must be 16000 Hz (the acoustic model's rate).
    text : str
        Transcript; punctuation is dropped, words must be in CMUdict.
    seed : int
        Seeds the dither.

    Returns
    -------
    tuple of PhonemeEvent
        ARPAbet symbols (``"SIL"`` for silence and noise), times in s.
    """
    try:
        from pocketsphinx import Decoder
    except ImportError as exc:  # pragma: no cover - environment
        raise ImportError("force_align needs pocketsphinx: pip install 'sci-moe[speech]'") from exc
    if sample_rate != 16000:
        raise ValueError(
            f"pocketsphinx's en-us model is for 16000 Hz audio, got {sample_rate} Hz: resample"
        )
    x = np.asarray(audio, dtype=np.float64)
    peak = np.abs(x).max() if x.size else 0.0
    if peak == 0:
        raise ValueError("audio is silent: nothing to align")
    words = re.sub(r"[^a-z' ]+", " ", text.lower()).split()
    if not words:
        raise ValueError(f"text {text!r} has no words to align")
    rng = np.random.default_rng(seed)
    pad = np.zeros(int(_PAD_S * sample_rate))
    y = np.concatenate([pad, 0.5 * x / peak, pad])
    y = y + 0.5e-3 * rng.standard_normal(y.size)
    pcm = (np.clip(y, -1, 1) * 32767).astype(np.int16).tobytes()
    # bestpath=False: the lattice's best path can give a phone fewer frames than its HMM
    # has states, and the state alignment then fails ("impossible duration"); with it on,
    # shifting one utterance by 1-29 samples failed 27 of 60 alignments, without it none.
    dec = Decoder(samprate=sample_rate, lm=None, loglevel="FATAL", bestpath=False)
    try:
        dec.set_align_text(" ".join(words))
        dec.start_utt()
        dec.process_raw(pcm, full_utt=True)
        dec.end_utt()
        if dec.hyp() is None:  # (only valid after the word pass; not after set_alignment)
            raise RuntimeError("no word alignment")
        dec.set_alignment()
        dec.start_utt()
        dec.process_raw(pcm, full_utt=True)
        dec.end_utt()
        alignment = [[(p.name, p.start, p.duration) for p in w] for w in dec.get_alignment()]
    except RuntimeError as exc:
        raise ValueError(
            f"pocketsphinx could not align {text!r} ({exc}): check the words are English "
            "and in CMUdict, and that the audio says them"
        ) from None
    frame = 0.01
    out = []
    for word in alignment:
        for name, first, n_frames in word:
            sym = name.upper() if name.upper() in ARPABET else SILENCE
            start = first * frame - _PAD_S
            end = (first + n_frames) * frame - _PAD_S
            start, end = max(start, 0.0), min(end, x.size / sample_rate)
            if end > start:
                out.append(PhonemeEvent(sym, start, end))
    return tuple(out)


def event_frame_labels(
    events: Sequence[PhonemeEvent], times: np.ndarray, espeak: bool = True
) -> np.ndarray:
    """Class index (into :data:`~sci_moe.speech.ARPABET`) of the event covering each time.

    Parameters
    ----------
    events : sequence of PhonemeEvent
        Ordered, non-overlapping (from :func:`~sci_moe.speech.synthesize` or
        :func:`force_align`).
    times : numpy.ndarray, shape (n,)
        Seconds (e.g. frame centres).
    espeak : bool
        Symbols are espeak mnemonics (mapped with :func:`~sci_moe.speech.to_arpabet`),
        else ARPAbet names.

    Returns
    -------
    numpy.ndarray, shape (n,), int64
        Silence outside every event.
    """
    sil = ARPABET.index(SILENCE)
    labels = np.full(len(times), sil, dtype=np.int64)
    if not events:
        return labels
    starts = np.array([e.start for e in events])
    ends = np.array([e.end for e in events])
    names = [to_arpabet(e.symbol) if espeak else e.symbol for e in events]
    cls = phoneme_index(names)
    j = np.searchsorted(starts, times, side="right") - 1
    ok = (j >= 0) & (times < ends[np.clip(j, 0, None)])
    labels[ok] = cls[j[ok]]
    return labels


def label_agreement(
    reference: np.ndarray, other: np.ndarray, ignore_silence: bool = False
) -> float:
    """Fraction of frames with the same class.

    Parameters
    ----------
    reference, other : numpy.ndarray, shape (n,), int
    ignore_silence : bool
        Count only frames where ``reference`` is not silence.

    Returns
    -------
    float
    """
    a, b = np.asarray(reference), np.asarray(other)
    if a.shape != b.shape:
        raise ValueError(f"label arrays differ in shape: {a.shape} vs {b.shape}")
    keep = a != ARPABET.index(SILENCE) if ignore_silence else np.ones(a.shape, bool)
    if not keep.any():
        raise ValueError("no frames to compare")
    return float(np.mean(a[keep] == b[keep]))
