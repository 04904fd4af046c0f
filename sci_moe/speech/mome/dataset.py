r"""A synthetic speech data set: corpus phrases spoken by espeak-ng, with a viseme stream.

Phrases of a few words are cut from the sentences of the offline text corpus of
:func:`sci_moe.language.load_corpus` (Wikipedia excerpt and news articles shipped in
gensim's wheel); each is spoken by espeak-ng (:func:`sci_moe.speech.synthesize`) in several
variants drawn from the given voices, speaking rates and pitches. The optional **visual
stream is synthetic**: espeak's own phoneme timings mapped to ARPAbet
(:func:`sci_moe.speech.to_arpabet`) and to the 22 SAPI visemes
(:func:`sci_moe.speech.to_viseme`), sampled at 25 frames/s (the frame centre decides), as
one-hot frames; at batch time frames are dropped (zeroed) with a given probability. It
stands in for lip video only in its information content: no image is involved.

The split is seeded and **by phrase**: every variant of a phrase is in the same split.
More training data can be added without touching the validation and test utterances
(``extra_train_phrases``, ``train_variants``): those utterances are synthesised after the
others, from the same seeded draws, so the first ``num_phrases * variants`` utterances and
the split of the first ``num_phrases`` phrases are the set without them.
Built sets are cached in an ``.npz`` keyed by a hash of the configuration; the cache
records the synthesiser (:func:`sci_moe.speech.synthesis_id`), with which a build is a
deterministic function of the configuration (and the phrases). Caches written before
synthesis was reproducible record none: they are still read (their audio is what the runs
that used them saw) with a warning, since a rebuild gives other audio.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from sci_moe._util import atomic_save_npz, check_int_attr, progress_bar

from ..tts import check_synthesis
from .features import add_noise, log_mel
from .text import encode_text, normalize_text

__all__ = [
    "HELDOUT_VOICES",
    "TRAIN_VOICES",
    "VIDEO_FPS",
    "SpeechBatch",
    "SpeechSet",
    "SpeechSetConfig",
    "build_speech_set",
    "check_voices_known",
    "corpus_phrases",
    "viseme_frames",
]

#: Frames per second of the synthetic viseme stream.
VIDEO_FPS = 25
#: The training voices of the MoME benchmark (``benchmarks/mome/full.py``): a
#: :class:`SpeechSetConfig` ``voices`` of six English espeak-ng voices and variants.
TRAIN_VOICES = ("en-us", "en-gb-x-rp", "en-us+f3", "en-us+m3", "en-gb-scotland+f1", "en-029+m2")
#: The benchmark's held-out voices (``SpeechSetConfig.heldout_voices``): they speak only
#: the validation and test phrases, so a score on them is a score on unheard speakers.
HELDOUT_VOICES = ("en-us-nyc+f4", "en-gb-x-gbclan+m1")
_SPLITS = ("train", "val", "test")


def corpus_phrases(n: int, min_words: int = 2, max_words: int = 4, seed: int = 0) -> list[str]:
    """``n`` distinct phrases of ``min_words``-``max_words`` consecutive words of the corpus.

    Sentences of :func:`sci_moe.language.load_corpus` (training stream) are split at
    ``. ! ?``; only words of plain letters (and apostrophes) are kept so that what espeak
    says is what the transcript spells; a phrase is a seeded random window of a sentence.

    Parameters
    ----------
    n, min_words, max_words, seed : int

    Returns
    -------
    list of str
        Lower-case phrases (:func:`~sci_moe.speech.mome.normalize_text` form).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 1 <= min_words <= max_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words}, {max_words}")
    from sci_moe.language import decode, load_corpus

    text = decode(load_corpus().train)
    sentences = [s.split() for s in re.split(r"[.!?\n]+", text)]
    sentences = [
        [w.lower() for w in s]
        for s in sentences
        if len(s) >= min_words and all(re.fullmatch(r"[A-Za-z']+", w) for w in s)
    ]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(sentences))
    out, seen = [], set()
    for i in order:
        words = sentences[i]
        k = int(rng.integers(min_words, max_words + 1))
        k = min(k, len(words))
        start = int(rng.integers(0, len(words) - k + 1))
        phrase = normalize_text(" ".join(words[start : start + k]))
        if phrase and phrase not in seen:
            seen.add(phrase)
            out.append(phrase)
            if len(out) == n:
                return out
    raise ValueError(
        f"the corpus has only {len(out)} distinct phrases of this length; ask for fewer"
    )


