"""Real text for the MoE language model: gensim's shipped Wikipedia excerpt and news articles.

The corpus comes from files that ship inside the ``gensim`` wheel (no download):

* ``enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`` — a 6 MB
  excerpt of an English Wikipedia dump (about 200 pages). The wiki markup is removed with
  :func:`gensim.corpora.wikicorpus.filter_wiki` plus a few regular expressions below;
  redirects, headings, lists and other short lines are dropped so that what remains is
  running prose (about 2.5 MB).
* ``lee_background.cor`` — 300 Australian news articles (Lee et al. 2005), 360 KB.

Tokens are **bytes** of the UTF-8 encoding (vocabulary 256, no tokenizer to train or
download). Each of the two document streams is split at a fixed point: its first 90 %
of bytes are training data and its last 10 % validation, so the split is deterministic
and the two parts share no byte.
"""

from __future__ import annotations

import bz2
import functools
import re
from dataclasses import dataclass

import torch

__all__ = [
    "VOCAB_SIZE",
    "TextCorpus",
    "decode",
    "encode",
    "lee_documents",
    "load_corpus",
    "random_windows",
    "text_corpus",
    "validation_windows",
    "wiki_documents",
]

VOCAB_SIZE = 256
WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
LEE_FILE = "lee_background.cor"
_DOC_SEP = "\n\n"


def _gensim():
    try:
        import gensim.corpora.wikicorpus as wikicorpus
        from gensim.test.utils import datapath
    except ImportError as err:  # pragma: no cover - exercised only without gensim
        raise ImportError(
            "sci_moe.language needs gensim (its wheel ships the Wikipedia and news text "
            "used as corpus): pip install 'gensim>=4.3'"
        ) from err
    return wikicorpus, datapath


_BOLD = re.compile(r"'{2,}")
_SPACES = re.compile(r"[ \t\u00a0]+")
_SPACE_PUNCT = re.compile(r"\s+([,.;:!?)])")
_EMPTY_PARENS = re.compile(r"\(\s*[,;]?\s*\)")
_HEADING = re.compile(r"^=+.*=+$")


def clean_wiki(markup: str, min_line: int = 80) -> str:
    """Plain prose from one page of wiki markup.

    :func:`~gensim.corpora.wikicorpus.filter_wiki` removes templates, links, tables and
    references; then bold/italic quotes are dropped, spaces collapsed, and only lines of
    at least ``min_line`` characters that contain a full stop are kept (headings, lists,
    captions and redirects are shorter or lack one).
    """
    wikicorpus, _ = _gensim()
    text = wikicorpus.filter_wiki(markup)
    text = _BOLD.sub("", text)
    lines = []
    for line in text.splitlines():
        line = _SPACES.sub(" ", line).strip()
        line = _EMPTY_PARENS.sub("", line)
        line = _SPACE_PUNCT.sub(r"\1", line)
        line = _SPACES.sub(" ", line).strip()
        if len(line) < min_line or "." not in line or _HEADING.match(line):
            continue
        if line.startswith(("*", "#", "|", "{", "!", ":", ";")):
            continue
        lines.append(line)
    return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def wiki_documents() -> tuple[str, ...]:
    """The cleaned Wikipedia pages (non-empty ones, in file order)."""
    wikicorpus, datapath = _gensim()
    docs = []
    with bz2.open(datapath(WIKI_FILE), "rb") as fh:
        for _title, markup, _pid in wikicorpus.extract_pages(fh):
            text = clean_wiki(markup)
            if text:
                docs.append(text)
    return tuple(docs)


@functools.lru_cache(maxsize=1)
def lee_documents() -> tuple[str, ...]:
    """The 300 Lee news articles, one per line of the file."""
    _, datapath = _gensim()
    with open(datapath(LEE_FILE), encoding="utf-8", errors="replace") as fh:
        return tuple(s for s in (line.strip() for line in fh) if s)


def encode(text: str) -> torch.Tensor:
    """UTF-8 bytes of ``text`` as a ``uint8`` tensor (the token ids, vocabulary 256)."""
    return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).clone()


