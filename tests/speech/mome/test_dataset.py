"""Extra training data of the MoME speech set: the validation and test utterances stay."""

import numpy as np
import pytest

from sci_moe.speech.mome import SpeechSetConfig, build_speech_set

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
