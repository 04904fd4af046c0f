import pytest
import torch

from sci_moe.language.mxd import SOURCES, corpus_windows, document_windows


def _tok(text):
    return list(text.encode("utf-8"))


def test_split_is_by_document_and_windows_stay_inside_documents():
    docs = [[f"doc{i} " * (5 + i) for i in range(20)], ["news " * 30 for _ in range(10)]]
    tr = document_windows(docs, _tok, 8, split="train", val_fraction=0.2)
    va = document_windows(docs, _tok, 8, split="val", val_fraction=0.2)
    for s in (0, 1):
        a = set(tr.doc[tr.source == s].tolist())
        b = set(va.doc[va.source == s].tolist())
        assert a and b and not a & b
    # every window is a slice of its own document
    for i in range(len(tr)):
        text = docs[int(tr.source[i])][int(tr.doc[i])]
        assert bytes(tr.ids[i].tolist()).decode() in text
    capped = document_windows(docs, _tok, 8, max_windows_per_source=3)
    assert torch.equal(torch.bincount(capped.source), torch.tensor([3, 3]))


def test_bad_window_arguments():
    docs = [["short"]]
    with pytest.raises(ValueError, match="shorter context_len"):
        document_windows(docs, _tok, 64, val_fraction=0.5)
    with pytest.raises(ValueError, match="split"):
        document_windows(docs, _tok, 4, split="test")
    with pytest.raises(ValueError, match="context_len"):
        document_windows(docs, _tok, 1)


def test_corpus_windows_come_from_both_shipped_corpora():
    w = corpus_windows(_tok, 32, split="val", max_windows_per_source=4)
    assert w.sources == SOURCES
    assert torch.equal(torch.bincount(w.source), torch.tensor([4, 4]))
    assert w.ids.shape == (8, 32)
