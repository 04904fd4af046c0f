"""Offline speech synthesis with espeak-ng, with espeak's own phoneme timings.

The espeak-ng library and its voice data come from the ``espeakng-loader`` wheel
(``pip install 'sci-moe[speech]'``), loaded with :mod:`ctypes`; no system package and no
network are needed. Synthesis runs in espeak's synchronous mode: the library calls back
with 16-bit audio blocks at its native 22050 Hz and with *phoneme events* (espeak's
mnemonic and the sample where the phoneme starts). The audio is resampled to the
requested rate with a polyphase filter; event times are converted to seconds from
espeak's native sample index, so they are exact to one native sample (45 µs).

**Reproducibility.** :func:`synthesize` is a deterministic function of its arguments (and
of the espeak-ng build, :func:`synthesis_id`): the same call gives the same samples in any
process, whatever was synthesised before. espeak-ng by itself is not: it keeps state
between calls that neither ``espeak_Terminate`` nor ``espeak_Initialize`` resets (the
phase of its pitch-flutter table, a static counter in ``AdvanceParameters``, so one
call's pitch contour and length, a few to a few hundred samples, depend on every earlier
call in the process), and it seeds the noise of breathy voices (variants such as ``+f3``)
from the clock (``espeak_srand(time(NULL))`` in ``espeak_Initialize``). Every call
therefore loads a private copy of the library afresh (a new instance with all of its
state at its initial values), seeds its noise with ``seed`` and unloads it after use
(about 5 ms per call). All calls go through one lock, so :func:`synthesize` is
thread-safe but not parallel within a process (use processes for parallel synthesis).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = [
    "PhonemeEvent",
    "Utterance",
    "check_synthesis",
    "list_voices",
    "synthesis_id",
    "synthesize",
]

_INSTALL_HINT = (
    "espeak-ng comes with the 'espeakng-loader' wheel: install the speech extra, "
    "pip install 'sci-moe[speech]'"
)

# espeak_AUDIO_OUTPUT / espeak_EVENT_TYPE / option values from speak_lib.h (espeak-ng 1.52).
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_CHARS_UTF8 = 1
_EVENT_LIST_TERMINATED = 0
_EVENT_PHONEME = 7
_PARAM_RATE = 1
_PARAM_PITCH = 3


class _Event(ctypes.Structure):
    """``espeak_EVENT`` of speak_lib.h (the ``id`` union read as its 8-byte string)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


