"""A million-token English corpus from text that ships offline, split by document.

The activation collections of the MxD benchmark (``benchmarks/mxd/frontier.py``) need
more text than the Wikipedia excerpt and news articles of
:func:`sci_moe.language.mxd.corpus_windows` (about 0.6M SmolLM2 tokens). This module adds
two more sources, all read from files installed with the package's dependencies (no
download):

================ ===================================================================
source           documents (SmolLM2 tokens, measured)
================ ===================================================================
``wikipedia``    the article pages of gensim's Wikipedia excerpt, markup removed by
                 :func:`~sci_moe.data.wiki_markup.strip_text` (lists and short lines
                 kept; ~0.68M)
``lee_news``     the 300 Lee news articles of gensim's ``lee_background.cor``, one
                 per line (~75k)
``newsgroups``   the 200 posts of gensim's ``mini_newsgroup``, header block removed
                 (quotes and signatures kept; ~0.15M)
``python_docs``  the reference topics of CPython's ``pydoc_data`` and the docstrings
                 (>= 200 characters) of the standard library's modules, classes and
                 functions (tests and IDLE excluded; ~0.4M with Python 3.11)
================ ===================================================================

``python_docs`` depends on the Python version (the token hash of a collection
records exactly which text it holds). Documents, not windows, are assigned to the splits
(:func:`sci_moe.language.mxd.document_windows`, a seeded choice of ``val_fraction`` of
each source's documents); :func:`offline_text_windows` further cuts the held-out
documents into a validation half and a test half (by document index parity) so a
learning rate can be chosen on one and reported on the other.
"""

from __future__ import annotations

import ast
import functools
import sysconfig
from collections.abc import Callable
from pathlib import Path

import torch

from ..language.mxd import TokenWindows, document_windows

__all__ = ["OFFLINE_TEXT_SOURCES", "offline_text_documents", "offline_text_windows"]

#: The sources of :func:`offline_text_documents`, in label order.
OFFLINE_TEXT_SOURCES = ("wikipedia", "lee_news", "newsgroups", "python_docs")

_MIN_DOCSTRING = 200


def _wikipedia() -> tuple[str, ...]:
    from .wiki_markup import strip_text
    from .wiki_pipelines import wiki_pages

    return tuple(t for t in (strip_text(m).strip() for _, m in wiki_pages()) if t)


def _lee_news() -> tuple[str, ...]:
    from .wiki_pipelines import source_documents

    return tuple(text for _, text in source_documents(("news",)))


def _newsgroups() -> tuple[str, ...]:
    from .newsgroups import load_mini_newsgroups

    out = []
    for post in load_mini_newsgroups()["data"]:
        parts = post.split("\n\n", 1)
        body = (parts[1] if len(parts) == 2 else parts[0]).strip()
        if body:
            out.append(body)
    return tuple(out)


def _python_docs() -> tuple[str, ...]:
    import pydoc_data.topics as topics

    docs = [topics.topics[k].strip() for k in sorted(topics.topics)]
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idlelib", "site-packages", "lib2to3"}
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if skip & set(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        parts = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= _MIN_DOCSTRING:
                    parts.append(doc.strip())
        if parts:  # one document per module: its docstrings in walk order
            docs.append("\n\n".join(parts))
    return tuple(d for d in docs if d)


@functools.lru_cache(maxsize=len(OFFLINE_TEXT_SOURCES))
def offline_text_documents(source: str) -> tuple[str, ...]:
    """The documents of one source of :data:`OFFLINE_TEXT_SOURCES` (read once per process).

    Parameters
    ----------
    source : str
        ``"wikipedia"``, ``"lee_news"``, ``"newsgroups"`` or ``"python_docs"``.

    Returns
    -------
    tuple of str
        Non-empty documents, in a fixed order.
    """
    readers: dict[str, Callable[[], tuple[str, ...]]] = {
        "wikipedia": _wikipedia,
        "lee_news": _lee_news,
        "newsgroups": _newsgroups,
        "python_docs": _python_docs,
    }
    if source not in readers:
        raise ValueError(f"unknown source {source!r}; choose from {OFFLINE_TEXT_SOURCES}")
    return tuple(readers[source]())


def offline_text_windows(
    tokenize: Callable[[str], list[int]],
    context_len: int,
    split: str = "train",
    sources: tuple[str, ...] = OFFLINE_TEXT_SOURCES,
    val_fraction: float = 0.1,
    seed: int = 0,
    max_windows_per_source: int | None = None,
) -> TokenWindows:
    """Token windows of the offline corpus, split by document.

    Parameters
    ----------
    tokenize : callable
        ``text -> list of token ids`` (e.g. :meth:`PretrainedModel.tokenize
        <sci_moe.language.mxd.PretrainedModel.tokenize>`).
    context_len : int
        Tokens per window (windows never cross a document boundary).
    split : {"train", "val", "test"}
        ``"train"``: the documents not held out; ``"val"`` / ``"test"``: the held-out
        documents (``val_fraction`` of each source's) of even / odd document index.
    sources : tuple of str
        A subset of :data:`OFFLINE_TEXT_SOURCES` (labels follow this order).
    val_fraction : float
        Fraction of each source's documents held out (validation and test together).
    seed : int
        Seed of the document split.
    max_windows_per_source : int, optional
        Keep at most this many windows per source (the first ones, in document order).

    Returns
    -------
    TokenWindows
        ``sources`` holds the source names; ``doc`` the document index in its source.
    """
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    sources = tuple(sources)
    if not sources or any(s not in OFFLINE_TEXT_SOURCES for s in sources):
        raise ValueError(f"sources must be a non-empty subset of {OFFLINE_TEXT_SOURCES}")
    docs = [offline_text_documents(s) for s in sources]
    if split == "train":
        return document_windows(
            docs,
            tokenize,
            context_len,
            split="train",
            val_fraction=val_fraction,
            max_windows_per_source=max_windows_per_source,
            seed=seed,
            sources=sources,
        )
    held = document_windows(
        docs, tokenize, context_len, split="val", val_fraction=val_fraction, seed=seed,
        sources=sources,
    )  # fmt: skip
    keep = (held.doc % 2 == (0 if split == "val" else 1)).nonzero().flatten()
    if max_windows_per_source is not None:
        per = [keep[held.source[keep] == s][:max_windows_per_source] for s in range(len(sources))]
        keep = torch.cat(per).sort().values
    if keep.numel() == 0:
        raise ValueError(f"no {split} window of {context_len} tokens; use a shorter context_len")
    return held.subset(keep)
