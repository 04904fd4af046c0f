"""K processing pipelines over one source: corpora whose only difference is the processing.

The offline ground truth of the dataset-fingerprint study (:mod:`sci_moe.language.provenance`):
the same Wikipedia articles (:func:`~sci_moe.data.wiki_markup.read_wiki_pages`) are pushed
through pipelines modelled on published web-filtering rules, so a classifier that tells the
outputs apart can only be reading processing fingerprints.

========== ==================================================================================
name       steps
========== ==================================================================================
``c4``     :func:`~sci_moe.data.wiki_markup.strip_plain`, then the C4 line/page filters, then
           page-level language ID at the strict threshold :data:`C4_LANGUAGE_THRESHOLD`
``gopher`` :func:`~sci_moe.data.wiki_markup.strip_markdown`, then the Gopher quality rules
``norm``   :func:`~sci_moe.data.wiki_markup.strip_text`, Unicode/white-space normalisation,
           line-level language ID at the lenient :data:`NORM_LANGUAGE_THRESHOLD`,
           documents of fewer than 50 words dropped
``dedup``  ``c4``, then MinHash-LSH removal of near-duplicate lines across the corpus
           (Jaccard >= 0.7 on word 3-grams) and the C4 page rule again
========== ==================================================================================

Language ID is :func:`~sci_moe.language.provenance.language_id_filter` (a function-word
score standing in for langdetect / fastText, which are not available offline).

Sources (:func:`source_documents`): ``wiki`` (the article pages of gensim's Wikipedia
excerpt, MediaWiki markup), ``newsgroups`` (the 200 raw Usenet posts of gensim's
``mini_newsgroup``: headers, quoted replies and signatures included) and ``news`` (the 300
news articles of gensim's ``lee_background.cor``, one paragraph each). Titles of the two
latter are ``"newsgroups:<i>"`` and ``"news:<i>"`` (:func:`document_source`).

Every pipeline takes a ``seed`` (the MinHash permutations); the null control
(:func:`null_control_corpora`) runs one pipeline twice, with two seeds, on a random half of
the articles each, so the two outputs differ by nothing but their documents.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ..language.provenance import (
    SequenceSet,
    c4_filter,
    gopher_filter,
    language_id_filter,
    minhash_dedup,
    normalize_text,
)
from .gensim_files import gensim_test_file
from .wiki_markup import read_wiki_pages, strip_markdown, strip_plain, strip_text

__all__ = [
    "C4_LANGUAGE_THRESHOLD",
    "NORM_LANGUAGE_THRESHOLD",
    "PIPELINES",
    "SOURCES",
    "build_pipeline_corpora",
    "document_source",
    "null_control_corpora",
    "run_pipeline",
    "source_documents",
    "stratified_pool",
    "wiki_pages",
]

#: ``c4``: page-level language-ID threshold (strict, as C4's langdetect >= 0.99).
C4_LANGUAGE_THRESHOLD = 0.25
#: ``norm``: line-level language-ID threshold (lenient, lines of >= 4 words judged).
NORM_LANGUAGE_THRESHOLD = 0.1
#: The source corpora :func:`source_documents` knows.
SOURCES = ("wiki", "newsgroups", "news")

Document = tuple[str, str]


@functools.lru_cache(maxsize=1)
def wiki_pages() -> tuple[Document, ...]:
    """The article pages of the shipped excerpt, ``(title, markup)`` (read once per process)."""
    return tuple(read_wiki_pages())


@functools.lru_cache(maxsize=4)
def _source(name: str) -> tuple[Document, ...]:
    if name == "wiki":
        return wiki_pages()
    if name == "newsgroups":
        from .newsgroups import load_mini_newsgroups

        posts = load_mini_newsgroups()["data"]
        return tuple((f"newsgroups:{i}", p) for i, p in enumerate(posts) if p.strip())
    if name == "news":
        path = gensim_test_file("lee_background.cor")
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = [ln.strip() for ln in fh]
        return tuple((f"news:{i}", ln) for i, ln in enumerate(lines) if ln)
    raise ValueError(f"unknown source {name!r}; choose from {list(SOURCES)}")


def source_documents(sources: Sequence[str] = ("wiki",)) -> tuple[Document, ...]:
    """The raw ``(title, text)`` documents of the named sources (see the module docstring), in
    order; read once per process."""
    if isinstance(sources, str):
        sources = (sources,)
    return tuple(d for name in sources for d in _source(name))


def document_source(title: str) -> str:
    """The source a document title belongs to: ``"newsgroups"``, ``"news"`` or ``"wiki"``.

    Examples
    --------
    >>> document_source("news:12"), document_source("Anarchism")
    ('news', 'wiki')
    """
    head = title.split(":", 1)[0]
    return head if head in SOURCES and ":" in title else "wiki"


def _processed(docs, process: Callable, keep: Callable[[str], bool] = bool) -> list[Document]:
    """``(title, process(x))`` for every ``(title, x)`` of ``docs`` whose text ``keep`` accepts
    (by default: a non-empty one), in order."""
    out = []
    for title, x in docs:
        text = process(x)
        if keep(text):
            out.append((title, text))
    return out


def _c4(pages: Sequence[Document], seed: int) -> list[Document]:
    def process(markup):
        text = c4_filter(strip_plain(markup))
        return text and language_id_filter(text, C4_LANGUAGE_THRESHOLD)

    return _processed(pages, process)


def _gopher(pages: Sequence[Document], seed: int) -> list[Document]:
    return _processed(pages, lambda markup: gopher_filter(strip_markdown(markup)))


def _norm(pages: Sequence[Document], seed: int) -> list[Document]:
    def process(markup):
        text = normalize_text(strip_text(markup))
        return language_id_filter(text, NORM_LANGUAGE_THRESHOLD, per_line=True, min_words=4)

    return _processed(pages, process, lambda t: t is not None and len(t.split()) >= 50)


def _dedup(pages: Sequence[Document], seed: int) -> list[Document]:
    docs = _c4(pages, seed)
    lines = [(d, ln) for d, (_, text) in enumerate(docs) for ln in text.split("\n")]
    keep = set(minhash_dedup([ln for _, ln in lines], threshold=0.7, ngram=3, seed=seed))
    per_doc: list[list[str]] = [[] for _ in docs]
    for i, (d, ln) in enumerate(lines):
        if i in keep:
            per_doc[d].append(ln)
    titles = [title for title, _ in docs]
    return _processed(zip(titles, per_doc, strict=True), lambda kept: c4_filter("\n".join(kept)))


#: Pipeline name -> ``fn(pages, seed) -> [(title, text)]``.
PIPELINES: dict[str, Callable[[Sequence[Document], int], list[Document]]] = {
    "c4": _c4,
    "gopher": _gopher,
    "norm": _norm,
    "dedup": _dedup,
}


def run_pipeline(
    name: str, pages: Sequence[Document] | None = None, seed: int = 1
) -> list[Document]:
    """Run pipeline ``name`` (see the module table) over ``pages`` (default: the excerpt).

    Returns
    -------
    list of (title, text)
        The documents that survive, in source order; the title is the split key.
    """
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; choose from {sorted(PIPELINES)}")
    return PIPELINES[name](wiki_pages() if pages is None else pages, seed)


def build_pipeline_corpora(
    names: Sequence[str] = ("c4", "gopher", "norm", "dedup"),
    seed: int = 1,
    sources: Sequence[str] = ("wiki",),
) -> dict[str, list[Document]]:
    """``{name: documents}`` for several pipelines over the same documents of ``sources``
    (:func:`source_documents`)."""
    if len(set(names)) != len(names):
        raise ValueError(f"pipeline names must be distinct, got {list(names)}")
    pages = source_documents(sources)
    return {n: run_pipeline(n, pages, seed=seed) for n in names}


def null_control_corpora(
    name: str = "c4",
    seeds: tuple[int, int] = (1, 2),
    partition_seed: int = 0,
    sources: Sequence[str] = ("wiki",),
) -> dict[str, list[Document]]:
    """Two runs of one pipeline with different seeds, on disjoint random halves of the
    documents of ``sources`` (:func:`source_documents`).

    The ground truth is "no difference": any classifier must score at chance (1/2) on a
    document-level split.

    Returns
    -------
    dict
        ``{f"{name}#{seeds[0]}": docs, f"{name}#{seeds[1]}": docs}``.
    """
    if len(seeds) != 2 or seeds[0] == seeds[1]:
        raise ValueError(f"seeds must be two different integers, got {seeds}")
    pages = source_documents(sources)
    order = np.random.default_rng(partition_seed).permutation(len(pages))
    halves = (order[: len(pages) // 2], order[len(pages) // 2 :])
    return {
        f"{name}#{s}": run_pipeline(name, [pages[i] for i in sorted(h)], seed=s)
        for s, h in zip(seeds, halves, strict=True)
    }


def stratified_pool(
    data: SequenceSet,
    per_class: int,
    share: Sequence[float],
    seed: int = 0,
    *,
    sources: Sequence[str] = SOURCES,
    source_of: Callable[[str], str] | None = None,
) -> np.ndarray:
    """Draw ``per_class`` sequences per class, a given share of them from each source.

    For every class, ``round(share[j] * per_class)`` sequences are drawn at random (without
    replacement) from the class's sequences of source ``sources[j]``, in the order of
    ``sources``; the last source takes what is left of ``per_class``. A source short of
    sequences gives all it has and the class is topped up at random from its other
    sequences. A class with fewer than ``per_class`` sequences gives all of them.

    Parameters
    ----------
    data : SequenceSet
        The source of a sequence is ``source_of(data.groups[i])``.
    per_class : int
        Sequences per class, >= 1.
    share : sequence of float, length S
        Fraction of ``per_class`` from each source, >= 0, summing to 1 (e.g. the
        fingerprints benchmark's ``[0.5, 0.25, 0.25]``: half from ``wiki``, a quarter from
        each of ``newsgroups`` and ``news``).
    seed : int
    sources : sequence of str, length S, optional
        Default :data:`SOURCES` (``wiki``, ``newsgroups``, ``news``).
    source_of : callable, optional
        Document id -> source name; default :func:`document_source`.

    Returns
    -------
    ndarray of int, shape (<= K * per_class,)
        Increasing indices into ``data`` (``K * per_class`` when every class has enough).

    Examples
    --------
    >>> groups = tuple(f"news:{i}" for i in range(8)) + tuple(f"T{i}" for i in range(8))
    >>> from sci_moe.language.provenance import SequenceSet
    >>> data = SequenceSet(("x",) * 16, np.zeros(16, dtype=int), groups, ("a",))
    >>> idx = stratified_pool(data, 4, [0.5, 0.25, 0.25], seed=0)
    >>> int((idx >= 8).sum()), len(idx)  # wiki sequences (T*), all drawn
    (2, 4)
    """
    source_of = document_source if source_of is None else source_of
    sources = tuple(sources)
    share = [float(x) for x in share]
    if int(per_class) != per_class or per_class < 1:
        raise ValueError(f"per_class must be an integer >= 1, got {per_class}")
    per_class = int(per_class)
    if len(share) != len(sources) or not sources:
        raise ValueError(
            f"share has {len(share)} entries but there are {len(sources)} sources "
            f"{list(sources)}: give one fraction per source"
        )
    if any(not np.isfinite(x) or x < 0 for x in share) or abs(sum(share) - 1.0) > 1e-6:
        raise ValueError(f"share must be fractions >= 0 that sum to 1, got {share}")
    rng = np.random.default_rng(seed)
    labels = np.asarray(data.labels)
    src = np.array([source_of(g) for g in data.groups])
    out = []
    for k in range(len(data.classes)):
        taken: list[np.ndarray] = []
        left = per_class
        for j, s in enumerate(sources):
            cand = np.flatnonzero((labels == k) & (src == s))
            room = per_class - sum(map(len, taken))
            n = room if j == len(sources) - 1 else min(round(share[j] * per_class), room)
            pick = rng.choice(cand, size=min(n, cand.size), replace=False)
            taken.append(pick)
            left -= pick.size
        if left > 0:
            rest = np.setdiff1d(np.flatnonzero(labels == k), np.concatenate(taken))
            taken.append(rng.choice(rest, size=min(left, rest.size), replace=False))
        out.append(np.concatenate(taken))
    return np.sort(np.concatenate(out))
