"""The planted-fMRI builder reads cached MiniLM targets and plants voxels on them."""

from __future__ import annotations

import numpy as np

from sci_moe._util import atomic_save_npz
from sci_moe.data.minilm import text_hash
from sci_moe.data.newsgroups import newsgroup_sentences
from sci_moe.data.planted_fmri import planted_fmri


def test_builder_uses_the_embedding_cache(tmp_path):
    texts, _, _ = newsgroup_sentences()
    keep = np.sort(np.random.default_rng(0).choice(len(texts), 60, False))
    sub = [texts[i] for i in keep]
    emb = np.random.default_rng(1).standard_normal((60, 384)).astype(np.float32)
    cache = tmp_path / "emb.npz"
    atomic_save_npz(cache, {"features": emb, "key": np.array(text_hash(sub, "all-MiniLM-L6-v2"))})
    out_texts, d = planted_fmri(
        num_voxels=32, num_subjects=2, snr=1.0, max_sentences=60, seed=0, cache=cache
    )
    assert out_texts == sub
    np.testing.assert_array_equal(d.targets, emb)
    assert d.voxels["subj02"].shape == (60, 32) and d.roi["subj01"].shape == (4, 32)
