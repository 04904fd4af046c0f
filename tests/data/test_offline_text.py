"""The offline million-token corpus: its sources, and splits that share no document."""

import pytest
import torch

pytest.importorskip("gensim")

from sci_moe.data.offline_text import (
    OFFLINE_TEXT_SOURCES,
    offline_text_documents,
    offline_text_windows,
)


def _bytes(text: str) -> list[int]:
    return list(text.encode("utf-8"))


@pytest.mark.parametrize("source", OFFLINE_TEXT_SOURCES)
def test_every_source_has_documents_of_text(source):
    docs = offline_text_documents(source)
    assert len(docs) >= 100 and all(isinstance(d, str) and d.strip() for d in docs)
    assert offline_text_documents(source) is docs  # read once per process


def test_the_corpus_is_large_enough_for_a_million_tokens():
    # SmolLM2's tokenizer gives ~4.1 characters per token on this text (measured)
    chars = sum(len(d) for s in OFFLINE_TEXT_SOURCES for d in offline_text_documents(s))
    assert chars > 5_000_000


def test_newsgroup_posts_lose_their_header_block():
    assert not any(d.startswith("From:") for d in offline_text_documents("newsgroups"))


def test_splits_are_disjoint_by_document_and_labelled_by_source():
    sources = ("lee_news", "newsgroups")
    w = {
        s: offline_text_windows(_bytes, 64, split=s, sources=sources)
        for s in ("train", "val", "test")
    }
    for split, win in w.items():
        assert win.sources == sources and win.context_len == 64
        assert set(win.source.tolist()) == {0, 1}, split
    for label in (0, 1):
        docs = {s: set(win.doc[win.source == label].tolist()) for s, win in w.items()}
        assert not docs["train"] & docs["val"] and not docs["train"] & docs["test"]
        assert not docs["val"] & docs["test"]
        assert all(d % 2 == 0 for d in docs["val"]) and all(d % 2 == 1 for d in docs["test"])
    capped = offline_text_windows(
        _bytes, 64, split="test", sources=sources, max_windows_per_source=3
    )
    assert torch.bincount(capped.source).tolist() == [3, 3]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown source"):
        offline_text_documents("gutenberg")
    with pytest.raises(ValueError, match="split"):
        offline_text_windows(_bytes, 64, split="dev")
    with pytest.raises(ValueError, match="subset"):
        offline_text_windows(_bytes, 64, sources=("lee_news", "books"))