class _Voice(ctypes.Structure):
    """``espeak_VOICE`` of speak_lib.h."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_char_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    ]


_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


@dataclass(frozen=True)
class PhonemeEvent:
    """One phoneme of an utterance, as espeak-ng reported it.

    Attributes
    ----------
    symbol : str
        espeak's phoneme mnemonic with stress marks removed (``"oU"``, ``"dZ"``,
        ``"_:"`` for a pause); map it with :func:`sci_moe.speech.to_arpabet`.
    start, end : float
        Start and end in seconds from the start of the audio; ``end`` is the next
        event's start (the last one ends with the audio).
    """

    symbol: str
    start: float
    end: float


@dataclass(frozen=True)
class Utterance:
    """A synthesised utterance and how it was made.

    Attributes
    ----------
    audio : numpy.ndarray, shape (n_samples,), float32
        Waveform in [-1, 1].
    sample_rate : int
        Samples per second (Hz).
    phonemes : tuple of PhonemeEvent
        espeak's phoneme events, ordered, non-overlapping, inside the audio.
    text, voice : str
        The input text and the espeak voice.
    rate, pitch : int
        Speaking rate (words per minute) and pitch (0-100, espeak's scale).
    seed : int
        Seed of espeak's noise source (breathy voices).
    """

    audio: np.ndarray
    sample_rate: int
    phonemes: tuple[PhonemeEvent, ...]
    text: str
    voice: str
    rate: int
    pitch: int
    seed: int = 0

    @property
    def duration(self) -> float:
        """Length of the audio in seconds."""
        return self.audio.shape[0] / self.sample_rate


class _Engine:
    """Fresh espeak-ng instances on demand, one at a time (under a lock).

    :meth:`instance` loads a private copy of the library (a file of its own, so that the
    dynamic loader maps a new instance even where the wheel's library is loaded already),
    initialises it, seeds its noise and hands it out; afterwards it is terminated and
    unloaded. If the copy cannot be loaded (a temporary folder mounted ``noexec``), the
    wheel's file is loaded and unloaded instead, which is as fresh as long as nothing
    else in the process holds it.
    """

    def __init__(self) -> None:
        try:
            import espeakng_loader
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"sci_moe.speech.synthesize needs espeak-ng. {_INSTALL_HINT}"
            ) from exc
        try:
            self.path = espeakng_loader.get_library_path()
            self.data = espeakng_loader.get_data_path().encode()
            with open(self.path, "rb") as f:
                self._image = f.read()
        except (OSError, RuntimeError) as exc:  # pragma: no cover - broken install
            raise ImportError(f"could not load libespeak-ng ({exc}). {_INSTALL_HINT}") from exc
        self._folder: str | None = None
        self._private = True
        self.lock = threading.Lock()
        self._audio: list[np.ndarray] = []
        self._events: list[tuple[str, int]] = []
        self._callback = _CALLBACK(self._on_synth)  # keep a reference: C holds the pointer
        with self.lock, self.instance(0) as lib:
            self.native_rate = self._rate
            self.version = lib.espeak_Info(None).decode()

    def _load(self) -> ctypes.CDLL:
        if self._private:
            try:
                if self._folder is None:
                    self._folder = tempfile.mkdtemp(prefix="sci_moe_espeak_")
                    atexit.register(shutil.rmtree, self._folder, True)
                fd, name = tempfile.mkstemp(suffix=".so", dir=self._folder)
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(self._image)
                    return ctypes.CDLL(name, mode=getattr(os, "RTLD_LOCAL", 0))
                finally:
                    os.unlink(name)  # the mapping stays valid
            except OSError:  # pragma: no cover - e.g. a noexec temporary folder
                self._private = False
        try:
            return ctypes.CDLL(self.path, mode=getattr(os, "RTLD_LOCAL", 0))
        except OSError as exc:  # pragma: no cover - broken install
            raise ImportError(f"could not load libespeak-ng ({exc}). {_INSTALL_HINT}") from exc

    @contextmanager
    def instance(self, seed: int):
        """A freshly loaded, initialised espeak-ng whose noise is seeded with ``seed``
        (call with :attr:`lock` held)."""
        lib = self._load()
        ready = False
        try:
            lib.espeak_Initialize.restype = ctypes.c_int
            lib.espeak_Initialize.argtypes = [
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_int,
            ]
            lib.espeak_Info.restype = ctypes.c_char_p
            lib.espeak_Info.argtypes = [ctypes.c_void_p]
            lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
            lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
            lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
            lib.espeak_Synth.argtypes = [
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_uint,
                ctypes.c_int,
                ctypes.c_uint,
                ctypes.c_uint,
                ctypes.c_void_p,
                ctypes.c_void_p,
            ]
            lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_Voice))
            lib.espeak_ListVoices.argtypes = [ctypes.c_void_p]
            rate = lib.espeak_Initialize(
                _AUDIO_OUTPUT_SYNCHRONOUS, 0, self.data, _INITIALIZE_PHONEME_EVENTS
            )
            if rate <= 0:  # pragma: no cover - broken install
                raise ImportError(f"espeak_Initialize failed with code {rate}. {_INSTALL_HINT}")
            ready = True
            self._rate = int(rate)
            # espeak_Initialize seeded the noise from the clock (time(NULL))
            lib.espeak_ng_SetRandSeed(int(seed))
            lib.espeak_SetSynthCallback(self._callback)
            yield lib
        finally:
            if ready:
                lib.espeak_Terminate()
            _dlclose(lib._handle)

    def _on_synth(self, wav, n_samples, events) -> int:
        if n_samples > 0:
            self._audio.append(np.ctypeslib.as_array(wav, shape=(n_samples,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            ev = events[i]
            if ev.type == _EVENT_PHONEME:
                self._events.append((ev.id.decode("utf-8", "replace"), int(ev.sample)))
            i += 1
        return 0

    def voices(self) -> list[str]:
        with self.lock, self.instance(0) as lib:
            table = lib.espeak_ListVoices(None)
            out = []
            i = 0
            while table[i]:
                out.append(table[i].contents.identifier.decode())
                i += 1
        return sorted(out)

    def run(
        self, text: str, voice: str, rate: int, pitch: int, seed: int
    ) -> tuple[np.ndarray, list]:
        with self.lock, self.instance(seed) as lib:
            if lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise ValueError(
                    f"unknown espeak-ng voice {voice!r}: pick one of sci_moe.speech.list_voices() "
                    "(e.g. 'en-us', 'en', 'en-gb-x-rp'), optionally with a variant ('en-us+f3')"
                )
            lib.espeak_SetParameter(_PARAM_RATE, int(rate), 0)
            lib.espeak_SetParameter(_PARAM_PITCH, int(pitch), 0)
            self._audio, self._events = [], []
            buf = ctypes.create_string_buffer(text.encode("utf-8"))
            code = lib.espeak_Synth(buf, len(buf), 0, 0, 0, _CHARS_UTF8, None, None)
            lib.espeak_Synchronize()
            if code != 0:  # pragma: no cover - library error
                raise RuntimeError(f"espeak_Synth failed with code {code}")
            audio = np.concatenate(self._audio) if self._audio else np.zeros(0, np.int16)
            events = sorted(self._events, key=lambda e: e[1])
            self._audio, self._events = [], []
            return audio, events


def _dlclose(handle: int) -> None:
    import _ctypes

    close = getattr(_ctypes, "dlclose", None) or getattr(_ctypes, "FreeLibrary", None)
    if close is not None:
        close(handle)


_ENGINE: _Engine | None = None
_ENGINE_LOCK = threading.Lock()


def _engine() -> _Engine:
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = _Engine()
        return _ENGINE


def synthesis_id() -> str:
    """The synthesiser that :func:`synthesize` runs, as recorded with built data sets.

    Returns
    -------
    str
        ``"espeak-ng <version>, fresh seeded instance per call"``: audio is a
        deterministic function of :func:`synthesize`'s arguments and of this string
        (data built before synthesis was made reproducible carry no such record).
    """
    return f"espeak-ng {_engine().version}, fresh seeded instance per call"


def check_synthesis(path, recorded: str | None) -> None:
    """Warn when a data cache was synthesised otherwise than a rebuild here would be.

    Parameters
    ----------
    path : str or Path
        The cache file (named in the warning).
    recorded : str or None
        Its :func:`synthesis_id` record; ``None`` for a cache built before synthesis was
        reproducible (read as it is: the audio the runs that used it saw).

    Warns
    -----
    UserWarning
        When there is no record, or the record is not this installation's
        :func:`synthesis_id` (without espeak-ng installed, only the first case).
    """
    if recorded is None:
        warnings.warn(
            f"{path} was built before espeak-ng synthesis was reproducible (it records no "
            "synthesiser): it is read as it is (the audio the runs that used it saw), but "
            "a rebuild gives other audio; delete it to build a reproducible one",
            UserWarning,
            stacklevel=3,
        )
        return
    try:
        now = synthesis_id()
    except ImportError:  # reading a cache needs no espeak-ng
        return
    if recorded != now:
        warnings.warn(
            f"{path} was synthesised by {recorded!r}, this installation synthesises with "
            f"{now!r}: it is read as it is, a rebuild would give other audio",
            UserWarning,
            stacklevel=3,
        )


def list_voices() -> list[str]:
    """Identifiers of the espeak-ng voices shipped with the ``espeakng-loader`` wheel.

    Returns
    -------
    list of str
        Sorted voice identifiers such as ``"gmw/en-US"``; :func:`synthesize` accepts
        these or the short names (``"en-us"``), with an optional variant
        (``"en-us+f3"``, ``"en-us+m2"``).
    """
    return _engine().voices()


def _strip_stress(symbol: str) -> str:
    return symbol.lstrip("',%=")


def synthesize(
    text: str,
    voice: str = "en-us",
    rate: int = 175,
    pitch: int = 50,
    sample_rate: int = 16000,
    seed: int = 0,
) -> Utterance:
    """Synthesise ``text`` offline with espeak-ng and return audio plus phoneme events.

    Parameters
    ----------
    text : str
        What to say (UTF-8; must contain something pronounceable).
    voice : str
        espeak-ng voice name, optionally with a variant (``"en-us+f3"``).
    rate : int
        Speaking rate in words per minute, 80-450.
    pitch : int
        Base pitch on espeak's 0-100 scale.
    sample_rate : int
        Output sample rate in Hz (8000-48000); espeak synthesises at 22050 Hz and the
        audio is resampled with :func:`scipy.signal.resample_poly`.
    seed : int
        Seed of espeak-ng's noise source (the aspiration noise of breathy voices such as
        ``"en-us+f3"``), 0 to 2**31 - 1.

    Returns
    -------
    Utterance
        float32 audio, the sample rate, ordered phoneme events (seconds), and the inputs.
        The same arguments give the same samples, in any process and after any other
        call (see the module's notes on reproducibility).

    Examples
    --------
    >>> utt = synthesize("Hello world.")
    >>> utt.sample_rate, utt.audio.dtype.name
    (16000, 'float32')
    >>> [p.symbol for p in utt.phonemes][:4]
    ['h', '@', 'l', 'oU']
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text is empty: give synthesize() a non-empty string to speak")
    if not 80 <= int(rate) <= 450:
        raise ValueError(f"rate={rate} words/min is outside espeak's range 80-450")
    if not 0 <= int(pitch) <= 100:
        raise ValueError(f"pitch={pitch} is outside espeak's range 0-100")
    if not 8000 <= int(sample_rate) <= 48000:
        raise ValueError(f"sample_rate={sample_rate} Hz: choose a rate in 8000-48000 Hz")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**31:
        raise ValueError(f"seed={seed} is outside 0 to 2**31 - 1")
    eng = _engine()
    raw, events = eng.run(text, voice, int(rate), int(pitch), int(seed))
    if raw.size == 0 or not np.any(raw):
        raise ValueError(f"espeak-ng produced no sound for {text!r}: give it words to speak")
    native = eng.native_rate
    audio = raw.astype(np.float64) / 32768.0
    if sample_rate != native:
        from scipy.signal import resample_poly

        frac = Fraction(int(sample_rate), native)
        audio = resample_poly(audio, frac.numerator, frac.denominator)
    audio = np.clip(audio, -1.0, 1.0).astype(np.float32)
    n_native = raw.shape[0]
    duration = audio.shape[0] / sample_rate
    phonemes = []
    for i, (sym, start) in enumerate(events):
        stop = events[i + 1][1] if i + 1 < len(events) else n_native
        start, stop = min(max(start, 0), n_native), min(max(stop, 0), n_native)
        if stop <= start:
            continue
        phonemes.append(
            PhonemeEvent(
                symbol=_strip_stress(sym),
                start=start / native,
                end=min(stop / native, duration),
            )
        )
    return Utterance(
        audio=audio,
        sample_rate=int(sample_rate),
        phonemes=tuple(phonemes),
        text=text,
        voice=voice,
        rate=int(rate),
        pitch=int(pitch),
        seed=int(seed),
    )
