import numpy as np
import pytest

from sci_moe.language.provenance import balance, document_split, make_sequences


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