def decode(tokens: torch.Tensor) -> str:
    """Inverse of :func:`encode` (invalid byte sequences become U+FFFD)."""
    return bytes(tokens.to(torch.uint8).tolist()).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class TextCorpus:
    """Byte tokens of the corpus, split into training and validation parts.

    Attributes
    ----------
    train, val : Tensor, uint8, shape (n,)
        Concatenation of the training (first ``1 - val_fraction`` of each stream) and
        validation (last ``val_fraction``) parts of the Wikipedia and news streams.
    sources : dict of str to tuple of int
        ``(train_bytes, val_bytes)`` per stream.
    """

    train: torch.Tensor
    val: torch.Tensor
    sources: dict

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE


def _split(stream: torch.Tensor, val_fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    cut = round(stream.numel() * (1.0 - val_fraction))
    return stream[:cut], stream[cut:]


@functools.lru_cache(maxsize=4)
def load_corpus(val_fraction: float = 0.1) -> TextCorpus:
    """Load (once per process) and split the corpus.

    Parameters
    ----------
    val_fraction : float
        Fraction of each document stream, taken from its end, used for validation.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    trains, vals, sources = [], [], {}
    for name, docs in (("wikipedia", wiki_documents()), ("lee_news", lee_documents())):
        stream = encode(_DOC_SEP.join(docs) + _DOC_SEP)
        tr, va = _split(stream, val_fraction)
        trains.append(tr)
        vals.append(va)
        sources[name] = (tr.numel(), va.numel())
    return TextCorpus(torch.cat(trains), torch.cat(vals), sources)


def _check_window(data: torch.Tensor, seq_len: int) -> None:
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    if data.numel() < seq_len + 1:
        raise ValueError(f"data has {data.numel()} tokens, fewer than seq_len + 1 = {seq_len + 1}")


def random_windows(
    data: torch.Tensor, seq_len: int, n: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` training windows ``(x, y)`` at uniform random starts, ``y`` shifted by one token.

    The starts are drawn from ``generator`` alone, so the engine's
    :class:`~sci_moe.train.StreamBatches` (a generator seeded by ``(seed, step, rank)``)
    makes the batch of every step a function of the step: a resumed run draws exactly
    the windows an uninterrupted one would.

    Parameters
    ----------
    data : Tensor, uint8, shape (m,)
    seq_len, n : int
    generator : torch.Generator

    Returns
    -------
    x, y : Tensor, int64, shape (n, seq_len)
    """
    _check_window(data, seq_len)
    high = data.numel() - seq_len
    starts = torch.randint(0, high, (n,), generator=generator)
    w = data[starts.unsqueeze(1) + torch.arange(seq_len + 1)].long()
    return w[:, :-1], w[:, 1:]


def text_corpus(text: str, val_fraction: float = 0.1, name: str = "text") -> TextCorpus:
    """A :class:`TextCorpus` from one text: its UTF-8 bytes split as :func:`load_corpus` does.

    The first ``1 - val_fraction`` of the bytes train, the rest validates.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    tr, va = _split(encode(text), val_fraction)
    if tr.numel() < 2 or va.numel() < 2:
        raise ValueError(
            f"the text has {tr.numel() + va.numel()} bytes: too few to split into "
            f"training and validation parts with val_fraction={val_fraction}"
        )
    return TextCorpus(tr, va, {name: (tr.numel(), va.numel())})


def validation_windows(
    data: torch.Tensor, seq_len: int, num_windows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed validation windows: ``num_windows`` evenly spaced, non-random starts.

    Returns ``x, y`` of shape ``(num_windows, seq_len)`` (int64). The same arguments give
    the same windows in every run.
    """
    _check_window(data, seq_len)
    if num_windows < 1:
        raise ValueError(f"num_windows must be >= 1, got {num_windows}")
    high = data.numel() - seq_len - 1
    starts = torch.linspace(0, high, num_windows).long()
    w = data[starts.unsqueeze(1) + torch.arange(seq_len + 1)].long()
    return w[:, :-1], w[:, 1:]
