"""The offline ground truth: pipelines over the gensim Wikipedia excerpt, null control at chance."""

import numpy as np
import pytest

pytest.importorskip("datasketch")

from sci_moe.data.wiki_markup import strip_markdown, strip_plain, strip_text
from sci_moe.data.wiki_pipelines import (
    null_control_corpora,
    run_pipeline,
    wiki_pages,
)
from sci_moe.language.provenance import (
    BagOfWordsClassifier,
    accuracy_interval,
    balance,
    document_split,
    make_sequences,
)

MARKUP = (
    "'''Foo''' is a [[bar|Bar]] town.<ref>{{cite web|url=x}}</ref> It has {{convert|3|km}} "
    "roads.\n== History ==\n* [[Item one]]\n# second\n[[File:X.jpg|thumb|A caption]]\n"
    "<!-- hidden -->{| class=table\n|a\n|}\nEnd of [http://x.org the text]."
)


def test_strippers_on_fixed_markup():
    assert (
        strip_plain(MARKUP)
        == "Foo is a Bar town. It has roads.\nItem one\nsecond\nEnd of the text."
    )
    assert strip_markdown(MARKUP) == (
        "**Foo** is a Bar town. It has roads.\n## History\n- Item one\n1. second\n\n"
        "End of the text."
    )
    assert "A caption" in strip_text(MARKUP) and "History" in strip_text(MARKUP)


def test_pipelines_share_source_titles():
    pages = list(wiki_pages()[:12])
    assert len(wiki_pages()) == 106
    c4 = run_pipeline("c4", pages)
    gopher = run_pipeline("gopher", pages)
    assert c4 and gopher
    titles = {t for t, _ in pages}
    assert {t for t, _ in c4} <= titles and {t for t, _ in gopher} <= titles
    assert any("## " in t for _, t in gopher) and not any("## " in t for _, t in c4)
    with pytest.raises(ValueError, match="unknown pipeline"):
        run_pipeline("nope", pages)


def _bow_accuracy(corpora, seed):
    data = make_sequences(corpora, seq_words=64, max_per_document=8)
    tr, te = document_split(data, 0.3, seed=seed)
    tr, te = balance(data, tr, seed=seed), balance(data, te, seed=seed)
    clf = BagOfWordsClassifier().fit([data.texts[i] for i in tr], data.labels[tr])
    groups = [data.groups[i] for i in te]  # sequences of one article are not independent
    return accuracy_interval(
        data.labels[te], clf.predict([data.texts[i] for i in te]), groups=groups
    )


def test_null_control_is_at_chance():
    acc, lo, hi = _bow_accuracy(null_control_corpora("c4", seeds=(1, 2)), seed=0)
    assert lo <= 0.5 <= hi, (acc, lo, hi)


def test_different_pipelines_are_separable():
    pages = list(wiki_pages()[:40])
    corpora = {n: run_pipeline(n, pages) for n in ("c4", "gopher")}
    acc, lo, _ = _bow_accuracy(corpora, seed=0)
    assert lo > 0.5, acc
    assert np.isfinite(acc)


def test_sources_and_their_pipelines():
    from sci_moe.data.wiki_pipelines import (
        build_pipeline_corpora,
        document_source,
        source_documents,
    )

    news = source_documents("news")
    groups = source_documents(("newsgroups",))
    assert len(news) == 300 and len(groups) == 200
    assert document_source(news[0][0]) == "news" and document_source(groups[0][0]) == "newsgroups"
    assert document_source("Anarchism") == document_source("A: B") == "wiki"
    assert groups[0][1].startswith(("From:", "Xref:", "Newsgroups:", "Path:"))
    out = build_pipeline_corpora(("c4", "norm"), sources=("newsgroups",))
    c4 = dict(out["c4"])
    norm = dict(out["norm"])
    # c4 drops header lines (no terminal punctuation); norm keeps short ones
    assert not any(t.startswith(("Path:", "Newsgroups:")) for t in c4.values())
    assert any("Newsgroups:" in t for t in norm.values())
    with pytest.raises(ValueError, match="unknown source"):
        source_documents(("web",))
