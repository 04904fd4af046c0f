"""Front end and metrics: SNR of added noise, log-mel shape, CTC decoding, CER/WER, visemes."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sci_moe.speech.mome import (
    FRAME_RATE,
    VOCAB,
    add_noise,
    char_error_rate,
    ctc_greedy_decode,
    encode_text,
    log_mel,
    viseme_frames,
    word_error_rate,
)


@pytest.mark.parametrize("snr", [20.0, 5.0, -5.0])
def test_noise_has_the_requested_snr(snr):
    s = np.sin(np.linspace(0, 300, 8000)).astype(np.float32)
    y = add_noise(s, snr, np.random.default_rng(1))
    assert abs(10 * np.log10(np.mean(s**2) / np.mean((y - s) ** 2)) - snr) < 1e-3
    assert np.array_equal(add_noise(s, None), s)
    with pytest.raises(ValueError, match="silent"):
        add_noise(np.zeros(10, np.float32), 0.0)


def test_log_mel_frame_rate():
    x = log_mel(np.random.default_rng(0).standard_normal(16000).astype(np.float32), 16000, 40)
    assert x.shape == (16000 // 160 + 1, 40) and torch.isfinite(x).all()
    assert FRAME_RATE == 100


def test_greedy_ctc_merges_repeats_and_drops_blanks():
    ids = [VOCAB.index(c) if c != "_" else 0 for c in "hh_e_ll_llo"]
    lp = torch.full((1, len(ids), len(VOCAB)), -10.0)
    lp[0, torch.arange(len(ids)), torch.tensor(ids)] = 0.0
    assert ctc_greedy_decode(lp, torch.tensor([len(ids)])) == ["hello"]
    assert ctc_greedy_decode(lp, torch.tensor([3])) == ["h"]


def test_error_rates():
    assert char_error_rate(["abc"], ["abd"]) == pytest.approx(1 / 3)
    assert word_error_rate(["the cat sat"], ["The cat, sat!"]) == 0.0
    assert word_error_rate([""], ["two words"]) == 1.0
    with pytest.raises(ValueError, match="no letters"):
        encode_text("123 !")


def test_viseme_frames_follow_phoneme_timings():
    ev = [
        SimpleNamespace(symbol="_:", start=0.0, end=0.1),
        SimpleNamespace(symbol="m", start=0.1, end=0.2),  # M -> viseme 21 (P B M)
        SimpleNamespace(symbol="a", start=0.2, end=0.3),  # AE -> viseme 1
        SimpleNamespace(symbol="@@@", start=0.3, end=0.4),  # unknown -> silence
    ]
    v, unknown = viseme_frames(ev, 0.4)
    assert v.tolist() == [0, 0, 21, 21, 21, 1, 1, 0, 0, 0] and unknown == 1