def viseme_frames(phonemes, duration: float, fps: int = VIDEO_FPS) -> tuple[np.ndarray, int]:
    """Viseme id of every video frame from espeak phoneme events.

    Frame ``k`` takes the viseme of the phoneme that contains its centre
    ``(k + 1/2) / fps``; frames outside every phoneme are silence (0).

    Parameters
    ----------
    phonemes : sequence of PhonemeEvent
        ``symbol``, ``start``, ``end`` (seconds).
    duration : float
        Seconds of audio.
    fps : int

    Returns
    -------
    visemes : numpy.ndarray, shape (ceil(duration * fps),), int64
    unknown : int
        Phoneme events without an ARPAbet class (mapped to silence).
    """
    from sci_moe.speech import to_arpabet, to_viseme

    n = max(1, math.ceil(duration * fps))
    centres = (np.arange(n) + 0.5) / fps
    out = np.zeros(n, dtype=np.int64)
    unknown = 0
    for p in phonemes:
        try:
            v = to_viseme(to_arpabet(p.symbol))
        except ValueError:
            unknown += 1
            v = 0
        out[(centres >= p.start) & (centres < p.end)] = v
    return out, unknown


@dataclass
class SpeechSetConfig:
    """What :func:`build_speech_set` synthesises.

    Parameters
    ----------
    num_phrases : int
        Distinct phrases (split by phrase into train/val/test).
    variants : int
        Spoken variants per phrase (voice, rate and pitch drawn per variant).
    voices : tuple of str
        espeak-ng voices (with optional variants, ``"en-us+f3"``).
    heldout_voices : tuple of str
        Voices that speak only the validation and test phrases (then ``voices`` speak
        only the training phrases): held-out speakers as well as held-out sentences.
        Empty (default): every split draws from ``voices``.
    speaking_rates : tuple of int
        Words per minute.
    pitches : tuple of int
        espeak pitch, 0-100.
    min_words, max_words : int
        Phrase length.
    sample_rate : int
        Hz.
    split : tuple of float
        Train/val/test fractions of the phrases.
    seed : int
    extra_train_phrases : int
        Further phrases (the next ones of :func:`corpus_phrases`), in the training split
        only and spoken by ``voices``, >= 0.
    train_variants : int or None
        Variants of every training phrase (those of the split and the extra ones), >=
        ``variants``; ``None``: ``variants``. The additional variants of the split's
        training phrases come after every other utterance.
    """

    num_phrases: int = 120
    variants: int = 2
    voices: tuple = ("en-us", "en-gb-x-rp", "en-us+f3", "en-us+m3")
    heldout_voices: tuple = ()
    speaking_rates: tuple = (140, 175, 210)
    pitches: tuple = (35, 50, 65)
    min_words: int = 2
    max_words: int = 4
    sample_rate: int = 16000
    split: tuple = (0.7, 0.15, 0.15)
    seed: int = 0
    extra_train_phrases: int = 0
    train_variants: int | None = None

    def __post_init__(self) -> None:
        for name in ("num_phrases", "variants"):
            check_int_attr(self, name, 1)
        check_int_attr(self, "extra_train_phrases", 0)
        if self.train_variants is not None:
            check_int_attr(self, "train_variants", self.variants)
        for name in ("voices", "speaking_rates", "pitches"):
            v = tuple(getattr(self, name))
            if not v:
                raise ValueError(f"{name} is empty: give at least one")
            setattr(self, name, v)
        self.heldout_voices = tuple(self.heldout_voices)
        if set(self.heldout_voices) & set(self.voices):
            raise ValueError(
                f"heldout_voices {self.heldout_voices} overlap the training voices {self.voices}"
            )
        self.split = tuple(float(s) for s in self.split)
        if len(self.split) != 3 or min(self.split) < 0 or abs(sum(self.split) - 1) > 1e-9:
            raise ValueError(f"split must be three fractions summing to 1, got {self.split}")
        if self.num_phrases < 3:
            raise ValueError("num_phrases must be >= 3 (one per split at least)")

    def key(self) -> str:
        """Hash of the configuration (the cache key)."""
        d = asdict(self)
        # the keys of the sets built before these fields existed
        if not d["heldout_voices"]:
            del d["heldout_voices"]
        if not d["extra_train_phrases"]:
            del d["extra_train_phrases"]
        if d["train_variants"] in (None, self.variants):
            del d["train_variants"]
        blob = json.dumps(d, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class SpeechBatch:
    """A padded batch.

    Attributes
    ----------
    streams : dict of str to (Tensor, Tensor)
        ``"audio"``: log-mel ``(B, T_a, n_mels)`` (per-utterance mean/variance
        normalised) and mask ``(B, T_a)``; ``"video"``: one-hot visemes ``(B, T_v, 22)``
        and mask ``(B, T_v)``.
    targets : Tensor, shape (B, S), int64
        Character ids, zero-padded.
    target_lengths : Tensor, shape (B,)
    texts : list of str
    """

    streams: dict
    targets: torch.Tensor
    target_lengths: torch.Tensor
    texts: list


@dataclass
class SpeechSet:
    """Synthesised utterances, their viseme frames and the phrase split.

    Attributes
    ----------
    config : SpeechSetConfig
    texts : list of str
        Transcript of each utterance.
    audio : list of numpy.ndarray
        float32 waveforms at ``config.sample_rate``.
    visemes : list of numpy.ndarray
        int64 viseme ids at :data:`VIDEO_FPS`.
    phrase : numpy.ndarray, int64
        Phrase id of each utterance.
    splits : dict of str to numpy.ndarray
        Utterance indices of ``"train"``, ``"val"``, ``"test"``.
    unknown_phonemes : int
        espeak events without an ARPAbet class (shown as silence in the viseme stream).
    synthesis : str or None
        The synthesiser that built the set (:func:`sci_moe.speech.synthesis_id`);
        ``None`` for a set read from a cache written before synthesis was reproducible.
    """

    config: SpeechSetConfig
    texts: list
    audio: list
    visemes: list
    phrase: np.ndarray
    splits: dict = field(default_factory=dict)
    unknown_phonemes: int = 0
    synthesis: str | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def batch(
        self,
        indices,
        snr_db: float | None = None,
        rng: np.random.Generator | None = None,
        multiple: dict | None = None,
        video_dropout: float = 0.0,
        n_mels: int = 40,
    ) -> SpeechBatch:
        """Features of utterances ``indices`` with noise at ``snr_db`` and dropped video.

        Parameters
        ----------
        indices : sequence of int
        snr_db : float or None
            Additive white noise SNR in dB (``None``: clean).
        rng : numpy.random.Generator, optional
            Noise and video-dropout source (``default_rng(0)`` when omitted).
        multiple : dict of str to int, optional
            Pad each modality's frames to a multiple of this (the least common multiple
            of its compression rates).
        video_dropout : float
            Probability that a video frame is zeroed (dropout noise), in [0, 1).
        n_mels : int
        """
        if not 0.0 <= video_dropout < 1.0:
            raise ValueError(f"video_dropout must be in [0, 1), got {video_dropout}")
        rng = np.random.default_rng(0) if rng is None else rng
        multiple = multiple or {}
        idx = [int(i) for i in indices]
        if not idx:
            raise ValueError("indices is empty: a batch needs at least one utterance")
        feats, vis = [], []
        for i in idx:
            x = log_mel(add_noise(self.audio[i], snr_db, rng), self.config.sample_rate, n_mels)
            x = (x - x.mean(0)) / x.std(0).clamp_min(1e-3)
            feats.append(x)
            v = torch.nn.functional.one_hot(torch.from_numpy(self.visemes[i]), 22).float()
            if video_dropout > 0:
                keep = torch.from_numpy(rng.random(v.shape[0]) >= video_dropout)
                v = v * keep.unsqueeze(1)
            vis.append(v)
        streams = {
            "audio": _pad(feats, multiple.get("audio", 1)),
            "video": _pad(vis, multiple.get("video", 1)),
        }
        ids = [encode_text(self.texts[i]) for i in idx]
        lengths = torch.tensor([t.numel() for t in ids])
        targets = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long)
        for b, t in enumerate(ids):
            targets[b, : t.numel()] = t
        return SpeechBatch(streams, targets, lengths, [self.texts[i] for i in idx])


