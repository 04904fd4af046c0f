"""Reverberation with pyroomacoustics ShoeBox rooms of known RT60 and an exact direct path.

The image-source method (Allen & Berkley 1979) in a rectangular room whose wall energy
absorption is set by Sabine's formula for the target RT60
(:func:`pyroomacoustics.inverse_sabine`). The **direct path** is the same room simulated
with ``max_order=0`` (only the line-of-sight image, with the same fractional-delay filter
and 1/(4 pi r) attenuation), so direct and reverberant signals are sample-aligned and
``reverberant - direct`` is exactly the reflected sound: the target and interference of
the IRM (Omni-Expert paper, Eq. 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "Reverberated",
    "RoomConfig",
    "RoomImpulseResponse",
    "measure_rt60",
    "reverberate",
    "simulate_rir",
]


@dataclass(frozen=True)
class RoomConfig:
    """A shoebox room and how sources and microphones are placed in it.

    Parameters
    ----------
    rt60 : float
        Target reverberation time in s.
    room_dim : tuple of float
        Length, width, height in m.
    min_distance : float
        Minimum source-microphone distance in m.
    wall_margin : float
        Minimum distance of source and microphone to every wall in m.
    """

    rt60: float = 0.6
    room_dim: tuple[float, float, float] = (6.0, 5.0, 3.0)
    min_distance: float = 1.0
    wall_margin: float = 0.5

    def __post_init__(self):
        if len(self.room_dim) != 3 or min(self.room_dim) <= 0:
            raise ValueError(f"room_dim must be three positive lengths in m, got {self.room_dim}")
        if self.rt60 <= 0:
            raise ValueError(f"rt60 must be > 0 s, got {self.rt60}")
        if 2 * self.wall_margin >= min(self.room_dim):
            raise ValueError(
                f"wall_margin={self.wall_margin} m leaves no room inside {self.room_dim}"
            )
        self.absorption()  # raises for an RT60 the room cannot have

    def absorption(self) -> tuple[float, int]:
        """Sabine wall energy absorption and image-source order for :attr:`rt60`."""
        import pyroomacoustics as pra

        try:
            return pra.inverse_sabine(self.rt60, list(self.room_dim))
        except ValueError:
            raise ValueError(
                f"RT60 = {self.rt60} s is impossible for a {self.room_dim} m room (Sabine "
                "absorption would exceed 1): use a longer RT60 or a smaller room"
            ) from None


@dataclass(frozen=True)
class RoomImpulseResponse:
    """A simulated source-microphone pair in a room.

    Attributes
    ----------
    rir, rir_direct : numpy.ndarray, shape (n,)
        Full and direct-path (``max_order=0``) impulse responses, sample-aligned.
    sample_rate : int
        Hz.
    source, microphone : numpy.ndarray, shape (3,)
        Positions in m.
    rt60 : float
        Target RT60 in s.
    """

    rir: np.ndarray
    rir_direct: np.ndarray
    sample_rate: int
    source: np.ndarray
    microphone: np.ndarray
    rt60: float


@dataclass(frozen=True)
class Reverberated:
    """A signal played in a room.

    Attributes
    ----------
    reverberant, direct : numpy.ndarray, shape (n_samples,), float64
        Microphone signal and its direct-path part, same length as the input.
    response : RoomImpulseResponse
    """

    reverberant: np.ndarray
    direct: np.ndarray
    response: RoomImpulseResponse


def _positions(cfg: RoomConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    lo = np.full(3, cfg.wall_margin)
    hi = np.asarray(cfg.room_dim) - cfg.wall_margin
    for _ in range(1000):
        s, m = rng.uniform(lo, hi), rng.uniform(lo, hi)
        s[2] = m[2] = min(max(1.5, lo[2]), hi[2])  # ear/mouth height
        if np.linalg.norm(s - m) >= cfg.min_distance:
            return s, m
    raise ValueError(
        f"cannot place source and microphone {cfg.min_distance} m apart in {cfg.room_dim}"
    )


def _rir(cfg, fs, source, mic, max_order, absorption) -> np.ndarray:
    import pyroomacoustics as pra

    room = pra.ShoeBox(
        list(cfg.room_dim),
        fs=fs,
        materials=pra.Material(absorption),
        max_order=max_order,
        air_absorption=False,
    )
    room.add_source(source)
    room.add_microphone(mic)
    room.compute_rir()
    return np.asarray(room.rir[0][0], dtype=np.float64)


def simulate_rir(
    config: RoomConfig | None = None, sample_rate: int = 16000, seed: int = 0
) -> RoomImpulseResponse:
    """Impulse responses of a random source/microphone pair in a shoebox room.

    Parameters
    ----------
    config : RoomConfig, optional
    sample_rate : int
        Hz.
    seed : int
        Seeds the positions.

    Returns
    -------
    RoomImpulseResponse
    """
    cfg = config or RoomConfig()
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be > 0 Hz, got {sample_rate}")
    absorption, order = cfg.absorption()
    src, mic = _positions(cfg, np.random.default_rng(seed))
    return RoomImpulseResponse(
        rir=_rir(cfg, sample_rate, src, mic, order, absorption),
        rir_direct=_rir(cfg, sample_rate, src, mic, 0, absorption),
        sample_rate=int(sample_rate),
        source=src,
        microphone=mic,
        rt60=cfg.rt60,
    )


def reverberate(audio: np.ndarray, sample_rate: int, response: RoomImpulseResponse) -> Reverberated:
    """Play ``audio`` through a simulated room.

    Parameters
    ----------
    audio : numpy.ndarray, shape (n_samples,)
        Dry signal; must not be silent.
    sample_rate : int
        Hz; must equal ``response.sample_rate``.
    response : RoomImpulseResponse
        From :func:`simulate_rir`.

    Returns
    -------
    Reverberated
        Signals cut to the input length (the reverberant tail past it is dropped).
    """
    from scipy.signal import fftconvolve

    x = np.asarray(audio, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"audio must be a non-empty 1-D array, got shape {x.shape}")
    if int(sample_rate) != response.sample_rate:
        raise ValueError(
            f"audio is at {sample_rate} Hz but the room response at {response.sample_rate} Hz: "
            "resample the audio or simulate the room at the audio's rate"
        )
    if not np.any(np.abs(x) > 1e-8):
        raise ValueError("audio is silent: reverberate a signal with sound in it")
    n = x.size
    return Reverberated(
        reverberant=fftconvolve(x, response.rir)[:n],
        direct=fftconvolve(x, response.rir_direct)[:n],
        response=response,
    )


def measure_rt60(rir: np.ndarray, sample_rate: int, decay_db: float = 20.0) -> float:
    """RT60 of an impulse response by Schroeder backward integration.

    The energy decay curve :math:`E(t) = \\int_t^\\infty h^2` is fit by a line between
    -5 dB and ``-5 - decay_db`` dB and extrapolated to -60 dB (T20 for ``decay_db=20``).

    Parameters
    ----------
    rir : numpy.ndarray, shape (n,)
    sample_rate : int
        Hz.
    decay_db : float

    Returns
    -------
    float
        Seconds.
    """
    h = np.asarray(rir, dtype=np.float64)
    edc = np.cumsum(h[::-1] ** 2)[::-1]
    if edc[0] <= 0:
        raise ValueError("rir is all zeros")
    db = 10 * np.log10(np.maximum(edc / edc[0], 1e-300))
    i0 = int(np.argmax(db <= -5.0))
    i1 = int(np.argmax(db <= -5.0 - decay_db))
    if i1 <= i0:
        raise ValueError(f"the rir does not decay by {5 + decay_db} dB: give a longer response")
    t = np.arange(i0, i1) / sample_rate
    slope = np.polyfit(t, db[i0:i1], 1)[0]
    return float(-60.0 / slope)
