"""Reverberant synthetic speech for the Omni-Expert benchmark (espeak-ng + ShoeBox rooms).

Sentences are real English text: the sentences of Python's own documentation topics
(:mod:`pydoc_data.topics`, shipped with CPython) that consist of plain words. Speakers
are espeak-ng voices/variants with seeded rate and pitch; train and test use *disjoint*
voices, sentences and room responses (source/microphone positions), all drawn from one
seed. Room impulse responses are cached (``.npz``, atomic writes) because a long RT60
takes seconds to simulate, and so are the built splits. Synthesis is a deterministic
function of its arguments (:func:`sci_moe.speech.synthesize`), so a build is one of the
configuration; the cache records the synthesiser (:func:`sci_moe.speech.synthesis_id`).
Caches written before synthesis was reproducible (whose audio depended on the order of the
calls) record none: they are still read, with a warning, since a rebuild gives other audio.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from sci_moe._util import atomic_save_npz, progress_bar
from sci_moe.speech import PhonemeEvent, check_synthesis, synthesis_id, synthesize
from sci_moe.speech.omni import RoomConfig, RoomImpulseResponse, reverberate, simulate_rir

__all__ = ["ReverbSpeechConfig", "ReverbUtterance", "build_reverberant_speech", "corpus_sentences"]


@dataclass(frozen=True)
class ReverbSpeechConfig:
    """What to synthesise and how to reverberate it.

    Parameters
    ----------
    n_train, n_test : int
        Utterances per split (disjoint sentences).
    rt60 : float
        Reverberation time in s.
    n_rirs : int
        Room responses per split (train and test pools are disjoint positions).
    seed : int
        Seeds sentence order and speaker settings.
    room_seed : int
        Seeds the source/microphone positions (kept apart from ``seed`` so several seeds
        can share one cached pool of room responses).
    train_voices, test_voices : tuple of str
        Disjoint espeak-ng voices.
    rate_range, pitch_range : tuple of int
        Uniform ranges of espeak rate (words/min) and pitch (0-100).
    room_dim : tuple of float
        Room size in m.
    sample_rate : int
        Hz.
    """

    n_train: int = 120
    n_test: int = 24
    rt60: float = 0.6
    n_rirs: int = 4
    seed: int = 0
    room_seed: int = 0
    train_voices: tuple[str, ...] = ("en-us", "en-us+m3", "en-us+f3", "en-us+m1", "en")
    test_voices: tuple[str, ...] = ("en-us+f2", "en-us+m2")
    rate_range: tuple[int, int] = (150, 200)
    pitch_range: tuple[int, int] = (35, 65)
    room_dim: tuple[float, float, float] = (6.0, 5.0, 3.0)
    sample_rate: int = 16000

    def __post_init__(self):
        if self.n_train < 1 or self.n_test < 1 or self.n_rirs < 1:
            raise ValueError("n_train, n_test and n_rirs must be >= 1")
        if set(self.train_voices) & set(self.test_voices):
            raise ValueError(
                f"train and test voices overlap: {set(self.train_voices) & set(self.test_voices)}"
            )
        RoomConfig(rt60=self.rt60, room_dim=tuple(self.room_dim))  # validates the RT60


@dataclass
class ReverbUtterance:
    """One reverberant utterance with its direct path and espeak's phoneme events."""

    text: str
    voice: str
    rate: int
    pitch: int
    direct: np.ndarray
    reverberant: np.ndarray
    phonemes: tuple[PhonemeEvent, ...]
    rir_index: int

    @property
    def duration(self) -> float:
        """Seconds (at the builder's 16 kHz default: ``len(direct) / 16000``)."""
        return self.direct.size / 16000


_WORDS = re.compile(r"^[A-Z][a-z]*(?:,? [a-z]+){4,13}\.$")


def corpus_sentences() -> list[str]:
    """Plain-word English sentences (5-14 words) of :mod:`pydoc_data.topics`, deduplicated."""
    from pydoc_data.topics import topics

    seen, out = set(), []
    for text in topics.values():
        for sent in re.split(r"(?<=\.)\s+", " ".join(text.split())):
            if _WORDS.match(sent) and sent not in seen:
                seen.add(sent)
                out.append(sent)
    return out


def _rir_pool(cfg: ReverbSpeechConfig, split: int, cache_dir, progress) -> list:
    room = RoomConfig(rt60=cfg.rt60, room_dim=tuple(cfg.room_dim))
    pool = []
    for k in progress_bar(range(cfg.n_rirs), disable=not progress, desc=f"rooms RT60={cfg.rt60}"):
        seed = cfg.room_seed * 1000 + split * 100 + k
        key = hashlib.sha1(repr((cfg.rt60, cfg.room_dim, cfg.sample_rate, seed)).encode())
        path = Path(cache_dir) / f"rir_{key.hexdigest()[:16]}.npz" if cache_dir else None
        if path is not None and path.exists():
            with np.load(path) as z:
                pool.append(
                    RoomImpulseResponse(
                        z["rir"], z["rir_direct"], cfg.sample_rate, z["source"], z["mic"], cfg.rt60
                    )
                )
            continue
        r = simulate_rir(room, cfg.sample_rate, seed=seed)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_save_npz(
                path,
                {"rir": r.rir, "rir_direct": r.rir_direct, "source": r.source, "mic": r.microphone},
            )
        pool.append(r)
    return pool


