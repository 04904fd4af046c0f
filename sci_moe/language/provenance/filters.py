r"""Published web-filtering rules: C4 line filters, Gopher quality filters, normalisation, MinHash.

These are the document-processing steps whose differences leave the "fingerprints" that
Mansour & Heckel (NeurIPS 2025, arXiv 2412.02857) measure between web-filtered corpora.
Each function takes plain text and returns text (or ``None`` for a dropped document);
:func:`minhash_dedup` takes a list of texts and returns the indices it keeps.

* :func:`c4_filter` — the line and page rules of C4 (Raffel et al. 2020, sec. 2.2, and
  ``tensorflow_datasets`` ``c4_utils.clean_page``): keep lines that end in a terminal
  punctuation mark and have at least 5 words, drop lines mentioning "javascript" or cookie /
  privacy-policy boilerplate, remove bracketed citation markers ``[1]``, drop pages with
  fewer than 3 sentences, containing ``{`` or "lorem ipsum". (The bad-words list is not
  applied: it is not available offline.)
* :func:`gopher_filter` — the document-level quality rules of Gopher / MassiveText
  (Rae et al. 2021, appendix A.1.1): 50-100,000 words, mean word length 3-10, symbol-to-word
  ratio of ``#`` and ``...`` at most 0.1, at most 90 % of lines starting with a bullet, at most
  30 % of lines ending with an ellipsis, at least 80 % of words with an alphabetic character,
  at least 2 of the stop words ``the, be, to, of, and, that, have, with``; and the repetition
  rules on duplicate lines and paragraphs (at most 30 % each).
* :func:`normalize_text` — Unicode NFKC, typographic quotes and dashes to ASCII, whitespace
  collapsed, paragraphs as single lines.
* :func:`english_score` / :func:`language_id_filter` — a dictionary language identifier (the
  share of a text's words that are common English function words) with a threshold, at the
  page or the line level; it stands in for the fastText / langdetect scores with the
  thresholds the published pipelines differ in (C4: langdetect >= 0.99 per page; RefinedWeb
  and FineWeb: fastText >= 0.65), which are not available offline.
* :func:`minhash_dedup` — near-duplicate removal with MinHash LSH (``datasketch``, extra
  ``sci-moe[provenance]``) on word ``n``-gram shingles, as in RefinedWeb / FineWeb.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = [
    "C4_MIN_SENTENCES",
    "C4_MIN_WORDS_PER_LINE",
    "ENGLISH_FUNCTION_WORDS",
    "GOPHER_STOP_WORDS",
    "c4_filter",
    "english_score",
    "gopher_filter",
    "language_id_filter",
    "minhash_dedup",
    "normalize_text",
    "shingles",
]

#: C4: a kept line has at least this many words.
C4_MIN_WORDS_PER_LINE = 5
#: C4: a kept page has at least this many sentences.
C4_MIN_SENTENCES = 3
#: Gopher: a kept document contains at least two of these.
GOPHER_STOP_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})

#: Language identification: the most frequent English function words (closed classes).
ENGLISH_FUNCTION_WORDS = frozenset(
    "the of and to a in is that for it as was with be by on not he i this are or his from at "
    "which but have an had they you were their one all we can her has there been if more when "
    "will would who so no she other its may these them than some him what into only could our "
    "do any also my such after over most".split()
)
_ALPHA_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_TERMINAL = (".", "!", "?", '"', "\u201d")
_CITATION = re.compile(r"\[\d+\]|\[citation needed\]|\[edit\]", re.IGNORECASE)
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies")
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u2023\u25e6]|\d+[.)])\s")
_WORD = re.compile(r"\S+")


def c4_filter(
    text: str,
    min_words_per_line: int = C4_MIN_WORDS_PER_LINE,
    min_sentences: int = C4_MIN_SENTENCES,
) -> str | None:
    """Apply the C4 line and page filters to one document.

    Parameters
    ----------
    text : str
        A document; lines are separated by ``"\\n"``.
    min_words_per_line, min_sentences : int
        The C4 thresholds (5 and 3).

    Returns
    -------
    str or None
        The kept lines joined by ``"\\n"``, or ``None`` when the page is dropped.

    Examples
    --------
    >>> c4_filter("Menu\\nThe cat sat on the mat today. It was warm. Then it slept well.")
    'The cat sat on the mat today. It was warm. Then it slept well.'
    """
    low = text.lower()
    if "lorem ipsum" in low or "{" in text:
        return None
    kept = []
    for line in text.split("\n"):
        line = _CITATION.sub("", line).strip()
        if not line.endswith(_TERMINAL):
            continue
        if len(line.split()) < min_words_per_line:
            continue
        ll = line.lower()
        if "javascript" in ll or any(p in ll for p in _POLICY):
            continue
        kept.append(line)
    out = "\n".join(kept)
    if len(_SENTENCE_END.findall(out)) < min_sentences:
        return None
    return out


def _duplicate_fraction(items: list[str]) -> float:
    items = [s for s in items if s.strip()]
    if not items:
        return 0.0
    seen: set[str] = set()
    dup = 0
    for s in items:
        if s in seen:
            dup += 1
        seen.add(s)
    return dup / len(items)


def gopher_filter(text: str) -> str | None:
    """Apply the Gopher quality and repetition rules to one document (kept unchanged).

    Parameters
    ----------
    text : str

    Returns
    -------
    str or None
        ``text`` itself when it passes every rule, else ``None``.

    Examples
    --------
    >>> gopher_filter("too short") is None
    True
    """
    words = _WORD.findall(text)
    n = len(words)
    if not 50 <= n <= 100_000:
        return None
    mean_len = sum(len(w) for w in words) / n
    if not 3 <= mean_len <= 10:
        return None
    if (text.count("#") + text.count("...") + text.count("\u2026")) / n > 0.1:
        return None
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if lines:
        if sum(bool(_BULLET.match(ln)) for ln in lines) / len(lines) > 0.9:
            return None
        ell = sum(ln.rstrip().endswith(("...", "\u2026")) for ln in lines)
        if ell / len(lines) > 0.3:
            return None
    if sum(any(c.isalpha() for c in w) for w in words) / n < 0.8:
        return None
    lower = {w.lower().strip(".,;:!?\"'()") for w in words}
    if len(GOPHER_STOP_WORDS & lower) < 2:
        return None
    if _duplicate_fraction(text.split("\n")) > 0.3:
        return None
    if _duplicate_fraction(re.split(r"\n\s*\n", text)) > 0.3:
        return None
    return text


_ASCII_MAP = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u2026": "...",
    }
)
_HSPACE = re.compile(r"[^\S\n]+")


def normalize_text(text: str) -> str:
    """Unicode and whitespace normalisation.

    NFKC, typographic quotes / dashes / ellipsis to ASCII, runs of horizontal white space to
    one space, lines stripped, empty lines removed (so paragraphs are single lines separated
    by one ``"\\n"``).

    Examples
    --------
    >>> normalize_text("\\u201cA\\u201d \\u2013  b\\n\\n\\nc\\u00a0d ")
    '"A" - b\\nc d'
    """
    text = unicodedata.normalize("NFKC", text).translate(_ASCII_MAP)
    lines = (_HSPACE.sub(" ", ln).strip() for ln in text.split("\n"))
    return "\n".join(ln for ln in lines if ln)


def shingles(text: str, n: int = 5) -> set[str]:
    """Lower-cased word ``n``-grams of ``text`` (the whole text if it has fewer words)."""
    words = text.lower().split()
    if len(words) <= n:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def minhash_dedup(
    texts: Sequence[str],
    threshold: float = 0.8,
    num_perm: int = 128,
    ngram: int = 5,
    seed: int = 1,
) -> list[int]:
    r"""Indices of the texts kept by MinHash-LSH near-duplicate removal (first copy kept).

    Each text is a set of word ``ngram`` shingles; MinHash with ``num_perm`` permutations
    estimates the Jaccard similarity

    .. math:: J(A, B) = |A \cap B| / |A \cup B|,

    and LSH (``datasketch.MinHashLSH``) finds earlier texts with estimated :math:`J \ge`
    ``threshold``; a text with such a match is dropped. Empty texts are dropped.

    Parameters
    ----------
    texts : sequence of str
    threshold : float
        Jaccard threshold in (0, 1).
    num_perm, ngram, seed : int
        MinHash permutations, shingle length in words, MinHash seed.

    Returns
    -------
    list of int
        Kept indices, increasing.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError as err:
        raise ImportError(
            "MinHash deduplication needs datasketch: pip install 'sci-moe[provenance]'"
        ) from err
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    kept = []
    for i, t in enumerate(texts):
        sh = shingles(t, ngram)
        if not sh:
            continue
        m = MinHash(num_perm=num_perm, seed=seed)
        m.update_batch([s.encode("utf-8") for s in sh])
        if lsh.query(m):
            continue
        lsh.insert(str(i), m)
        kept.append(i)
    return kept


