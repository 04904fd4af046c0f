import numpy as np
import pytest

from sci_moe.data.wiki_pipelines import document_source, stratified_pool
from sci_moe.language.provenance import (
    SequenceSet,
    balance,
    document_split,
    make_sequences,
)


def _corpora(n_docs=10, words=50):
    a = [(f"doc{i}", "\n".join(f"alpha{i} w{j}." for j in range(words))) for i in range(n_docs)]
    b = [(f"doc{i}", " ".join(f"beta{i} w{j}" for j in range(words))) for i in range(n_docs)]
    return {"a": a, "b": b}


def test_sequences_keep_formatting_and_drop_partial_tail():
    data = make_sequences({"x": [("d", "a b\n\nc  d e")], "y": [("e", "f g h i")]}, seq_words=2)
    assert data.texts == ("a b", "c  d", "f g", "h i")
    assert data.labels.tolist() == [0, 0, 1, 1]
    assert data.groups == ("d", "d", "e", "e")
    assert data.classes == ("x", "y")


def test_document_split_has_no_overlap():
    data = make_sequences(_corpora(), seq_words=10)
    for seed in range(5):
        tr, te = document_split(data, 0.3, seed=seed)
        assert set(tr).isdisjoint(te) and len(tr) + len(te) == len(data)
        g_tr = {data.groups[i] for i in tr}
        g_te = {data.groups[i] for i in te}
        assert g_tr.isdisjoint(g_te)
        # shared source documents (same id in both corpora) stay on one side together
        assert {(data.groups[i], data.labels[i]) for i in te} == {
            (g, k) for g in g_te for k in (0, 1)
        }


def test_split_errors():
    data = make_sequences(_corpora(n_docs=3), seq_words=10)
    with pytest.raises(ValueError, match="needs at least 2"):
        document_split(data, 0.3, seed=0, min_documents=2)
    with pytest.raises(ValueError, match="test_fraction"):
        document_split(data, 1.5)
    one = make_sequences({"a": [("d", "x " * 20)], "b": [("d", "y " * 20)]}, seq_words=5)
    with pytest.raises(ValueError, match="at least 2 documents"):
        document_split(one)


def test_empty_or_short_corpus_errors():
    with pytest.raises(ValueError, match="corpus 'b'"):
        make_sequences({"a": [("d", "x " * 20)], "b": [("e", "too short")]}, seq_words=5)
    with pytest.raises(ValueError, match="corpus 'b'"):
        make_sequences({"a": [("d", "x " * 20)], "b": []}, seq_words=5)
    with pytest.raises(ValueError, match="at least 2 corpora"):
        make_sequences({"a": [("d", "x " * 20)]})


def test_balance():
    data = make_sequences({"a": [("d", "x " * 40)], "b": [("e", "y " * 10)]}, seq_words=5)
    idx = balance(data, np.arange(len(data)), seed=0)
    assert np.bincount(data.labels[idx]).tolist() == [2, 2]
    assert balance(data, np.arange(len(data)), per_class=1).size == 2


def _sourced(n_per_source=20):
    news = [f"news:{i}" for i in range(n_per_source)]
    groups = news + [f"T{i}" for i in range(n_per_source)]
    groups += [f"newsgroups:{i}" for i in range(n_per_source)]
    groups = groups * 2
    labels = np.repeat([0, 1], 3 * n_per_source)
    return SequenceSet(tuple("x" for _ in groups), labels, tuple(groups), ("a", "b"))


def test_stratified_pool_takes_the_shares_per_class():
    data = _sourced()
    idx = stratified_pool(data, 20, [0.5, 0.25, 0.25], seed=0)
    assert idx.size == 40 and np.unique(idx).size == 40 and np.all(np.diff(idx) > 0)
    for k in (0, 1):
        src = [document_source(data.groups[i]) for i in idx if data.labels[i] == k]
        assert (src.count("wiki"), src.count("newsgroups"), src.count("news")) == (10, 5, 5)
    assert np.array_equal(idx, stratified_pool(data, 20, [0.5, 0.25, 0.25], seed=0))
    assert not np.array_equal(idx, stratified_pool(data, 20, [0.5, 0.25, 0.25], seed=1))


def test_stratified_pool_tops_up_a_short_source():
    data = _sourced(n_per_source=4)  # 4 wiki sequences per class, 12 in all
    idx = stratified_pool(data, 10, [0.6, 0.2, 0.2], seed=0)
    for k in (0, 1):
        src = [document_source(data.groups[i]) for i in idx if data.labels[i] == k]
        assert len(src) == 10 and src.count("wiki") == 4
    # a class with fewer sequences than asked gives all of them
    assert stratified_pool(data, 50, [0.5, 0.25, 0.25], seed=0).size == 24


def test_stratified_pool_custom_sources_and_errors():
    data = _sourced()
    idx = stratified_pool(
        data, 6, [1.0, 0.0], seed=0, sources=("n", "other"), source_of=lambda g: g[0]
    )
    assert all(data.groups[i].startswith("n") for i in idx) and idx.size == 12
    with pytest.raises(ValueError, match="one fraction per source"):
        stratified_pool(data, 10, [0.5, 0.5], seed=0)
    with pytest.raises(ValueError, match="sum to 1"):
        stratified_pool(data, 10, [0.5, 0.25, 0.5], seed=0)
    with pytest.raises(ValueError, match="per_class"):
        stratified_pool(data, 0, [0.5, 0.25, 0.25], seed=0)
