"""Token windows from the offline corpora, split by document.

The text is the corpus of :mod:`sci_moe.language`: the cleaned Wikipedia pages and the
Lee news articles that ship inside the gensim wheel (no download). Each document is
tokenised on its own by the model's tokenizer and cut into non-overlapping windows of
``context_len`` tokens that never cross a document boundary. Documents, not windows, are
assigned to the training or validation split (a fixed, seeded choice of
``val_fraction`` of each source's documents), so no text is shared between the two.
Every window carries its source label (0 = Wikipedia, 1 = news), the labelled task of the
sparse-probing benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..data import lee_documents, wiki_documents

__all__ = ["SOURCES", "TokenWindows", "corpus_windows", "document_windows"]

#: Source names, in label order.
SOURCES = ("wikipedia", "lee_news")


@dataclass(frozen=True)
class TokenWindows:
    """Fixed-length token windows with their provenance.

    Attributes
    ----------
    ids : Tensor, int64, shape (n_windows, context_len)
    source : Tensor, int64, shape (n_windows,)
        Index into ``sources`` of the corpus each window comes from.
    doc : Tensor, int64, shape (n_windows,)
        Index of the window's document within its source.
    sources : tuple of str
    """

    ids: torch.Tensor
    source: torch.Tensor
    doc: torch.Tensor
    sources: tuple[str, ...] = SOURCES

    def __post_init__(self) -> None:
        if self.ids.ndim != 2 or self.ids.dtype != torch.int64:
            raise ValueError(f"ids must be an int64 (n, context_len) tensor, got {self.ids.shape}")
        n = self.ids.shape[0]
        if self.source.shape != (n,) or self.doc.shape != (n,):
            raise ValueError("source and doc must have one entry per window")

    def __len__(self) -> int:
        return self.ids.shape[0]

    @property
    def context_len(self) -> int:
        """Tokens per window."""
        return self.ids.shape[1]

    def subset(self, index: torch.Tensor | slice) -> TokenWindows:
        """The windows at ``index`` (a slice or an index tensor)."""
        return TokenWindows(self.ids[index], self.source[index], self.doc[index], self.sources)


def _split_docs(n_docs: int, val_fraction: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n_docs, generator=g)
    is_val = torch.zeros(n_docs, dtype=torch.bool)
    is_val[perm[: max(1, round(n_docs * val_fraction))]] = True
    return is_val


def document_windows(
    documents: Sequence[Sequence[str]],
    tokenize: Callable[[str], list[int]],
    context_len: int,
    split: str = "train",
    val_fraction: float = 0.1,
    max_windows_per_source: int | None = None,
    seed: int = 0,
    sources: Sequence[str] | None = None,
) -> TokenWindows:
    """Windows of ``context_len`` tokens from labelled document collections.

    Parameters
    ----------
    documents : sequence of sequence of str
        One collection of documents per source (label = position in the sequence).
    tokenize : callable
        ``text -> list of token ids`` (e.g. a Hugging Face tokenizer's ``encode`` with
        ``add_special_tokens=False``).
    context_len : int
        Tokens per window (>= 2).
    split : {"train", "val"}
    val_fraction : float
        Fraction of each source's documents held out for validation, in (0, 1).
    max_windows_per_source : int, optional
        Keep at most this many windows per source (the first ones, in document order).
    seed : int
        Seed of the document split.
    sources : sequence of str, optional
        Names of the sources (default ``"source0"``, ...).

    Returns
    -------
    TokenWindows
    """
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    if isinstance(context_len, bool) or not isinstance(context_len, int) or context_len < 2:
        raise ValueError(f"context_len must be an integer >= 2, got {context_len!r}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if max_windows_per_source is not None and max_windows_per_source < 1:
        raise ValueError(f"max_windows_per_source must be >= 1, got {max_windows_per_source}")
    names = (
        tuple(sources)
        if sources is not None
        else tuple(f"source{i}" for i in range(len(documents)))
    )
    if len(names) != len(documents):
        raise ValueError(f"{len(names)} source names for {len(documents)} document collections")
    ids, src, doc = [], [], []
    for label, docs in enumerate(documents):
        if not docs:
            raise ValueError(f"source {names[label]!r} has no documents")
        is_val = _split_docs(len(docs), val_fraction, seed + label)
        kept = 0
        for i, text in enumerate(docs):
            if bool(is_val[i]) != (split == "val"):
                continue
            toks = list(tokenize(text))
            for start in range(0, len(toks) - context_len + 1, context_len):
                if max_windows_per_source is not None and kept >= max_windows_per_source:
                    break
                ids.append(toks[start : start + context_len])
                src.append(label)
                doc.append(i)
                kept += 1
        if kept == 0:
            raise ValueError(
                f"source {names[label]!r} gives no {split} window of {context_len} tokens; "
                "use a shorter context_len"
            )
    return TokenWindows(
        torch.tensor(ids, dtype=torch.int64),
        torch.tensor(src, dtype=torch.int64),
        torch.tensor(doc, dtype=torch.int64),
        names,
    )


def corpus_windows(
    tokenize: Callable[[str], list[int]], context_len: int, **options
) -> TokenWindows:
    """:func:`document_windows` over the shipped corpora (Wikipedia excerpt, Lee news).

    ``options`` are the keyword arguments of :func:`document_windows` (``split``,
    ``val_fraction``, ``max_windows_per_source``, ``seed``); the sources are
    :data:`SOURCES`.
    """
    return document_windows(
        (wiki_documents(), lee_documents()), tokenize, context_len, sources=SOURCES, **options
    )