def english_score(text: str) -> float:
    """Share of the alphabetic words of ``text`` that are :data:`ENGLISH_FUNCTION_WORDS`.

    Running English prose scores about 0.35-0.5, lists, headers and code lower, other
    languages near 0; a text without alphabetic words scores 0.

    Examples
    --------
    >>> english_score("The cat sat on the mat.")
    0.5
    >>> english_score("Der Hund bellt.")
    0.0
    """
    found = _ALPHA_WORD.findall(text)
    if not found:
        return 0.0
    return sum(w.lower() in ENGLISH_FUNCTION_WORDS for w in found) / len(found)


def language_id_filter(
    text: str, threshold: float, *, per_line: bool = False, min_words: int = 1
) -> str | None:
    """Keep English text by :func:`english_score` ``>= threshold``.

    Page level (``per_line=False``): the whole text or ``None``. Line level: the lines that
    pass (lines with fewer than ``min_words`` words are judged with the page's score), joined
    by ``"\\n"``, or ``None`` when none does.

    Examples
    --------
    >>> language_id_filter("The cat sat on the mat.\\nDer Hund bellt.", 0.2, per_line=True)
    'The cat sat on the mat.'
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    if not per_line:
        return text if english_score(text) >= threshold else None
    page = english_score(text)
    kept = [
        ln
        for ln in text.split("\n")
        if (english_score(ln) if len(ln.split()) >= min_words else page) >= threshold
    ]
    kept = [ln for ln in kept if ln.strip()]
    return "\n".join(kept) if kept else None
