"""The ablation transforms of the fingerprint paper: formatting removal, vocabulary restriction.

Mansour & Heckel (arXiv 2412.02857) ask *what* the classifier uses by re-running it on
transformed text: with the formatting removed (``remove_formatting.py`` in their code) and
with the words restricted. :func:`remove_formatting` keeps the words and punctuation but
makes the layout uniform; :func:`restrict_vocabulary` keeps only words from a fixed
vocabulary (:func:`top_words` of the training texts), which removes formatting, punctuation,
casing and rare words at once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["remove_formatting", "restrict_vocabulary", "top_words", "words"]

_LINE_MARKER = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|[-*+\u2022][ \t]+|\d+[.)][ \t]+|>[ \t]*)")
_EMPHASIS = re.compile(r"(\*\*|__|\*(?=\w)|(?<=\w)\*)")
_SPACE = re.compile(r"\s+")
_WORDS = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def remove_formatting(text: str) -> str:
    """Remove the layout of ``text``: one line, single spaces, no list/heading/emphasis marks.

    Markdown-style line markers (``#`` headings, ``-``/``*``/``•`` bullets, ``1.`` numbers,
    ``>`` quotes) at the start of lines and ``**``/``__``/``*`` emphasis are removed, then
    every run of white space (newlines included) becomes one space.

    Examples
    --------
    >>> remove_formatting("## Title\\n\\n- one **bold** item\\n2. two   items")
    'Title one bold item two items'
    """
    lines = [_LINE_MARKER.sub("", ln) for ln in text.split("\n")]
    out = _EMPHASIS.sub("", "\n".join(lines))
    return _SPACE.sub(" ", out).strip()


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` (letters/digits, inner apostrophes kept)."""
    return _WORDS.findall(text.lower())


def top_words(texts: Iterable[str], n: int) -> frozenset[str]:
    """The ``n`` most frequent lower-cased words over ``texts`` (ties: first seen)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(words(t))
    return frozenset(w for w, _ in counts.most_common(n))


def restrict_vocabulary(text: str, vocabulary: Iterable[str], unknown: str = "") -> str:
    """Keep only the words of ``text`` that are in ``vocabulary``, joined by single spaces.

    Parameters
    ----------
    text : str
    vocabulary : iterable of str
        Lower-case words (e.g. :func:`top_words` of the training texts).
    unknown : str
        Replacement of a word outside the vocabulary; ``""`` drops it.

    Examples
    --------
    >>> restrict_vocabulary("The Cat, the *dog*.\\nA cat!", {"the", "cat"})
    'the cat the cat'
    >>> restrict_vocabulary("The dog", {"the"}, unknown="<unk>")
    'the <unk>'
    """
    vocab = vocabulary if isinstance(vocabulary, (set, frozenset)) else set(vocabulary)
    out = [w if w in vocab else unknown for w in words(text)]
    return " ".join(w for w in out if w)