def _pad(seqs: list, multiple: int) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(s.shape[0] for s in seqs)
    T = -(-T // multiple) * multiple
    x = torch.zeros(len(seqs), T, seqs[0].shape[1])
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    for b, s in enumerate(seqs):
        x[b, : s.shape[0]] = s
        mask[b, : s.shape[0]] = True
    return x, mask


def _split_phrases(n: int, fractions, seed: int) -> dict:
    order = np.random.default_rng(seed + 1).permutation(n)
    n_train = max(1, round(fractions[0] * n))
    n_val = max(1, round(fractions[1] * n))
    n_train = min(n_train, n - 2)
    return {
        "train": np.sort(order[:n_train]),
        "val": np.sort(order[n_train : n_train + n_val]),
        "test": np.sort(order[n_train + n_val :]),
    }


def build_speech_set(
    config: SpeechSetConfig | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    phrases: list | None = None,
) -> SpeechSet:
    """Synthesise (or load from the cache) the speech data set.

    Parameters
    ----------
    config : SpeechSetConfig, optional
    cache_dir : path, optional
        Folder of ``mome_speech_<key>.npz`` caches; nothing is cached when omitted.
    progress : bool
        Show a progress bar while synthesising.
    phrases : list of str, optional
        Use these phrases instead of :func:`corpus_phrases` (tests, custom text);
        ``config.num_phrases + config.extra_train_phrases`` must equal their number.

    Returns
    -------
    SpeechSet
    """
    from sci_moe.speech import list_voices, synthesis_id, synthesize

    config = SpeechSetConfig() if config is None else config
    n_all = config.num_phrases + config.extra_train_phrases
    if phrases is not None:
        phrases = [str(p) for p in phrases]
        for p in phrases:
            if not normalize_text(p):
                raise ValueError(f"phrase {p!r} is empty after normalisation: give words")
        if len(phrases) != n_all:
            raise ValueError(
                f"{len(phrases)} phrases given but config.num_phrases + "
                f"config.extra_train_phrases = {n_all}"
            )
    cache = None
    if cache_dir is not None:
        key = config.key()
        if phrases is not None:
            key += hashlib.sha256("\n".join(phrases).encode()).hexdigest()[:8]
        cache = Path(cache_dir) / f"mome_speech_{key}.npz"
        if cache.is_file():
            return _load(cache, config)
    check_voices_known(config.voices + config.heldout_voices, list_voices())
    if phrases is None:
        phrases = corpus_phrases(n_all, config.min_words, config.max_words, config.seed)
    rng = np.random.default_rng(config.seed)
    n, v, tv = config.num_phrases, config.variants, config.train_variants or config.variants
    split_of_phrase = _split_phrases(n, config.split, config.seed)
    split_of_phrase["train"] = np.concatenate([split_of_phrase["train"], np.arange(n, n_all)])
    train_phrases = set(split_of_phrase["train"].tolist())
    texts, audio, visemes, phrase_ids = [], [], [], []
    unknown = 0
    # the set without extra training data first, then its training phrases' further
    # variants, then the extra phrases: the first n * v utterances do not depend on them
    jobs = [(p, j) for p in range(n) for j in range(v)]
    jobs += [(p, j) for p in sorted(train_phrases) if p < n for j in range(v, tv)]
    jobs += [(p, j) for p in range(n, n_all) for j in range(tv)]
    for p, _ in progress_bar(jobs, disable=not progress, desc="synthesising", unit="utt"):
        pool = config.voices
        if config.heldout_voices and p not in train_phrases:
            pool = config.heldout_voices
        voice = pool[int(rng.integers(len(pool)))]
        rate = int(config.speaking_rates[int(rng.integers(len(config.speaking_rates)))])
        pitch = int(config.pitches[int(rng.integers(len(config.pitches)))])
        utt = synthesize(phrases[p], voice, rate, pitch, config.sample_rate)
        vis, unk = viseme_frames(utt.phonemes, utt.duration)
        unknown += unk
        texts.append(normalize_text(phrases[p]))
        audio.append(utt.audio)
        visemes.append(vis)
        phrase_ids.append(p)
    phrase = np.array(phrase_ids, dtype=np.int64)
    splits = {s: np.flatnonzero(np.isin(phrase, split_of_phrase[s])) for s in _SPLITS}
    out = SpeechSet(config, texts, audio, visemes, phrase, splits, unknown, synthesis_id())
    if cache is not None:
        _save(cache, out)
    return out


def check_voices_known(names: Sequence[str], known: Sequence[str]) -> None:
    """Raise ``ValueError`` for a voice espeak-ng does not have.

    Parameters
    ----------
    names : sequence of str
        Voices as :class:`SpeechSetConfig` takes them (``"en-us"``, ``"en-us+f3"``: a
        variant after ``+`` is not checked).
    known : sequence of str
        The installed espeak-ng voice identifiers (``"gmw/en-US"``), e.g.
        :func:`sci_moe.speech.list_voices`; a name matches an identifier or its short name.

    Raises
    ------
    ValueError
        For the first unknown name, saying where to pick one.
    """
    known = [x.lower() for x in known]
    for v in names:
        base = v.split("+")[0].lower()
        if not any(x == base or x.endswith("/" + base) for x in known):
            raise ValueError(
                f"unknown espeak-ng voice {v!r}: pick from sci_moe.speech.list_voices() "
                "(e.g. 'en-us', 'en-gb-x-rp', with an optional variant '+f3')"
            )


def _save(path: Path, s: SpeechSet) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lens_a = np.array([a.shape[0] for a in s.audio])
    lens_v = np.array([v.shape[0] for v in s.visemes])
    arrays = {
        "audio": np.concatenate(s.audio),
        "audio_len": lens_a,
        "visemes": np.concatenate(s.visemes),
        "visemes_len": lens_v,
        "texts": np.array(s.texts),
        "phrase": s.phrase,
        "unknown": np.array(s.unknown_phonemes),
        **{f"split_{k}": v for k, v in s.splits.items()},
    }
    if s.synthesis is not None:
        arrays["synthesis"] = np.array(s.synthesis)
    atomic_save_npz(path, arrays)


def _load(path: Path, config: SpeechSetConfig) -> SpeechSet:
    with np.load(path, allow_pickle=False) as z:
        audio = np.split(z["audio"], np.cumsum(z["audio_len"])[:-1])
        vis = np.split(z["visemes"], np.cumsum(z["visemes_len"])[:-1])
        synthesis = str(z["synthesis"]) if "synthesis" in z.files else None
        out = SpeechSet(
            config,
            [str(t) for t in z["texts"]],
            list(audio),
            list(vis),
            z["phrase"],
            {k: z[f"split_{k}"] for k in _SPLITS},
            int(z["unknown"]),
            synthesis,
        )
    check_synthesis(path, synthesis)
    return out