def build_reverberant_speech(
    config: ReverbSpeechConfig | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> tuple[list[ReverbUtterance], list[ReverbUtterance]]:
    """Synthesise, reverberate and split the corpus.

    Parameters
    ----------
    config : ReverbSpeechConfig, optional
    cache_dir : path, optional
        Where room responses and the built splits (``reverb_speech_<key>.npz``, keyed by
        the configuration and the corpus) are cached; nothing is cached if omitted.
    progress : bool
        Progress bars.

    Returns
    -------
    train, test : list of ReverbUtterance
    """
    cfg = config or ReverbSpeechConfig()
    sents = corpus_sentences()
    need = cfg.n_train + cfg.n_test
    if len(sents) < need:
        raise ValueError(f"only {len(sents)} sentences available, asked for {need}")
    cache = None
    if cache_dir is not None:
        blob = json.dumps([asdict(cfg), sents], sort_keys=True).encode()
        cache = Path(cache_dir) / f"reverb_speech_{hashlib.sha256(blob).hexdigest()[:16]}.npz"
        if cache.is_file():
            return _load_splits(cache)
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(sents))
    splits = []
    for split, (n, voices, start) in enumerate(
        ((cfg.n_train, cfg.train_voices, 0), (cfg.n_test, cfg.test_voices, cfg.n_train))
    ):
        pool = _rir_pool(cfg, split, cache_dir, progress)
        out = []
        for i in progress_bar(range(n), disable=not progress, desc=f"speech split {split}"):
            text = sents[order[start + i]]
            voice = voices[int(rng.integers(len(voices)))]
            rate = int(rng.integers(cfg.rate_range[0], cfg.rate_range[1] + 1))
            pitch = int(rng.integers(cfg.pitch_range[0], cfg.pitch_range[1] + 1))
            k = int(rng.integers(len(pool)))
            utt = synthesize(text, voice=voice, rate=rate, pitch=pitch, sample_rate=cfg.sample_rate)
            rev = reverberate(utt.audio, utt.sample_rate, pool[k])
            # the direct path arrives after the propagation (+ filter) delay: shift the events
            delay = float(np.argmax(np.abs(pool[k].rir_direct))) / cfg.sample_rate
            end = rev.direct.size / cfg.sample_rate
            events = tuple(
                PhonemeEvent(e.symbol, min(e.start + delay, end), min(e.end + delay, end))
                for e in utt.phonemes
                if e.start + delay < end
            )
            out.append(
                ReverbUtterance(text, voice, rate, pitch, rev.direct, rev.reverberant, events, k)
            )
        splits.append(out)
    if cache is not None:
        _save_splits(cache, splits)
    return splits[0], splits[1]


def _save_splits(path: Path, splits) -> None:
    utts = [u for split in splits for u in split]
    events = [e for u in utts for e in u.phonemes]
    arrays = {
        "n_train": np.array(len(splits[0])),
        "text": np.array([u.text for u in utts]),
        "voice": np.array([u.voice for u in utts]),
        "rate_pitch_rir": np.array([[u.rate, u.pitch, u.rir_index] for u in utts]),
        "audio_len": np.array([u.direct.size for u in utts]),
        "direct": np.concatenate([u.direct for u in utts]),
        "reverberant": np.concatenate([u.reverberant for u in utts]),
        "n_events": np.array([len(u.phonemes) for u in utts]),
        "event_symbol": np.array([e.symbol for e in events], dtype=str),
        "event_time": np.array([[e.start, e.end] for e in events]).reshape(-1, 2),
        "synthesis": np.array(synthesis_id()),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_save_npz(path, arrays)


def _load_splits(path: Path) -> tuple[list[ReverbUtterance], list[ReverbUtterance]]:
    with np.load(path, allow_pickle=False) as z:
        cut = np.cumsum(z["audio_len"])[:-1]
        direct, rev = np.split(z["direct"], cut), np.split(z["reverberant"], cut)
        ev_cut = np.cumsum(z["n_events"])[:-1]
        symbols = np.split(z["event_symbol"], ev_cut)
        times = np.split(z["event_time"], ev_cut)
        utts = [
            ReverbUtterance(
                str(z["text"][i]),
                str(z["voice"][i]),
                int(z["rate_pitch_rir"][i, 0]),
                int(z["rate_pitch_rir"][i, 1]),
                direct[i],
                rev[i],
                tuple(
                    PhonemeEvent(str(sym), float(t0), float(t1))
                    for sym, (t0, t1) in zip(symbols[i], times[i], strict=True)
                ),
                int(z["rate_pitch_rir"][i, 2]),
            )
            for i in range(len(z["text"]))
        ]
        n_train = int(z["n_train"])
        recorded = str(z["synthesis"]) if "synthesis" in z.files else None
    check_synthesis(path, recorded)
    return utts[:n_train], utts[n_train:]
