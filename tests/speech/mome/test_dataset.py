"""The MoME speech set: extra training data leaves the validation and test utterances;
builds are reproducible and caches record their synthesiser."""

import numpy as np
import pytest

from sci_moe.speech import synthesis_id, synthesize
from sci_moe.speech.mome import SpeechSetConfig, build_speech_set
from sci_moe.speech.mome.train import _data_meta

PHRASES = ["the cat", "a dog ran", "red sun", "big hat", "blue sea", "old tree"]


def _cfg(**kw):
    base = dict(num_phrases=4, variants=1, voices=("en-us", "en-us+f3"),
                heldout_voices=("en-gb-x-rp",), split=(0.5, 0.25, 0.25))  # fmt: skip
    return SpeechSetConfig(**{**base, **kw})


def test_extra_training_data_leaves_the_held_out_utterances():
    pytest.importorskip("espeakng_loader")
    plain = build_speech_set(_cfg(), None, False, phrases=PHRASES[:4])
    more = build_speech_set(_cfg(extra_train_phrases=2, train_variants=3), None, False,
                            phrases=PHRASES)  # fmt: skip
    for split in ("val", "test"):
        np.testing.assert_array_equal(more.splits[split], plain.splits[split])
    n = len(plain)
    assert more.texts[:n] == plain.texts  # the same draws, the same utterances first
    train = set(more.phrase[more.splits["train"]].tolist())
    assert train == set(plain.phrase[plain.splits["train"]].tolist()) | {4, 5}
    counts = np.bincount(more.phrase[more.splits["train"]])
    assert all(counts[p] == 3 for p in train)  # train_variants of every training phrase
    assert len(more) == n + 2 * 2 + 2 * 3
    held = set(more.phrase[np.concatenate([more.splits["val"], more.splits["test"]])].tolist())
    assert not held & train


def test_extra_fields_keep_the_old_cache_key_and_are_checked():
    assert _cfg().key() == _cfg(extra_train_phrases=0, train_variants=1).key()
    assert _cfg().key() != _cfg(extra_train_phrases=2).key()
    assert _cfg().key() != _cfg(train_variants=2).key()
    with pytest.raises(ValueError, match="train_variants"):
        _cfg(variants=2, train_variants=1)
    with pytest.raises(ValueError, match="extra_train_phrases"):
        _cfg(extra_train_phrases=-1)
    with pytest.raises(ValueError, match="phrases given"):
        build_speech_set(_cfg(extra_train_phrases=1), None, False, phrases=PHRASES[:4])


def test_builds_from_the_same_seed_are_bit_identical(tmp_path):
    """Two builds (other synthesis in between, as in a process that built another set
    first) give the same audio: before synthesis was reproducible they did not."""
    pytest.importorskip("espeakng_loader")
    a = build_speech_set(_cfg(), None, False, phrases=PHRASES[:4])
    synthesize("an unrelated call", voice="en-us+f3")
    b = build_speech_set(_cfg(), tmp_path, False, phrases=PHRASES[:4])
    assert a.texts == b.texts and len(a) == 4
    for x, y in zip(a.audio, b.audio, strict=True):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(a.visemes, b.visemes, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.synthesis == b.synthesis == synthesis_id()
    assert _data_meta(a) == _data_meta(b) and _data_meta(a)["synthesis"] == synthesis_id()
    c = build_speech_set(_cfg(), tmp_path, False, phrases=PHRASES[:4])  # from the cache
    assert c.synthesis == synthesis_id() and _data_meta(c) == _data_meta(a)


def test_a_cache_without_a_synthesiser_is_read_with_a_warning(tmp_path):
    """A cache written before synthesis was reproducible is read as it is (the audio the
    runs on it saw), with a warning; its meta names no synthesiser, as before."""
    pytest.importorskip("espeakng_loader")
    built = build_speech_set(_cfg(), tmp_path, False, phrases=PHRASES[:4])
    (path,) = tmp_path.glob("mome_speech_*.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != "synthesis"}
    arrays["audio"] = arrays["audio"] * 0.5  # other audio than a rebuild's
    np.savez(path, **arrays)
    with pytest.warns(UserWarning, match="before espeak-ng synthesis was reproducible"):
        old = build_speech_set(_cfg(), tmp_path, False, phrases=PHRASES[:4])
    assert old.synthesis is None and "synthesis" not in _data_meta(old)
    np.testing.assert_array_equal(old.audio[0], built.audio[0] * 0.5)
    arrays["synthesis"] = np.array("espeak-ng 0.0.0, fresh seeded instance per call")
    np.savez(path, **arrays)
    with pytest.warns(UserWarning, match="espeak-ng 0.0.0"):
        other = build_speech_set(_cfg(), tmp_path, False, phrases=PHRASES[:4])
    assert other.synthesis.startswith("espeak-ng 0.0.0")
