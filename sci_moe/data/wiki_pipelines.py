"""K processing pipelines over one source: corpora whose only difference is the processing.

The offline ground truth of the dataset-fingerprint study (:mod:`sci_moe.language.provenance`):
the same Wikipedia articles (:func:`~sci_moe.data.wiki_markup.read_wiki_pages`) are pushed
through pipelines modelled on published web-filtering rules, so a classifier that tells the
outputs apart can only be reading processing fingerprints.

========== ==================================================================================
name       steps
========== ==================================================================================
``c4``     :func:`~sci_moe.data.wiki_markup.strip_plain`, then the C4 line/page filters
``gopher`` :func:`~sci_moe.data.wiki_markup.strip_markdown`, then the Gopher quality rules
``norm``   :func:`~sci_moe.data.wiki_markup.strip_text`, Unicode/white-space normalisation,
           documents of fewer than 50 words dropped
``dedup``  ``c4``, then MinHash-LSH removal of near-duplicate lines across the corpus
           (Jaccard >= 0.7 on word 3-grams) and the C4 page rule again
========== ==================================================================================

Every pipeline takes a ``seed`` (the MinHash permutations); the null control
(:func:`null_control_corpora`) runs one pipeline twice, with two seeds, on a random half of
the articles each, so the two outputs differ by nothing but their documents.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ..language.provenance import c4_filter, gopher_filter, minhash_dedup, normalize_text
from .wiki_markup import read_wiki_pages, strip_markdown, strip_plain, strip_text

__all__ = [
    "PIPELINES",
    "build_pipeline_corpora",
    "null_control_corpora",
    "run_pipeline",
    "wiki_pages",
]

Document = tuple[str, str]


@functools.lru_cache(maxsize=1)
def wiki_pages() -> tuple[Document, ...]:
    """The article pages of the shipped excerpt, ``(title, markup)`` (read once per process)."""
    return tuple(read_wiki_pages())


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
    return _processed(pages, lambda markup: c4_filter(strip_plain(markup)))


def _gopher(pages: Sequence[Document], seed: int) -> list[Document]:
    return _processed(pages, lambda markup: gopher_filter(strip_markdown(markup)))


def _norm(pages: Sequence[Document], seed: int) -> list[Document]:
    return _processed(
        pages, lambda markup: normalize_text(strip_text(markup)), lambda t: len(t.split()) >= 50
    )


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
    names: Sequence[str] = ("c4", "gopher", "norm", "dedup"), seed: int = 1
) -> dict[str, list[Document]]:
    """``{name: documents}`` for several pipelines over the same articles."""
    if len(set(names)) != len(names):
        raise ValueError(f"pipeline names must be distinct, got {list(names)}")
    return {n: run_pipeline(n, seed=seed) for n in names}


def null_control_corpora(
    name: str = "c4", seeds: tuple[int, int] = (1, 2), partition_seed: int = 0
) -> dict[str, list[Document]]:
    """Two runs of one pipeline with different seeds, on disjoint random halves of the articles.

    The ground truth is "no difference": any classifier must score at chance (1/2) on a
    document-level split.

    Returns
    -------
    dict
        ``{f"{name}#{seeds[0]}": docs, f"{name}#{seeds[1]}": docs}``.
    """
    if len(seeds) != 2 or seeds[0] == seeds[1]:
        raise ValueError(f"seeds must be two different integers, got {seeds}")
    pages = wiki_pages()
    order = np.random.default_rng(partition_seed).permutation(len(pages))
    halves = (order[: len(pages) // 2], order[len(pages) // 2 :])
    return {
        f"{name}#{s}": run_pipeline(name, [pages[i] for i in sorted(h)], seed=s)
        for s, h in zip(seeds, halves, strict=True)
    }
