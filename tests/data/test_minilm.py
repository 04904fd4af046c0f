"""MiniLM sentence embeddings and their cache (sci_moe.data.minilm)."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.data.minilm import cached_embeddings, embed_texts, minilm_model_path, text_hash


def test_cached_embeddings_computes_once(tmp_path):
    calls = []

    def fake_embed(texts, scale=1.0):
        calls.append(list(texts))
        return scale * np.array([[len(t), t.count("a")] for t in texts], dtype=float)

    path = tmp_path / "sub" / "emb.npz"
    texts = ["alpha", "banana", "cherry"]
    a = cached_embeddings(texts, path, embed=fake_embed, scale=2.0)
    b = cached_embeddings(texts, path, embed=fake_embed, scale=2.0)
    np.testing.assert_array_equal(a, b)
    assert len(calls) == 1 and a[1, 1] == 6.0
    assert [p.name for p in path.parent.iterdir()] == ["emb.npz"]  # no temporary files left
    c = cached_embeddings(texts[:2], path, embed=fake_embed)  # other texts: recomputed
    assert len(calls) == 2 and c.shape == (2, 2)
    cached_embeddings(texts[:2], path, embed=fake_embed, model_id="other")
    assert len(calls) == 3
    assert text_hash(["ab", "c"]) != text_hash(["a", "bc"])

    def bad_embed(texts):
        return np.zeros(len(texts))

    with pytest.raises(ValueError, match="embed returned shape"):
        cached_embeddings(texts, tmp_path / "bad.npz", embed=bad_embed)


@pytest.mark.slow
def test_minilm_embeddings_match_mean_pooling_reference():
    """SentenceTransformer output = normalised mean of AutoModel token states (naive reference)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    texts = ["The shuttle reached orbit at dawn.", "Is morality possible without a god?"]
    X = embed_texts(texts, progress=False)
    assert X.shape == (2, 384) and X.dtype == np.float32
    path = str(minilm_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
    batch = tok(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=1).numpy()
    np.testing.assert_allclose(X, ref, atol=1e-5)
    with pytest.raises(ValueError, match="non-empty"):
        embed_texts([])
